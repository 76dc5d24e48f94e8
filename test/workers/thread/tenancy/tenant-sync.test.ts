/**
 * The thread's side of the tenancy layer, over a fresh Thread object's SQLite: the ledger
 * (`thread/storage/ledger.ts`: an entry per `token_count` line, from its line alone) and the pushes to the
 * tenant's object (`thread/tenancy/tenant-sync.ts`: at most one in flight, coalesced, a second apart, repaired).
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { AlarmSchedule } from "../../../../durable-objects/common/alarms.ts";
import {
  creationTime,
  pendingEntries,
  ThreadLedger,
} from "../../../../durable-objects/thread/storage/ledger.ts";
import { sqlOf } from "../../../../durable-objects/thread/storage/sql.ts";
import { SyncValues } from "../../../../durable-objects/thread/tenancy/sync-values.ts";
import {
  INDEX_ENTRY_MAX_CHARS,
  indexEntryOf,
  SYNC_INTERVAL_MS,
  TenantSync,
} from "../../../../durable-objects/thread/tenancy/tenant-sync.ts";
import type { Env } from "../../../../env.ts";
import type { ThreadResource, ThreadSync } from "../../../../shared/api/index.ts";
import type { RolloutItem, TokenUsage } from "../../../../shared/protocol/index.ts";
import { newThreadId, threadStub } from "../../helpers/api.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

const usage = (input: number, cached: number, output: number, reasoning: number): TokenUsage => ({
  input_tokens: input,
  cached_input_tokens: cached,
  output_tokens: output,
  reasoning_output_tokens: reasoning,
  total_tokens: input + output,
});
const tokenCount = (total: TokenUsage, last: TokenUsage): RolloutItem => ({
  type: "event_msg",
  payload: {
    type: "token_count",
    info: { total_token_usage: total, last_token_usage: last, model_context_window: 1000 },
    rate_limits: null,
  },
});
const taskStarted = (turnId: string): RolloutItem => ({
  type: "event_msg",
  payload: { type: "task_started", turn_id: turnId, started_at: 0, model_context_window: 1000 },
});

function inThreadObject<T>(body: (sql: ReturnType<typeof sqlOf>) => T) {
  return runInDurableObject(threadStub(newThreadId()), (_i, state) =>
    body(sqlOf(state.storage.sql)),
  );
}

describe("ThreadLedger", () => {
  it("writes one entry per token_count line: how far its total moved, by task and model", async () => {
    const result = await inThreadObject((sql) => {
      const born = "2026-12-01T10:00:00.000Z";
      const ledger = new ThreadLedger(sql, born, usage(100, 0, 10, 0), undefined);
      ledger.requestModel = "gpt-test";
      ledger.observe(taskStarted("turn_a"), 5, "2026-12-01T10:00:01.000Z");
      ledger.observe(
        tokenCount(usage(160, 20, 15, 1), usage(60, 20, 5, 1)),
        8,
        "2026-12-01T10:00:02.000Z",
      );
      // A compaction: its last usage is the estimate of the new context, not what it cost.
      ledger.requestModel = "spindle-local";
      ledger.observe(taskStarted("turn_c"), 9, "2026-12-01T23:59:59.000Z");
      ledger.observe(
        tokenCount(usage(200, 20, 25, 1), { ...usage(0, 0, 0, 0), total_tokens: 77 }),
        12,
        "2026-12-02T00:00:00.000Z",
      );
      ledger.observe(
        tokenCount(usage(230, 30, 30, 1), usage(30, 10, 5, 0)),
        14,
        "2026-12-02T00:00:01.000Z",
      );
      return {
        entries: pendingEntries(sql, 10),
        totals: ledger.totals(),
        turn: ledger.turnUsage("turn_c"),
        other: ledger.turnUsage("turn_a"),
      };
    });
    const entry = (
      seq: number,
      turn: string,
      model: string,
      day: string,
      first: boolean,
      u: number[],
    ) => ({
      incarnation: "2026-12-01T10:00:00.000Z",
      seq,
      turn_id: turn,
      model,
      day,
      first_of_turn: first,
      input_tokens: u[0],
      cached_input_tokens: u[1],
      output_tokens: u[2],
      reasoning_tokens: u[3],
    });
    expect(result.entries).toEqual([
      entry(8, "turn_a", "gpt-test", "2026-12-01", true, [60, 20, 5, 1]),
      entry(12, "turn_c", "spindle-local", "2026-12-02", true, [40, 0, 10, 0]),
      entry(14, "turn_c", "spindle-local", "2026-12-02", false, [30, 10, 5, 0]),
    ]);
    expect(result.totals).toEqual({
      input_tokens: 130,
      cached_input_tokens: 30,
      output_tokens: 20,
      reasoning_tokens: 1,
      requests: 3,
      turns: 2,
    });
    expect(result.turn).toEqual(usage(70, 10, 15, 0));
    expect(result.other).toBe(undefined);
  });

  it("a rebuild from the lines counts what the live ledger counted, the copied lines excepted", async () => {
    const result = await inThreadObject((sql) => {
      const born = "2026-12-01T10:00:00.000Z";
      const items: RolloutItem[] = [
        taskStarted("copied"),
        tokenCount(usage(50, 0, 5, 0), usage(50, 0, 5, 0)),
        taskStarted("turn_1"),
        tokenCount(usage(80, 5, 9, 0), usage(30, 5, 4, 0)),
        tokenCount(usage(130, 5, 12, 2), usage(50, 0, 3, 2)),
      ];
      const live = new ThreadLedger(sql, born, usage(50, 0, 5, 0), undefined);
      items.slice(2).forEach((item, i) => {
        live.observe(item, i + 4, "2026-12-01T10:00:01.000Z");
      });
      const liveTotals = live.totals();
      const lines = items.map((item, i) => ({ seq: i + 2, line: { timestamp: born, ...item } }));
      ThreadLedger.rebuild(sql, born, lines as never, 3);
      const rebuilt = new ThreadLedger(sql, born, undefined, undefined);
      return { liveTotals, rebuiltTotals: rebuilt.totals(), turn: rebuilt.turnUsage("turn_1") };
    });
    expect(result.rebuiltTotals).toEqual(result.liveTotals);
    expect(result.liveTotals).toMatchObject({ input_tokens: 80, requests: 2, turns: 1 });
    expect(result.turn).toEqual(usage(80, 5, 7, 2));
  });

  it("a thread created again in the object is created after the deleted one", async () => {
    const result = await inThreadObject((sql) => {
      const values = new SyncValues(sql);
      const now = Date.UTC(2026, 11, 1);
      const before = creationTime(sql, now);
      values.put("created_after", new Date(now).toISOString());
      return [before, creationTime(sql, now), creationTime(sql, now + 5)];
    });
    expect(result).toEqual([
      "2026-12-01T00:00:00.000Z",
      "2026-12-01T00:00:00.001Z",
      "2026-12-01T00:00:00.005Z",
    ]);
  });
});

/** A clock the test moves, and an alarm schedule that records how far ahead each alarm is set. */
function recordedAlarms() {
  const clock = { at: 1_000_000, nowMs: () => clock.at };
  const alarmsSet: number[] = [];
  const alarms = new AlarmSchedule(
    {
      getAlarm: async () => null,
      setAlarm: async (at) => {
        alarmsSet.push(Number(at) - clock.at);
      },
      deleteAlarm: async () => {},
    },
    clock,
  );
  return { clock, alarms, alarmsSet };
}

/** A tenant's object that records pushes and answers when the test says. */
function fakeTenant() {
  const pushes: ThreadSync[] = [];
  const answers: ((ok: boolean) => void)[] = [];
  const stub = {
    sync: (req: ThreadSync) => {
      pushes.push(req);
      return new Promise((resolve, reject) => {
        answers.push((ok) =>
          ok
            ? resolve({ ok: true, value: { usageThrough: null, tenantGone: false } })
            : reject(new Error("the tenant is unreachable")),
        );
      });
    },
  };
  vi.spyOn(env.TENANT, "getByName").mockReturnValue(stub as never);
  return {
    pushes,
    answer: async (ok = true) => {
      answers.shift()?.(ok);
      await new Promise((resolve) => setTimeout(resolve, 0));
    },
  };
}

/** A thread with no hook deliveries, that ignores the subscriptions it learns. */
const NO_WEBHOOKS = {
  deliveries: { pending: () => [], acknowledged: () => {} },
  subscriptions: () => {},
};

describe("TenantSync", () => {
  it("pushes at once, folds changes during a push into one more, and leaves a push too soon to the alarm", async () => {
    const tenant = fakeTenant();
    const result = await inThreadObject(async (sql) => {
      const { clock, alarms, alarmsSet } = recordedAlarms();
      let version = 0;
      const waited: Promise<unknown>[] = [];
      const sync = new TenantSync({
        sql,
        env: env as unknown as Env,
        clock,
        alarms,
        name: { tenant: "acme", incarnation: null, threadId: "t1" },
        snapshot: async () =>
          ({ id: "t1", updated_at: String(version) }) as unknown as ThreadResource,
        tenantGone: async () => {},
        ...NO_WEBHOOKS,
        waitUntil: (work) => {
          waited.push(work);
        },
      });
      sync.kick(true);
      await new Promise((resolve) => setTimeout(resolve, 0));
      version = 1;
      sync.kick(true);
      version = 2;
      sync.kick(true);
      const inFlight = tenant.pushes.length;
      await tenant.answer();
      const afterFirst = tenant.pushes.length;
      await tenant.answer();
      // Soon after a push, a change is the alarm's to push.
      version = 3;
      clock.at += SYNC_INTERVAL_MS / 2;
      sync.kick();
      await Promise.all(waited);
      const deferred = { pushes: tenant.pushes.length, alarms: [...alarmsSet] };
      // The alarm's repair pushes it; a repair with nothing stale pushes nothing.
      const repaired = sync.repair();
      await new Promise((resolve) => setTimeout(resolve, 0));
      await tenant.answer();
      await repaired;
      await sync.repair();
      return {
        inFlight,
        afterFirst,
        deferred,
        final: tenant.pushes.length,
        versions: tenant.pushes.map((p) => [p.version, p.thread?.updated_at]),
      };
    });
    expect(result).toEqual({
      inFlight: 1,
      afterFirst: 2,
      deferred: { pushes: 2, alarms: [SYNC_INTERVAL_MS / 2] },
      final: 3,
      versions: [
        [1, "0"],
        [2, "2"],
        [3, "3"],
      ],
    });
  });

  it("a failed push keeps its entries and sets the alarm with backoff; the repair delivers them", async () => {
    const tenant = fakeTenant();
    const result = await inThreadObject(async (sql) => {
      const { clock, alarms, alarmsSet } = recordedAlarms();
      const ledger = new ThreadLedger(sql, "2026-12-01T10:00:00.000Z", undefined, "turn_1");
      ledger.observe(
        tokenCount(usage(10, 0, 1, 0), usage(10, 0, 1, 0)),
        3,
        "2026-12-01T10:00:01.000Z",
      );
      const sync = new TenantSync({
        sql,
        env: env as unknown as Env,
        clock,
        alarms,
        name: { tenant: "acme", incarnation: null, threadId: "t1" },
        snapshot: async () => null,
        tenantGone: async () => {},
        ...NO_WEBHOOKS,
        waitUntil: () => {},
      });
      const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
      const failing = sync.repair();
      await new Promise((resolve) => setTimeout(resolve, 0));
      await tenant.answer(false);
      await failing;
      warn.mockRestore();
      const kept = pendingEntries(sql, 10).length;
      const repairing = sync.repair();
      await new Promise((resolve) => setTimeout(resolve, 0));
      await tenant.answer(true);
      await repairing;
      return {
        alarms: alarmsSet,
        kept,
        pushed: tenant.pushes.map((p) => p.usage.map((e) => e.seq)),
      };
    });
    expect(result).toEqual({ alarms: [2 * SYNC_INTERVAL_MS], kept: 1, pushed: [[3], [3]] });
  });
});

describe("indexEntryOf", () => {
  it("keeps a thread as it is, unless its resource is too long for an index row", () => {
    const thread = {
      id: "t1",
      config: {
        model: "m",
        provider: "local",
        base_instructions: "be brief",
        context_sections: { a: { role: "user", text: "x" } },
        tools: [{ type: "function", name: "f" }],
      },
    } as unknown as ThreadResource;
    expect(indexEntryOf(thread)).toBe(thread);
    const long = {
      ...thread,
      config: { ...thread.config, developer_instructions: "y".repeat(INDEX_ENTRY_MAX_CHARS) },
    } as unknown as ThreadResource;
    expect(indexEntryOf(long)).toEqual({
      id: "t1",
      config: { model: "m", provider: "local", context_sections: {}, tools: [] },
    });
  });
});
