/** The `Tenant` object's quota grants (`tenant/quota-grants.ts`) over a fresh tenant object's SQLite. */
import { describe, expect, it } from "vitest";
import type { sqlOf } from "../../../durable-objects/common/sql.ts";
import {
  QuotaGrants,
  RECLAIM_PARALLEL,
  RESERVED_RETRY_AFTER_S,
  type YieldAnswer,
} from "../../../durable-objects/tenant/quota-grants.ts";
import type {
  GrantQuotaRequest,
  QuotaGrant,
  Quotas,
  RpcResult,
} from "../../../shared/api/index.ts";
import { NO_QUOTAS } from "../../../shared/api/index.ts";
import { withTenantStorage } from "../helpers/tenant-storage.ts";

describe("QuotaGrants", () => {
  const quotas = (q: Partial<Quotas>): Quotas => ({ ...NO_QUOTAS, ...q });
  const ask = (threadId: string, q: Partial<Quotas>, held = 0, tokens = 0): GrantQuotaRequest => ({
    threadId,
    incarnation: null,
    held,
    usage: [],
    quotas: quotas(q),
    tokens,
  });
  const RELEASED: YieldAnswer = { released: true, reserved: 0, usage: [] };
  /** A holder running a task that may still spend `reserved`. */
  const kept = (reserved = 0): YieldAnswer => ({ released: false, reserved, usage: [] });
  /**
   * Admissions over the object's SQLite, holders answering as `answers` says (else released;
   * undefined: the call failed); `taken` lists the threads whose entries it took, and how many.
   */
  const admissionsOver = (
    sql: ReturnType<typeof sqlOf>,
    clock: { nowMs: () => number },
    answers: Record<string, YieldAnswer> = {},
  ) => {
    const asked: string[] = [];
    const taken: string[] = [];
    const admissions = new QuotaGrants({
      sql,
      clock,
      yieldOf: async (threadId) => {
        asked.push(threadId);
        return threadId in answers ? answers[threadId] : RELEASED;
      },
      take: (threadId, usage) => {
        if (usage.length > 0) taken.push(`${threadId}:${usage.length}`);
      },
    });
    return { admissions, asked, taken };
  };
  const outcome = (r: RpcResult<QuotaGrant>) => (r.ok ? "ok" : r.error.quota);
  /** The threads holding an admission, as the object's rows say. */
  const heldIn = (sql: ReturnType<typeof sqlOf>) =>
    sql<{ thread_id: string }>`SELECT thread_id FROM tenant_admissions ORDER BY thread_id`
      .toArray()
      .map((row) => row.thread_id);

  it("a slot per holder: at the limit it asks the others, oldest first, and admits when one gives its slot back", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const { admissions, asked } = admissionsOver(sql, clock, { a: kept(), c: kept() });
      const max = { max_running_turns: 2 };
      const steps = [
        outcome(await admissions.admit(ask("a", max), () => 0)),
        outcome(await admissions.admit(ask("b", max), () => 0)),
      ];
      // The holder's own next admission never counts against it, and asks nobody.
      steps.push(outcome(await admissions.admit(ask("a", max), () => 0)));
      const askedBefore = [...asked];
      // c at the limit: a runs a task (keeps its slot), b is idle and releases.
      steps.push(outcome(await admissions.admit(ask("c", max), () => 0)));
      const askedForC = asked.splice(0);
      // d: both holders (a, c) run.
      steps.push(outcome(await admissions.admit(ask("d", max), () => 0)));
      return { steps, askedBefore, askedForC, askedForD: asked, holders: heldIn(sql) };
    });
    expect(result).toEqual({
      steps: ["ok", "ok", "ok", "ok", "max_running_turns"],
      askedBefore: [],
      askedForC: ["b", "a"],
      askedForD: ["a", "c"],
      holders: ["a", "c"],
    });
  });

  it("asks a batch of holders at a time, and stops once there is room", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const { admissions, asked } = admissionsOver(sql, clock);
      const max = { max_running_turns: RECLAIM_PARALLEL + 4 };
      for (let i = 0; i < RECLAIM_PARALLEL + 4; i++) {
        clock.at += 1;
        await admissions.admit(ask(`h${i}`, max), () => 0);
      }
      const admitted = await admissions.admit(ask("late", max), () => 0);
      return { admitted: admitted.ok, asked, holders: heldIn(sql).length };
    });
    expect(result).toEqual({
      admitted: true,
      asked: Array.from({ length: RECLAIM_PARALLEL }, (_, i) => `h${i}`),
      // The whole first batch released (every holder here is idle); the rest were not asked.
      holders: 4 + 1,
    });
  });

  it("a release ends the hold it names, never a newer one; a refusal drops the hold the asker held, never a newer one", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const { admissions } = admissionsOver(sql, clock, { b: kept() });
      const two = { max_running_turns: 2 };
      const grantOf = async (req: GrantQuotaRequest) => {
        clock.at += 1;
        const r = await admissions.admit(req, () => 0);
        if (!r.ok) throw new Error(`not admitted: ${r.error.detail}`);
        return r.value.grant;
      };
      const first = await grantOf(ask("a", two));
      const second = await grantOf(ask("a", two));
      admissions.release({ threadId: "a", incarnation: null, grant: first, usage: [] });
      const afterOld = heldIn(sql);
      admissions.release({ threadId: "a", incarnation: null, grant: second, usage: [] });
      const afterNew = heldIn(sql);
      const held = await grantOf(ask("a", two));
      await grantOf(ask("b", two));
      // The quota is down to one: a, asking with its grant, is refused (b runs), and its hold goes.
      const refused = outcome(
        await admissions.admit(ask("a", { max_running_turns: 1 }, held), () => 0),
      );
      const afterRefusal = heldIn(sql);
      // A request that asked with an older grant than the one now held leaves the newer one.
      await grantOf(ask("a", two));
      const stale = outcome(
        await admissions.admit(ask("a", { max_running_turns: 1 }, held), () => 0),
      );
      return {
        grew: second > first,
        afterOld,
        afterNew,
        refused,
        afterRefusal,
        stale,
        holders: heldIn(sql),
      };
    });
    expect(result).toEqual({
      grew: true,
      afterOld: ["a"],
      afterNew: [],
      refused: "max_running_turns",
      afterRefusal: ["b"],
      stale: "max_running_turns",
      holders: ["a", "b"],
    });
  });

  it("shares: the reservation or a quarter of the rest; counted usage settles them; shares out are asked back before a refusal", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const answers: Record<string, YieldAnswer> = { a: kept(3), d: undefined };
      const { admissions, asked } = admissionsOver(sql, clock, answers);
      const day = { tokens_per_day: 100 };
      let used = 0;
      const share = async (threadId: string, tokens: number) => {
        clock.at += 1;
        const r = await admissions.admit(ask(threadId, day, 0, tokens), () => used);
        return r.ok ? r.value.tokens : { quota: r.error.quota, retry: r.error.retryAfterSeconds };
      };
      const shares = [await share("a", 10), await share("b", 10), await share("c", 10)];
      const askedEarly = asked.splice(0);
      // The ledger counts what a, b and c spent (and 12 tokens of others): no longer reserved.
      used = 60;
      admissions.settle("a", 20);
      admissions.settle("b", 18);
      admissions.settle("c", 10);
      // 9 reserved, 31 left: d needs 35, and gets it once a (running: 3 more) and c (idle)
      // answered; b, whose share is spent, is not asked.
      const d = await share("d", 35);
      const askedForD = asked.splice(0);
      // e needs 10 of the 2 left: a still runs and d cannot be reached.
      const e = await share("e", 10);
      const askedForE = asked.splice(0);
      // Once a and d are done, nothing is reserved: a task past what is left runs alone, with
      // exactly its reservation, and nothing else is admitted meanwhile.
      admissions.release({
        threadId: "a",
        incarnation: null,
        grant: Number.MAX_SAFE_INTEGER,
        usage: [],
      });
      answers.d = RELEASED;
      const alone = await share("e", 500);
      answers.e = kept(500);
      const meanwhile = await share("f", 1);
      used = 100;
      const spent = await admissions.admit(ask("g", day, 0, 1), () => used);
      return {
        shares,
        askedEarly,
        d,
        askedForD,
        e,
        askedForE,
        alone,
        meanwhile,
        spent: spent.ok
          ? "ok"
          : { quota: spent.error.quota, tomorrow: (spent.error.retryAfterSeconds ?? 0) > 3600 },
      };
    });
    const reserved = { quota: "tokens_per_day", retry: RESERVED_RETRY_AFTER_S };
    expect(result).toEqual({
      shares: [25, 18, 14],
      askedEarly: [],
      d: 35,
      askedForD: ["a", "c"],
      e: reserved,
      askedForE: ["a", "d"],
      alone: 500,
      meanwhile: reserved,
      spent: { quota: "tokens_per_day", tomorrow: true },
    });
  });

  it("takes the entries an admission, a release and a holder's answer carry, before the hold changes", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const usage = [
        {
          incarnation: "i",
          seq: 1,
          turn_id: "t",
          model: "m",
          day: "2026-12-01",
          first_of_turn: true,
          input_tokens: 5,
          cached_input_tokens: 0,
          output_tokens: 1,
          reasoning_tokens: 0,
        },
      ];
      const { admissions, taken } = admissionsOver(sql, clock, {
        a: { released: true, reserved: 0, usage },
      });
      const day = { tokens_per_day: 100 };
      await admissions.admit({ ...ask("a", day, 0, 60), usage }, () => 0);
      await admissions.admit({ ...ask("b", day, 0, 60) }, () => 0);
      admissions.release({
        threadId: "b",
        incarnation: null,
        grant: Number.MAX_SAFE_INTEGER,
        usage,
      });
      return { taken, holders: heldIn(sql) };
    });
    // a's own request, then a's answer when b needed its share, then b's release.
    expect(result).toEqual({ taken: ["a:1", "a:1", "b:1"], holders: [] });
  });

  it("checks the day's tokens again after asking for a slot: pushes land meanwhile", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      let used = 0;
      const admissions = new QuotaGrants({
        sql,
        clock,
        yieldOf: async () => {
          // While the holder is asked, a push brings the tokens the day had left.
          used = 100;
          return RELEASED;
        },
        take: () => {},
      });
      const both = { max_running_turns: 1, tokens_per_day: 100 };
      const first = await admissions.admit(ask("a", both), () => used);
      const second = await admissions.admit(ask("b", both), () => used);
      return { first: outcome(first), second: outcome(second), held: heldIn(sql) };
    });
    expect(result).toEqual({ first: "ok", second: "tokens_per_day", held: [] });
  });

  it("a new instance knows every hold still out", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const before = admissionsOver(sql, clock).admissions;
      const granted = await before.admit(
        ask("a", { max_running_turns: 1, tokens_per_day: 80 }),
        () => 0,
      );
      const { admissions: after, asked } = admissionsOver(sql, clock, { a: kept() });
      const refused = await after.admit(ask("b", { max_running_turns: 1 }), () => 0);
      clock.at += 1;
      const later = await after.admit(ask("a", { max_running_turns: 1 }), () => 0);
      return {
        holders: heldIn(sql),
        refused: outcome(refused),
        asked,
        grew: granted.ok && later.ok && later.value.grant > granted.value.grant,
      };
    });
    expect(result).toEqual({
      holders: ["a"],
      refused: "max_running_turns",
      asked: ["a"],
      grew: true,
    });
  });
});
