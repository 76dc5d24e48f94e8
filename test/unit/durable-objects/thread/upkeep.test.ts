import { afterEach, describe, expect, it, vi } from "vitest";
import {
  AlarmSchedule,
  RETRY_MAX_MS,
  retryDelayMs,
} from "../../../../durable-objects/common/alarms.ts";
import type { LiveThread } from "../../../../durable-objects/thread/live-thread.ts";
import type { EventLog } from "../../../../durable-objects/thread/storage/event-log.ts";
import type { IdempotencyKeys } from "../../../../durable-objects/thread/storage/idempotency-keys.ts";
import type { MetaStore } from "../../../../durable-objects/thread/storage/meta-store.ts";
import {
  FLUSH_DELAY_MS,
  FLUSH_TAIL_MAX_LINES,
  RUNNING_TASK_ALARM_MS,
  Upkeep,
  type UpkeepDeps,
} from "../../../../durable-objects/thread/upkeep.ts";

const NOW = 1_700_000_000_000;

afterEach(() => {
  vi.restoreAllMocks();
});

describe("retryDelayMs", () => {
  it("doubles from a second with each failed attempt, up to the longest wait", () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 30].map(retryDelayMs)).toEqual([
      1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 300_000, 300_000,
      300_000,
    ]);
    expect(FLUSH_DELAY_MS).toBe(1_000);
    expect(RETRY_MAX_MS).toBe(300_000);
  });
});

/** A promise with its resolve and reject, for work the test finishes when it chooses. */
function deferred<T = void>() {
  let resolve: (value: T) => void = () => {};
  let reject: (err: unknown) => void = () => {};
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Every fake an upkeep run touches, recording what it was asked to do. */
function harness(
  opts: {
    /** The stored alarm (null: none). */
    storedAlarm?: number | null;
    lastSeq?: number;
    flushedThrough?: number;
    /** What each flush does, in turn (undefined: succeeds at once). */
    flushes?: (() => Promise<void>)[];
    nextExpiryMs?: number;
    loaded?: boolean;
  } = {},
) {
  const log: string[] = [];
  const clock = { now: NOW, nowMs: () => clock.now };
  const storage = {
    stored: opts.storedAlarm ?? null,
    async getAlarm() {
      return storage.stored;
    },
    async setAlarm(at: number | Date) {
      log.push(`alarm ${Number(at) - clock.now}`);
      storage.stored = Number(at);
    },
    async deleteAlarm() {
      storage.stored = null;
    },
  };
  const alarms = new AlarmSchedule(storage, clock);
  const metaValues = new Map<string, unknown>();
  const meta = {
    values: metaValues,
    get: (key: string) => metaValues.get(key),
    put: (key: string, value: unknown) => {
      metaValues.set(key, value);
    },
    packTurns: () => log.push("pack turns"),
  };
  const flushes = [...(opts.flushes ?? [])];
  const live = {
    meta: { tenant: "local", id: "t1" },
    log: { lastSeq: opts.lastSeq ?? 10 },
    segments: {
      flushedThrough: () => opts.flushedThrough ?? 0,
      flush: async () => {
        log.push("flush");
        await (flushes.shift() ?? (async () => {}))();
      },
    },
    maybeCheckpoint: async () => {
      log.push("checkpoint");
    },
  };
  const state = {
    halted: false,
    taskRunning: false,
    loaded: opts.loaded ?? true,
    waited: [] as Promise<unknown>[],
  };
  const deps: UpkeepDeps = {
    alarms,
    clock,
    meta: meta as unknown as MetaStore,
    events: {
      prune: () => log.push("prune events"),
      nextExpiryMs: () => opts.nextExpiryMs,
    } as unknown as EventLog,
    idempotency: { prune: () => log.push("prune keys") } as unknown as IdempotencyKeys,
    loaded: () => (state.loaded ? (live as unknown as LiveThread) : undefined),
    load: async () => {
      log.push("load");
      return state.loaded ? (live as unknown as LiveThread) : undefined;
    },
    taskRunning: () => state.taskRunning,
    drainQueue: async () => {
      log.push("drain");
    },
    idleCompaction: async () => {
      log.push("idle compaction");
    },
    halted: () => state.halted,
    waitUntil: (work) => {
      log.push("waitUntil");
      state.waited.push(work);
    },
  };
  return { upkeep: new Upkeep(deps), log, storage, clock, meta, state, alarms };
}

/** What every run does after its flush (and checkpoint), in order. */
const AFTER_FLUSH = ["prune events", "prune keys", "pack turns", "drain", "idle compaction"];

const failing = () => Promise.reject(new Error("R2 is down"));

describe("Upkeep: a run flushes, checkpoints, prunes, keeps the alarm and drains the queue", () => {
  it("a successful run flushes, resets the failed attempts, checkpoints, prunes, groups turn rows and drains", async () => {
    const h = harness();
    h.meta.put("flush_attempts", 3);
    await h.upkeep.run();
    expect(h.log).toEqual(["load", "flush", "checkpoint", ...AFTER_FLUSH]);
    expect(Object.fromEntries(h.meta.values)).toEqual({ flush_attempts: 0 });
    expect(h.storage.stored).toBeNull();
  });

  it("a failed flush counts the attempt and sets the alarm to now plus its backoff", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const h = harness({ flushes: [failing, failing] });
    await h.upkeep.run();
    expect(Object.fromEntries(h.meta.values)).toEqual({ flush_attempts: 1 });
    expect(h.storage.stored).toBe(NOW + retryDelayMs(1));
    h.clock.now += 10_000;
    await h.upkeep.run();
    expect(Object.fromEntries(h.meta.values)).toEqual({ flush_attempts: 2 });
    expect(h.storage.stored).toBe(NOW + 10_000 + retryDelayMs(2));
    // No checkpoint after a failed flush; the rest of the upkeep still runs.
    expect(h.log).toEqual([
      "load",
      "flush",
      `alarm ${retryDelayMs(1)}`,
      ...AFTER_FLUSH,
      "load",
      "flush",
      `alarm ${retryDelayMs(2)}`,
      ...AFTER_FLUSH,
    ]);
  });

  it("a backoff may move the alarm later than it was: a retry waits its whole delay", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const h = harness({ storedAlarm: NOW + 500, flushes: [failing] });
    h.meta.put("flush_attempts", 4);
    await h.upkeep.run();
    expect(h.meta.values.get("flush_attempts")).toBe(5);
    expect(h.storage.stored).toBe(NOW + retryDelayMs(5));
  });

  it("a flush that succeeds after failures resets the attempts to zero", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const h = harness({ flushes: [failing, failing] });
    await h.upkeep.run();
    await h.upkeep.run();
    expect(h.meta.values.get("flush_attempts")).toBe(2);
    await h.upkeep.run();
    expect(Object.fromEntries(h.meta.values)).toEqual({ flush_attempts: 0 });
  });

  it("a halted thread (being deleted) runs nothing at all", async () => {
    const h = harness();
    h.state.halted = true;
    await h.upkeep.run();
    expect(h.log).toEqual([]);
    expect(h.meta.values.size).toBe(0);
  });

  it("a thread that is gone is not flushed nor pruned", async () => {
    const h = harness({ loaded: false });
    await h.upkeep.run();
    expect(h.log).toEqual(["load"]);
  });

  it("a running task keeps the alarm due within its watch interval", async () => {
    const h = harness();
    h.state.taskRunning = true;
    await h.upkeep.run();
    expect(h.storage.stored).toBe(NOW + RUNNING_TASK_ALARM_MS);
  });

  it("a running task brings a long flush backoff forward to its watch interval", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const h = harness({ flushes: [failing] });
    h.meta.put("flush_attempts", 10);
    h.state.taskRunning = true;
    await h.upkeep.run();
    expect(h.log.filter((l) => l.startsWith("alarm"))).toEqual([
      `alarm ${RETRY_MAX_MS}`,
      `alarm ${RUNNING_TASK_ALARM_MS}`,
    ]);
    expect(h.storage.stored).toBe(NOW + RUNNING_TASK_ALARM_MS);
  });

  it("events due to expire set the alarm when none is due (the alarm that woke it fired)", async () => {
    const h = harness({ nextExpiryMs: NOW + 900_000 });
    h.alarms.fired();
    await h.upkeep.run();
    expect(h.storage.stored).toBe(NOW + 900_000);
  });

  it("event expiry leaves an alarm already due alone", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const h = harness({ nextExpiryMs: NOW + 900_000, flushes: [failing] });
    h.alarms.fired();
    await h.upkeep.run();
    expect(h.storage.stored).toBe(NOW + retryDelayMs(1));
  });
});

describe("Upkeep.scheduleFlush: lines just written go to R2 soon, or now when the tail is long", () => {
  it("brings the alarm within the flush delay, and flushes nothing itself", async () => {
    const h = harness({ lastSeq: 120, flushedThrough: 100 });
    await h.upkeep.scheduleFlush();
    expect(h.log).toEqual([`alarm ${FLUSH_DELAY_MS}`]);
    expect(h.storage.stored).toBe(NOW + FLUSH_DELAY_MS);
  });

  it("keeps an alarm already due sooner than the flush delay", async () => {
    const h = harness({ storedAlarm: NOW + 10, lastSeq: 120, flushedThrough: 100 });
    await h.upkeep.scheduleFlush();
    expect(h.log).toEqual([]);
    expect(h.storage.stored).toBe(NOW + 10);
  });

  it("runs at once, off the request, when the unflushed tail reaches its limit", async () => {
    const h = harness({ lastSeq: 100 + FLUSH_TAIL_MAX_LINES, flushedThrough: 100 });
    await h.upkeep.scheduleFlush();
    // scheduleFlush answers without waiting for the run, which the object is told to keep alive.
    expect(h.log.slice(0, 2)).toEqual(["load", "waitUntil"]);
    expect(h.state.waited).toHaveLength(1);
    await Promise.all(h.state.waited);
    expect(h.log).toEqual(["load", "waitUntil", "flush", "checkpoint", ...AFTER_FLUSH]);
    // The run is the flush: no alarm was needed for it.
    expect(h.storage.stored).toBeNull();
  });

  it("a tail one line short of the limit waits for the alarm", async () => {
    const h = harness({ lastSeq: 99 + FLUSH_TAIL_MAX_LINES, flushedThrough: 100 });
    await h.upkeep.scheduleFlush();
    expect(h.state.waited).toEqual([]);
    expect(h.log).toEqual([`alarm ${FLUSH_DELAY_MS}`]);
  });

  it("does nothing for a thread that is not loaded", async () => {
    const h = harness({ loaded: false });
    await h.upkeep.scheduleFlush();
    expect(h.log).toEqual([]);
    expect(h.storage.stored).toBeNull();
  });
});

describe("Upkeep.settled: a delete waits for every run in flight", () => {
  it("resolves at once when no run was started", async () => {
    await expect(harness().upkeep.settled()).resolves.toBeUndefined();
  });

  it("resolves only once every started run has ended, failed ones included", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const first = deferred();
    const second = deferred();
    const h = harness({ flushes: [() => first.promise, () => second.promise] });
    const runs = [h.upkeep.run(), h.upkeep.run()];
    let settled = false;
    const waiting = h.upkeep.settled().then(() => {
      settled = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(settled).toBe(false);
    first.resolve();
    await runs[0];
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(settled).toBe(false);
    second.reject(new Error("R2 is down"));
    await waiting;
    expect(settled).toBe(true);
    await Promise.all(runs);
    expect(h.meta.values.get("flush_attempts")).toBe(1);
  });

  it("does not cover a run started after it was asked", async () => {
    const late = deferred();
    const h = harness({ flushes: [async () => {}, () => late.promise] });
    await h.upkeep.run();
    const settled = h.upkeep.settled();
    const run = h.upkeep.run();
    await expect(settled).resolves.toBeUndefined();
    late.resolve();
    await run;
  });
});
