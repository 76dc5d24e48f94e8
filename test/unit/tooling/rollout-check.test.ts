import { describe, expect, it } from "vitest";
import { checkRollout } from "../../helpers/rollout-check.ts";

const line = (n: number) =>
  JSON.stringify({
    timestamp: "t",
    type: "event_msg",
    payload: { type: "user_message", message: `m${n}` },
  });
const seg = (first: number, last: number) => ({
  key: `threads/x/y/segments/${String(first).padStart(12, "0")}-${String(last).padStart(12, "0")}.jsonl.gz`,
  first_seq: first,
  text: `${Array.from({ length: last - first + 1 }, (_, i) => line(first + i)).join("\n")}\n`,
});

describe("checkRollout", () => {
  it("accepts contiguous segments plus an overlapping, identical SQLite tail", () => {
    const result = checkRollout(
      [seg(1, 3), seg(4, 5)],
      [
        { seq: 5, line: line(5) },
        { seq: 6, line: line(6) },
      ],
    );
    expect(result).toEqual({ ok: true, errors: [], lines: [1, 2, 3, 4, 5, 6].map(line) });
  });

  it("reports a gap, a duplicate, a mismatch and an undecodable line", () => {
    expect(checkRollout([seg(1, 2), seg(4, 4)], []).errors).toContain("seq 3 is missing");
    expect(checkRollout([seg(1, 2), seg(2, 3)], []).errors).toContain("seq 2 appears twice in R2");
    expect(checkRollout([seg(1, 2)], [{ seq: 2, line: line(9) }]).errors).toContain(
      "seq 2 differs between R2 and SQLite",
    );
    expect(checkRollout([], [{ seq: 1, line: "{" }]).errors[0]).toMatch(/^seq 1 does not decode/);
  });

  it("reports a segment key that does not name its range", () => {
    const bad = { ...seg(1, 2), key: "threads/x/y/segments/000000000001-000000000009.jsonl.gz" };
    expect(checkRollout([bad], []).ok).toBe(false);
  });
});

describe("checkRollout on a fork that borrows segments", () => {
  /** The part [first, last] of a source segment named for [from, to]. */
  const borrowed = (from: number, to: number, first: number, last: number) => ({
    ...seg(first, last),
    key: seg(from, to).key,
    borrowed: true,
  });

  it("accepts a borrowed part of a larger segment, after the fork's first line in SQLite", () => {
    const result = checkRollout([borrowed(1, 9, 2, 5)], [{ seq: 1, line: line(1) }]);
    expect(result).toEqual({ ok: true, errors: [], lines: [1, 2, 3, 4, 5].map(line) });
    expect(checkRollout([seg(1, 1), borrowed(1, 9, 2, 5), seg(6, 6)], []).ok).toBe(true);
  });

  it("reports a borrowed part outside the segment it names, and a gap it does not bridge", () => {
    expect(checkRollout([seg(1, 1), borrowed(3, 4, 2, 5)], []).ok).toBe(false);
    expect(checkRollout([borrowed(1, 9, 2, 5)], []).errors).toContain("seq 1 is missing");
    // An own segment may not start late, nor a borrowed one anywhere but at seq 2.
    expect(checkRollout([seg(2, 3)], [{ seq: 1, line: line(1) }]).ok).toBe(false);
    expect(checkRollout([borrowed(1, 9, 3, 5)], [{ seq: 1, line: line(1) }]).ok).toBe(false);
  });

  it("accepts the key a thread created again under a kept key takes", () => {
    const again = {
      ...seg(1, 2),
      key: seg(1, 2).key.replace(".jsonl.gz", ".1796400000000.jsonl.gz"),
    };
    expect(checkRollout([again], []).ok).toBe(true);
  });
});
