import { describe, expect, it } from "vitest";
import { cacheReport, comparedRequest } from "../../../shared/model-requests/index.ts";

const NOTHING = { compacted: false, rolledBack: false, afterCompactionRequest: false };
const msg = (text: string) => ({
  type: "message",
  role: "user",
  content: [{ type: "input_text", text }],
});
const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value)).length;

describe("the cache report of one request against the one before", () => {
  it("counts the shared bytes up to the first difference, inside the item where they part", () => {
    const a = comparedRequest("m", "be brief", [], [msg("hello"), msg("abcdef")], 0);
    const b = comparedRequest("m", "be brief", [], [msg("hello"), msg("abcxyz"), msg("new")], 0);
    const report = cacheReport(a, b, NOTHING, 12, null);
    const common = bytes("be brief") + bytes([]) + bytes(msg("hello"));
    // `{"type":"message",…"text":"abc` is shared by the two second items.
    const partial = JSON.stringify(msg("abcdef")).indexOf("def");
    expect(report).toEqual({
      reused_prefix_items: 1,
      reused_prefix_bytes: common + partial,
      new_bytes:
        bytes("be brief") +
        bytes([]) +
        bytes(msg("hello")) +
        bytes(msg("abcxyz")) +
        bytes(msg("new")) -
        common -
        partial,
      provider_cached_tokens: 12,
      break_reason: "history_changed",
    });
  });

  it("counts UTF-8 bytes, and never half of a character's", () => {
    const a = comparedRequest("m", "é😀a", [], [], 0);
    const b = comparedRequest("m", "é😁a", [], [], 0);
    // `"é` is shared: the quote, then two bytes; the emoji differ in their low surrogate.
    expect(cacheReport(a, b, NOTHING, null, null).reused_prefix_bytes).toBe(3);
  });

  it("names the first cause that applies, in order", () => {
    const base = comparedRequest("m", "i", [{ name: "t" }], [msg("x")], 0);
    const reason = (next: ReturnType<typeof comparedRequest>, between = NOTHING) =>
      cacheReport(base, next, between, null, null).break_reason;
    expect(reason(comparedRequest("m2", "j", [], [], 0))).toBe("model_switch");
    expect(reason(comparedRequest("m", "j", [], [], 0), { ...NOTHING, compacted: true })).toBe(
      "compaction",
    );
    expect(reason(comparedRequest("m", "j", [], [], 0), { ...NOTHING, rolledBack: true })).toBe(
      "rollback",
    );
    expect(reason(comparedRequest("m", "j", [], [], 0))).toBe("instructions_changed");
    expect(reason(comparedRequest("m", "i", [], [msg("x")], 0))).toBe("tools_changed");
    expect(reason(comparedRequest("m", "i", [{ name: "t" }], [msg("y")], 0))).toBe(
      "history_changed",
    );
    // A prefix that held: nothing broke, even after a compaction line (one that failed).
    expect(
      reason(comparedRequest("m", "i", [{ name: "t" }], [msg("x"), msg("y")], 0), {
        ...NOTHING,
        compacted: true,
      }),
    ).toBeNull();
    expect(cacheReport(undefined, base, NOTHING, null, null).break_reason).toBe("first_request");
  });
});
