import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { calendarDate, isUtcZone } from "../../../shared/session/index.ts";

/** The date as `Intl` gives it, the reference `calendarDate` must match. */
function intlDate(epochMs: number, timeZone: string): string {
  return new Intl.DateTimeFormat("en-CA", {
    timeZone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
  }).format(new Date(epochMs));
}

const instants = fc.integer({ min: Date.UTC(1, 0, 1), max: Date.UTC(275_000, 0, 1) });

describe("calendarDate", () => {
  it("dates UTC zones, in any case, as Intl does, without Intl", () => {
    const names = ["UTC", "utc", "Etc/UTC", "GMT", "Etc/GMT", "etc/gmt"];
    expect(names.every(isUtcZone)).toBe(true);
    fc.assert(
      fc.property(instants, fc.constantFrom(...names), (ms, zone) => {
        expect(calendarDate(ms, zone)).toBe(intlDate(ms, zone));
      }),
    );
    expect(calendarDate(Date.UTC(2026, 11, 31, 23, 59, 59, 999), "UTC")).toBe("2026-12-31");
    expect(calendarDate(Date.UTC(2027, 0, 1), "UTC")).toBe("2027-01-01");
  });

  it("dates other zones in their own time", () => {
    expect(isUtcZone("Asia/Tokyo")).toBe(false);
    expect(isUtcZone("Etc/GMT+1")).toBe(false);
    // 2026-12-31 20:00 UTC is already 2027-01-01 in Tokyo and still 2026-12-31 in Etc/GMT+1.
    const ms = Date.UTC(2026, 11, 31, 20);
    expect(calendarDate(ms, "Asia/Tokyo")).toBe("2027-01-01");
    expect(calendarDate(ms, "Etc/GMT+1")).toBe("2026-12-31");
    expect(calendarDate(ms, "America/Los_Angeles")).toBe(intlDate(ms, "America/Los_Angeles"));
  });
});
