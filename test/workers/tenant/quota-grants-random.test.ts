import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { migrate } from "../../../durable-objects/common/migrations.ts";
import { sqlOf } from "../../../durable-objects/common/sql.ts";
import { QuotaGrants } from "../../../durable-objects/tenant/quota-grants.ts";
import { TENANT_MIGRATIONS } from "../../../durable-objects/tenant/schema.ts";
import { type Asked, QuotaLease } from "../../../durable-objects/thread/quotas/quota-lease.ts";
import {
  type LedgerEntry,
  NO_QUOTAS,
  type Quotas,
  type RpcResult,
} from "../../../shared/api/index.ts";
import { newTenantId } from "../helpers/tenancy.ts";

/*
 * Model-based test of leased admission (`tenant/quota-grants.ts` with one `thread/quotas/quota-lease.ts` per
 * thread, wired as `thread/quotas/quota-gate.ts` wires them; calls between them are immediate): random
 * sequences of task starts reserving random amounts (one thread, or two at once), steered input
 * reserving more, task ends, spending (within what the running task reserved, as a model held to
 * its output limit spends), pushes of a thread's ledger entries, time passing (leases ending,
 * release timers firing) and restarts of the tenant's object (a new instance over the same rows)
 * or of a thread's (its lease forgotten, its entries kept). After every step:
 * - never more threads run a task than `max_running_turns`;
 * - every token a thread spent is counted by the tenant or reserved by the thread's hold (its
 *   row's share), and the day's real usage stays below the limit plus the largest reservation
 *   admitted;
 * - a start alone is refused for `max_running_turns` only while that many other threads run, and
 *   for `tokens_per_day` only once the day's tokens are used or when the tasks running elsewhere
 *   reserve what it needs (every holder answers here, so no share that nobody uses refuses
 *   anyone);
 * - a start that asked is never admitted once the day's tokens are used.
 */

const THREADS = ["t0", "t1", "t2", "t3"];
const NOON = Date.UTC(2026, 11, 1, 12);
const DAY = "2026-12-01";

type Step =
  | { op: "start"; thread: number; tokens: number }
  | { op: "startTwo"; a: number; b: number; tokens: number }
  | { op: "steer"; thread: number; tokens: number }
  | { op: "end"; thread: number }
  | { op: "spend"; thread: number; percent: number }
  | { op: "push"; thread: number }
  | { op: "wait"; ms: number }
  | { op: "restartTenant" }
  | { op: "restartThread"; thread: number };

const thread = fc.nat({ max: THREADS.length - 1 });
const tokens = fc.integer({ min: 1, max: 1_500 });
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ op: fc.constant("start" as const), thread, tokens }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant("startTwo" as const), a: thread, b: thread, tokens }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("steer" as const), thread, tokens }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant("end" as const), thread }) },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant("spend" as const),
      thread,
      percent: fc.integer({ min: 0, max: 100 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("push" as const), thread }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("wait" as const),
      ms: fc.integer({ min: 1, max: 40_000 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ op: "restartTenant" as const }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("restartThread" as const), thread }) },
);

const scenario = fc.record({
  max: fc.option(fc.integer({ min: 1, max: 3 }), { nil: null }),
  limit: fc.option(fc.integer({ min: 200, max: 6_000 }), { nil: null }),
  steps: fc.array(step, { minLength: 5, maxLength: 60 }),
});

type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

interface Sim {
  now: number;
  running: boolean[];
  /** Each thread's ledger entries, in order; those up to `taken` the tenant has counted. */
  entries: LedgerEntry[][];
  taken: number[];
  timers: { owner: number; at: number; fn: () => void; live: boolean }[];
  leases: QuotaLease[];
  tenant: QuotaGrants;
}

/** How many refusals of a start alone the runs checked, per quota. */
const checked = { slots: 0, tokens: 0, reserved: 0 };

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
const tokensOf = (entries: readonly LedgerEntry[]) =>
  sum(entries.map((e) => e.input_tokens + e.output_tokens));

async function run(sql: ReturnType<typeof sqlOf>, { max, limit, steps }: Scenario): Promise<void> {
  const quotas: Quotas = {
    ...NO_QUOTAS,
    max_running_turns: max ?? (limit === null ? 2 : null),
    tokens_per_day: limit,
  };
  const clock = { nowMs: () => sim.now };
  /** A thread's entries the tenant has not counted: what its requests and answers carry. */
  const pending = (i: number) => (sim.entries[i] ?? []).slice(sim.taken[i] ?? 0);
  /** The tenant's ledger (tenant/usage-rollup.ts): each entry once, each count settling the holder's share. */
  const take = (threadId: string, usage: readonly LedgerEntry[]) => {
    const i = THREADS.indexOf(threadId);
    const fresh = usage.filter((e) => e.seq > (sim.taken[i] ?? 0));
    if (fresh.length === 0) return;
    sim.taken[i] = Math.max(...fresh.map((e) => e.seq));
    sim.tenant.settle(threadId, tokensOf(fresh));
  };
  const newTenant = () =>
    new QuotaGrants({
      sql,
      clock,
      take,
      yieldOf: async (threadId, grant) => {
        const i = THREADS.indexOf(threadId);
        const lease = sim.leases[i] as QuotaLease;
        return { ...lease.yield(grant), usage: pending(i) };
      },
    });
  const newLease = (i: number) =>
    new QuotaLease({
      clock,
      spent: () => tokensOf(sim.entries[i] ?? []),
      running: () => sim.running[i] === true,
      release: (grant) =>
        sim.tenant.release({
          threadId: THREADS[i] ?? "",
          incarnation: null,
          grant,
          usage: pending(i),
        }),
      later: (ms, fn) => {
        const timer = { owner: i, at: sim.now + ms, fn, live: true };
        sim.timers.push(timer);
        return () => {
          timer.live = false;
        };
      },
    });
  const sim: Sim = {
    now: NOON,
    running: THREADS.map(() => false),
    entries: THREADS.map(() => []),
    taken: THREADS.map(() => 0),
    timers: [],
    leases: [],
    tenant: undefined as unknown as QuotaGrants,
  };
  sim.tenant = newTenant();
  sim.leases = THREADS.map((_, i) => newLease(i));
  const runningCount = () => sim.running.filter(Boolean).length;
  const lease = (i: number) => sim.leases[i] as QuotaLease;
  const realUsed = () => sum(sim.entries.map(tokensOf));
  const counted = () => sum(sim.entries.map((e, i) => tokensOf(e.slice(0, sim.taken[i] ?? 0))));
  /** What the tasks running in threads other than `i` may still spend. */
  const runningReserved = (i: number) =>
    sum(THREADS.map((_, j) => (j !== i && sim.running[j] ? lease(j).taskReserved : 0)));
  let largestAdmitted = 0;

  /** What quota-gate.ts does when asking: the lease takes the tenant's answer. */
  const ask = async (i: number, held: number, reserving: number): Promise<RpcResult<unknown>> => {
    const at: Asked = lease(i).asking(reserving);
    const answer = await sim.tenant.admit(
      {
        threadId: THREADS[i] ?? "",
        incarnation: null,
        held,
        usage: pending(i),
        quotas,
        tokens: reserving,
      },
      () => counted(),
    );
    if (answer.ok) {
      lease(i).granted(answer.value, quotas, at);
      largestAdmitted = Math.max(largestAdmitted, reserving);
    } else {
      lease(i).refused(held);
    }
    return answer;
  };

  /** What quota-gate.ts does when a task reserving `reserving` is about to start. */
  const start = async (i: number, reserving: number, alone: boolean): Promise<void> => {
    if (sim.running[i]) return;
    const needs = limit === null ? 0 : reserving;
    if (!lease(i).covers(quotas, needs)) {
      const othersRunning = runningCount();
      const others = runningReserved(i);
      const usedBefore = realUsed();
      const answer = await ask(i, lease(i).held, needs);
      if (!answer.ok) {
        const quota = answer.error.quota;
        expect(["max_running_turns", "tokens_per_day"]).toContain(quota);
        if (!alone) return;
        if (quota === "max_running_turns") {
          checked.slots++;
          expect(othersRunning).toBeGreaterThanOrEqual(quotas.max_running_turns ?? 0);
        } else {
          checked.tokens++;
          const used = usedBefore >= (limit ?? 0);
          if (!used) checked.reserved++;
          expect(used || (others > 0 && usedBefore + others + needs > (limit ?? 0))).toBe(true);
        }
        return;
      }
      if (limit !== null) expect(usedBefore).toBeLessThan(limit);
    }
    if (sim.running[i]) return;
    sim.running[i] = true;
    lease(i).taskStarted(needs);
  };

  /** What quota-gate.ts does for steered input reserving `more`: a refusal drops no hold. */
  const steer = async (i: number, more: number): Promise<void> => {
    if (!sim.running[i] || limit === null) return;
    const reserving = lease(i).taskReserved + more;
    if (lease(i).covers(quotas, reserving)) {
      lease(i).taskExtended(more);
      return;
    }
    const answer = await ask(i, 0, reserving);
    if (answer.ok) lease(i).taskExtended(more);
  };

  for (const s of steps) {
    switch (s.op) {
      case "start":
        await start(s.thread, s.tokens, true);
        break;
      case "startTwo":
        await Promise.all([start(s.a, s.tokens, false), start(s.b, s.tokens, false)]);
        break;
      case "steer":
        await steer(s.thread, s.tokens);
        break;
      case "end":
        if (sim.running[s.thread]) {
          sim.running[s.thread] = false;
          lease(s.thread).taskEnded();
        }
        break;
      case "spend": {
        // A running task spends within what it reserved.
        const x = Math.floor((lease(s.thread).taskReserved * s.percent) / 100);
        const entries = sim.entries[s.thread] ?? [];
        if (!sim.running[s.thread] || x === 0) break;
        entries.push({
          incarnation: "2026-12-01T00:00:00.000Z",
          seq: entries.length + 1,
          turn_id: "turn",
          model: "m",
          day: DAY,
          first_of_turn: false,
          input_tokens: x,
          cached_input_tokens: 0,
          output_tokens: 0,
          reasoning_tokens: 0,
        });
        break;
      }
      case "push":
        take(THREADS[s.thread] ?? "", pending(s.thread));
        break;
      case "wait":
        sim.now += s.ms;
        for (const timer of sim.timers) {
          if (timer.live && timer.at <= sim.now) {
            timer.live = false;
            timer.fn();
          }
        }
        break;
      case "restartTenant":
        sim.tenant = newTenant();
        break;
      case "restartThread":
        // An instance that went away runs nothing and remembers no lease; its timers went too,
        // its ledger entries stay.
        if (sim.running[s.thread]) break;
        for (const timer of sim.timers) if (timer.owner === s.thread) timer.live = false;
        sim.leases[s.thread] = newLease(s.thread);
        break;
    }
    if (quotas.max_running_turns !== null) {
      expect(runningCount()).toBeLessThanOrEqual(quotas.max_running_turns);
    }
    if (limit !== null) {
      // Each thread's tokens not counted yet are reserved by its hold: none without one.
      const shares = new Map(
        sql<{ thread_id: string; share: number }>`SELECT thread_id, share FROM tenant_admissions`
          .toArray()
          .map((row) => [row.thread_id, row.share]),
      );
      for (const [i, threadId] of THREADS.entries()) {
        expect(tokensOf(pending(i))).toBeLessThanOrEqual(shares.get(threadId) ?? 0);
      }
      expect(realUsed()).toBeLessThan(limit + Math.max(1, largestAdmitted));
    }
  }
}

describe("leased admission, random operations", () => {
  it("never runs more than max_running_turns, keeps the day's tokens within one reservation of the limit, and refuses only when the quota is really used", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (sc) => {
        await runInDurableObject(env.TENANT.getByName(newTenantId()), async (_i, state) => {
          migrate(state.storage.sql, TENANT_MIGRATIONS);
          await run(sqlOf(state.storage.sql), sc);
        });
      }),
      { numRuns: 300 },
    );
    // The refusal checks ran, for both quotas, and for tokens reserved by running tasks.
    expect(checked.slots).toBeGreaterThan(0);
    expect(checked.tokens).toBeGreaterThan(0);
    expect(checked.reserved).toBeGreaterThan(0);
  }, 120_000);
});
