/** The `Tenant` object's usage rollups (`tenant/usage-rollup.ts`) over a fresh tenant object's SQLite. */
import { describe, expect, it } from "vitest";
import { UsageRollup } from "../../../durable-objects/tenant/usage-rollup.ts";
import type { LedgerEntry } from "../../../shared/api/index.ts";
import { withTenantStorage } from "../helpers/tenant-storage.ts";

describe("UsageRollup", () => {
  const entry = (
    incarnation: string,
    seq: number,
    extra: Partial<LedgerEntry> = {},
  ): LedgerEntry => ({
    incarnation,
    seq,
    turn_id: `turn_${seq}`,
    model: "m",
    day: "2026-12-01",
    first_of_turn: true,
    input_tokens: 10,
    cached_input_tokens: 1,
    output_tokens: 2,
    reasoning_tokens: 0,
    ...extra,
  });

  it("takes each entry once, by incarnation then seq, and a later incarnation starts over", async () => {
    const result = await withTenantStorage(({ sql }) => {
      const counted: [string, number][] = [];
      const usage = new UsageRollup(sql, (threadId, tokens) => counted.push([threadId, tokens]));
      const A = "2026-12-01T00:00:00.000Z";
      const B = "2026-12-01T01:00:00.000Z";
      const marks = [
        usage.apply("t", [entry(A, 3), entry(A, 5)]),
        usage.apply("t", [entry(A, 5), entry(A, 3)]),
        usage.apply("t", [entry(A, 7, { first_of_turn: false })]),
        usage.apply("t", [entry(B, 2, { model: "n" })]),
        usage.apply("t", [entry(A, 9)]),
        usage.apply("t", []),
      ];
      const byModel = usage.query({ group_by: "model", limit: 10 }, Date.UTC(2026, 11, 1));
      return {
        marks,
        byModel: byModel.ok ? byModel.value.data : byModel,
        tokens: usage.tokensOn("2026-12-01"),
        counted,
      };
    });
    expect(result.marks).toEqual([
      { incarnation: "2026-12-01T00:00:00.000Z", seq: 5 },
      { incarnation: "2026-12-01T00:00:00.000Z", seq: 5 },
      { incarnation: "2026-12-01T00:00:00.000Z", seq: 7 },
      { incarnation: "2026-12-01T01:00:00.000Z", seq: 2 },
      { incarnation: "2026-12-01T01:00:00.000Z", seq: 2 },
      { incarnation: "2026-12-01T01:00:00.000Z", seq: 2 },
    ]);
    const bucket = (model: string, n: number, turns: number) => ({
      object: "usage_bucket",
      bucket: model,
      input_tokens: 10 * n,
      cached_input_tokens: n,
      output_tokens: 2 * n,
      reasoning_tokens: 0,
      requests: n,
      turns,
      cache_hit_ratio: 0.1,
    });
    expect(result.byModel).toEqual([bucket("m", 3, 2), bucket("n", 1, 1)]);
    expect(result.tokens).toBe(48);
    // Each apply that took entries tells what they counted; one that took none, nothing.
    expect(result.counted).toEqual([
      ["t", 24],
      ["t", 12],
      ["t", 12],
    ]);
  });

  it("answers a range by UTC day, start included, end excluded, with the default range", async () => {
    const result = await withTenantStorage(({ sql }) => {
      const usage = new UsageRollup(sql);
      const A = "2026-12-01T00:00:00.000Z";
      usage.apply("t", [
        entry(A, 1, { day: "2026-10-01" }),
        entry(A, 2, { day: "2026-11-20" }),
        entry(A, 3, { day: "2026-12-01" }),
      ]);
      const days = (q: Partial<{ start: string; end: string }>) => {
        const page = usage.query({ group_by: "day", limit: 10, ...q }, Date.UTC(2026, 11, 1, 12));
        return page.ok ? page.value.data.map((b) => b.bucket) : page;
      };
      return {
        defaults: days({}),
        range: days({ start: "2026-11-20", end: "2026-12-01" }),
        all: days({ start: "2026-01-01", end: "2027-01-01" }),
      };
    });
    expect(result).toEqual({
      defaults: ["2026-11-20", "2026-12-01"],
      range: ["2026-11-20"],
      all: ["2026-10-01", "2026-11-20", "2026-12-01"],
    });
  });
});
