import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TOKEN_SHARE_PARTS, tokenShare } from "../../../../durable-objects/tenant/token-shares.ts";

describe("tokenShare", () => {
  it("grants at least the reservation, a quarter of the rest when larger", () => {
    expect(tokenShare(1_000, 0, 0, 100)).toEqual({ share: 250 });
    expect(tokenShare(1_000, 200, 400, 100)).toEqual({ share: 100 });
    expect(tokenShare(1_000, 200, 400, 400)).toEqual({ share: 400 });
    expect(tokenShare(1_000, 0, 0, 0)).toEqual({ share: 1_000 / TOKEN_SHARE_PARTS });
  });

  it("refuses once the day's tokens are used, and a reservation past the rest while others hold some", () => {
    expect(tokenShare(1_000, 1_000, 0, 1)).toEqual({ refused: "used" });
    expect(tokenShare(1_000, 1_200, 0, 1)).toEqual({ refused: "used" });
    expect(tokenShare(1_000, 200, 400, 401)).toEqual({ refused: "reserved" });
    // After a turn admitted past the limit, what is reserved is more than the rest.
    expect(tokenShare(1_000, 900, 300, 1)).toEqual({ refused: "reserved" });
  });

  it("admits a reservation past the rest with exactly that share when nothing else is reserved", () => {
    expect(tokenShare(1_000, 0, 0, 4_000)).toEqual({ share: 4_000 });
    expect(tokenShare(1_000, 999, 0, 50)).toEqual({ share: 50 });
  });

  it("keeps the day's usage below the limit plus what the one turn admitted past it uses", () => {
    // Threads start tasks reserving what they may use, spend within their shares (counted at
    // once: counting moves tokens from reserved to used), and end, giving back the rest.
    const step = fc.oneof(
      fc.record({
        op: fc.constant("start" as const),
        thread: fc.nat(5),
        tokens: fc.integer({ min: 1, max: 600 }),
      }),
      fc.record({
        op: fc.constant("spend" as const),
        thread: fc.nat(5),
        percent: fc.integer({ min: 0, max: 100 }),
      }),
      fc.record({ op: fc.constant("end" as const), thread: fc.nat(5) }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2_000 }),
        fc.array(step, { minLength: 10, maxLength: 80 }),
        (limit, steps) => {
          let used = 0;
          /** Each running thread's share left, and whether it was admitted past the rest. */
          const holds = new Map<number, { left: number; past: boolean }>();
          const reservedBy = (me: number) =>
            [...holds].reduce((sum, [t, h]) => (t === me ? sum : sum + h.left), 0);
          /** The limit, or what an admission past it left committed (below limit + its tokens). */
          let bound = limit;
          for (const s of steps) {
            if (s.op === "start") {
              if (holds.has(s.thread)) continue;
              const reserved = reservedBy(s.thread);
              const answer = tokenShare(limit, used, reserved, s.tokens);
              if ("refused" in answer) continue;
              expect(answer.share).toBeGreaterThanOrEqual(s.tokens);
              const past = s.tokens > limit - used - reserved;
              if (past) {
                // Past the rest only alone: no other thread holds anything, so none runs.
                expect(reserved).toBe(0);
                expect(answer.share).toBe(s.tokens);
                expect(used + s.tokens).toBeLessThan(limit + s.tokens);
                bound = Math.max(bound, used + s.tokens);
              }
              // Every task here spends within its share; the share is what it may use.
              holds.set(s.thread, { left: answer.share, past });
            } else if (s.op === "spend") {
              const hold = holds.get(s.thread);
              if (hold === undefined) continue;
              const x = Math.floor((hold.left * s.percent) / 100);
              hold.left -= x;
              used += x;
            } else {
              holds.delete(s.thread);
            }
            expect([...holds.values()].filter((h) => h.past).length).toBeLessThanOrEqual(1);
            // Committed (used and reserved), hence the real usage, never passes the bound.
            expect(used + reservedBy(-1)).toBeLessThanOrEqual(bound);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
