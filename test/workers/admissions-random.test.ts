import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AdmissionLease } from "../../durable-objects/admission-lease.ts";
import { migrate } from "../../durable-objects/schema.ts";
import { sqlOf } from "../../durable-objects/sql.ts";
import { TenantAdmissions } from "../../durable-objects/tenant-admissions.ts";
import { TENANT_MIGRATIONS } from "../../durable-objects/tenant-schema.ts";
import { NO_QUOTAS, type Quotas } from "../../shared/api/index.ts";
import { newTenantId } from "./helpers/tenancy.ts";

/*
 * Model-based test of leased admission (`tenant-admissions.ts` with one `admission-lease.ts` per
 * thread, wired as `quota-gate.ts` wires them; calls between them are immediate): random
 * sequences of task starts (one thread, or two at once), task ends, token spending, time passing
 * (leases ending, release timers firing) and restarts of the tenant's object (a new instance
 * over the same rows) or of a thread's (its lease forgotten). After every step:
 * - never more threads run a task than `max_running_turns`;
 * - a start alone is refused for `max_running_turns` only while that many other threads run,
 *   and for `tokens_per_day` only once the day's tokens are used (every holder answers here, so
 *   no slot or share that nobody uses refuses anyone);
 * - a start that asked is never admitted once the day's tokens are used.
 */

const THREADS = ["t0", "t1", "t2", "t3"];
const NOON = Date.UTC(2026, 11, 1, 12);

type Step =
  | { op: "start"; thread: number }
  | { op: "startTwo"; a: number; b: number }
  | { op: "end"; thread: number }
  | { op: "spend"; thread: number; tokens: number }
  | { op: "wait"; ms: number }
  | { op: "restartTenant" }
  | { op: "restartThread"; thread: number };

const thread = fc.nat({ max: THREADS.length - 1 });
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ op: fc.constant("start" as const), thread }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant("startTwo" as const), a: thread, b: thread }),
  },
  { weight: 4, arbitrary: fc.record({ op: fc.constant("end" as const), thread }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant("spend" as const),
      thread,
      tokens: fc.integer({ min: 1, max: 400 }),
    }),
  },
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
  limit: fc.option(fc.integer({ min: 200, max: 4_000 }), { nil: null }),
  steps: fc.array(step, { minLength: 5, maxLength: 60 }),
});

type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

interface Sim {
  now: number;
  used: number;
  running: boolean[];
  spent: number[];
  timers: { at: number; fn: () => void; live: boolean }[];
  leases: AdmissionLease[];
  tenant: TenantAdmissions;
}

/** How many refusals of a start alone the runs checked, per quota. */
const checked = { slots: 0, tokens: 0 };

async function run(sql: ReturnType<typeof sqlOf>, { max, limit, steps }: Scenario): Promise<void> {
  const quotas: Quotas = {
    ...NO_QUOTAS,
    max_running_turns: max ?? (limit === null ? 2 : null),
    tokens_per_day: limit,
  };
  const clock = { nowMs: () => sim.now };
  const newTenant = () =>
    new TenantAdmissions({
      sql,
      clock,
      yieldOf: async (threadId, grant) =>
        sim.leases[THREADS.indexOf(threadId)]?.yield(grant) ? "released" : "kept",
    });
  const newLease = (i: number) =>
    new AdmissionLease({
      clock,
      spent: () => sim.spent[i] ?? 0,
      running: () => sim.running[i] === true,
      release: (grant) =>
        sim.tenant.release({ threadId: THREADS[i] ?? "", incarnation: null, grant }),
      later: (ms, fn) => {
        const timer = { at: sim.now + ms, fn, live: true };
        sim.timers.push(timer);
        return () => {
          timer.live = false;
        };
      },
    });
  const sim: Sim = {
    now: NOON,
    used: 0,
    running: THREADS.map(() => false),
    spent: THREADS.map(() => 0),
    timers: [],
    leases: [],
    tenant: undefined as unknown as TenantAdmissions,
  };
  sim.tenant = newTenant();
  sim.leases = THREADS.map((_, i) => newLease(i));
  const runningCount = () => sim.running.filter(Boolean).length;

  /** What quota-gate.ts does when a task is about to start; then the task starts, or not. */
  const start = async (i: number, alone: boolean): Promise<void> => {
    if (sim.running[i]) return;
    const lease = sim.leases[i] as AdmissionLease;
    if (lease.covers(quotas)) {
      sim.running[i] = true;
      return;
    }
    const held = lease.held;
    const askedAt = sim.now;
    const othersRunning = runningCount();
    lease.asking();
    const answer = await sim.tenant.admit(
      { threadId: THREADS[i] ?? "", incarnation: null, held, usage: [], quotas },
      () => sim.used,
    );
    if (!answer.ok) {
      lease.refused(held);
      const quota = answer.error.quota;
      expect(["max_running_turns", "tokens_per_day"]).toContain(quota);
      if (!alone) return;
      checked[quota === "max_running_turns" ? "slots" : "tokens"]++;
      if (quota === "max_running_turns") {
        expect(othersRunning).toBeGreaterThanOrEqual(quotas.max_running_turns ?? 0);
      } else {
        expect(sim.used).toBeGreaterThanOrEqual(limit ?? 0);
      }
      return;
    }
    if (limit !== null) expect(sim.used).toBeLessThan(limit);
    lease.granted(answer.value, quotas, askedAt);
    if (sim.running[i]) return;
    sim.running[i] = true;
  };

  for (const s of steps) {
    switch (s.op) {
      case "start":
        await start(s.thread, true);
        break;
      case "startTwo":
        await Promise.all([start(s.a, false), start(s.b, false)]);
        break;
      case "end":
        if (sim.running[s.thread]) {
          sim.running[s.thread] = false;
          sim.leases[s.thread]?.taskEnded();
        }
        break;
      case "spend":
        if (sim.running[s.thread]) {
          sim.spent[s.thread] = (sim.spent[s.thread] ?? 0) + s.tokens;
          sim.used += s.tokens;
        }
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
        // An instance that went away runs nothing and remembers no lease; its timers went too.
        if (!sim.running[s.thread]) sim.leases[s.thread] = newLease(s.thread);
        break;
    }
    if (quotas.max_running_turns !== null) {
      expect(runningCount()).toBeLessThanOrEqual(quotas.max_running_turns);
    }
  }
}

describe("leased admission, random operations", () => {
  it("never runs more than max_running_turns, and refuses only when the quota is really used", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (sc) => {
        await runInDurableObject(env.TENANT.getByName(newTenantId()), async (_i, state) => {
          migrate(state.storage.sql, TENANT_MIGRATIONS);
          await run(sqlOf(state.storage.sql), sc);
        });
      }),
      { numRuns: 300 },
    );
    // The refusal checks ran, for both quotas.
    expect(checked.slots).toBeGreaterThan(0);
    expect(checked.tokens).toBeGreaterThan(0);
  }, 60_000);
});
