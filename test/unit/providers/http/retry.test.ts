import { describe, expect, it } from "vitest";
import { backoffDelayMs, retryAfterMs } from "../../../../shared/providers/http/retry.ts";

const NOW = Date.UTC(2030, 5, 1, 8, 0, 0);
const headers = (h: Record<string, string>) => new Headers(h);

describe("backoffDelayMs", () => {
  it("doubles from 500 ms per failed attempt and stops growing at 8 s", () => {
    const top = () => 0.999_999;
    expect([1, 2, 3, 4, 5, 6, 7].map((a) => backoffDelayMs(a, top))).toEqual([
      499, 999, 1999, 3999, 7999, 7999, 7999,
    ]);
  });

  it("draws the whole range from zero (full jitter)", () => {
    expect(backoffDelayMs(3, () => 0)).toBe(0);
    expect(backoffDelayMs(3, () => 0.5)).toBe(1000);
  });
});

describe("retryAfterMs", () => {
  it("reads Retry-After seconds, including fractions", () => {
    expect(retryAfterMs(headers({ "retry-after": "2" }), NOW)).toBe(2000);
    expect(retryAfterMs(headers({ "retry-after": "0.25" }), NOW)).toBe(250);
  });

  it("reads a Retry-After HTTP date relative to now, clamping the past to zero", () => {
    expect(retryAfterMs(headers({ "retry-after": new Date(NOW + 7000).toUTCString() }), NOW)).toBe(
      7000,
    );
    expect(retryAfterMs(headers({ "retry-after": new Date(NOW - 7000).toUTCString() }), NOW)).toBe(
      0,
    );
  });

  it("prefers retry-after-ms over Retry-After", () => {
    expect(retryAfterMs(headers({ "retry-after-ms": "1500", "retry-after": "9" }), NOW)).toBe(1500);
  });

  it("ignores absent or unreadable values", () => {
    expect(retryAfterMs(headers({}), NOW)).toBeUndefined();
    expect(retryAfterMs(headers({ "retry-after": "soon" }), NOW)).toBeUndefined();
    expect(retryAfterMs(headers({ "retry-after": "-3" }), NOW)).toBeUndefined();
  });
});
