import { describeError } from "../../shared/observability/index.ts";
import type { Clock } from "../../shared/ports/index.ts";
import { type AlarmSchedule, retryDelayMs } from "../common/alarms.ts";
import { objectLog } from "../common/log.ts";
import { type LiveThread, readWholeRollout } from "./live-thread.ts";
import type { EventLog } from "./storage/event-log.ts";
import type { IdempotencyKeys } from "./storage/idempotency-keys.ts";
import type { MetaStore } from "./storage/meta-store.ts";

/** Lines written at turn end are flushed to R2 this long after, so bursts share one segment. */
export const FLUSH_DELAY_MS = 1_000;
/** An unflushed tail longer than this is flushed right away. */
export const FLUSH_TAIL_MAX_LINES = 5_000;
/**
 * While a task runs, an alarm stays due within this long: if the instance goes away mid-turn,
 * the alarm wakes a new one, which settles the turn and flushes its lines without waiting for a
 * request.
 */
export const RUNNING_TASK_ALARM_MS = 30_000;

export interface UpkeepDeps {
  alarms: AlarmSchedule;
  clock: Clock;
  meta: MetaStore;
  events: EventLog;
  idempotency: IdempotencyKeys;
  /** The thread as loaded now, without loading it (undefined: not loaded or gone). */
  loaded: () => LiveThread | undefined;
  /** The thread, loaded if need be. */
  load: () => Promise<LiveThread | undefined>;
  /** Whether a task runs now: its watch alarm is kept due. */
  taskRunning: () => boolean;
  /** Starts a queued turn left waiting, if any. */
  drainQueue: () => Promise<void>;
  /** The idle compaction's duty (`IdleCompaction.run`), after the queue's. */
  idleCompaction: (live: LiveThread) => Promise<void>;
  /** Whether the thread is being deleted: nothing new starts. */
  halted: () => boolean;
  waitUntil: (work: Promise<unknown>) => void;
}

/**
 * The thread's upkeep, run from the alarm and after turns: flush the SQLite tail to R2, take a
 * checkpoint when enough lines have accumulated, prune events and expired idempotency keys, group
 * the rows of older turns, keep the alarm due for whatever is left, start a queued turn, and run
 * a due idle compaction (last: it sees the queued turn started, and brings the alarm forward past
 * a flush retry's). A failed flush is retried with backoff and loses nothing (the segment store
 * puts the same range under the same key).
 */
export class Upkeep {
  readonly #deps: UpkeepDeps;
  /** Every run started so far, settled or not (a delete waits for them). */
  #runs: Promise<void> | undefined;

  constructor(deps: UpkeepDeps) {
    this.#deps = deps;
  }

  /** Schedules the flush of lines just written: soon by the alarm, or now if the tail is long. */
  async scheduleFlush(): Promise<void> {
    const live = this.#deps.loaded();
    if (!live) return;
    if (live.log.lastSeq - live.segments.flushedThrough() >= FLUSH_TAIL_MAX_LINES) {
      this.#deps.waitUntil(this.run());
      return;
    }
    await this.#deps.alarms.within(FLUSH_DELAY_MS);
  }

  /** One upkeep run, tracked so that `settled` covers it. */
  run(): Promise<void> {
    const run = this.#runOnce();
    this.#runs = Promise.allSettled([this.#runs, run]).then(() => undefined);
    return run;
  }

  /** Resolves once every run started so far has ended. */
  settled(): Promise<void> {
    return this.#runs ?? Promise.resolve();
  }

  async #runOnce(): Promise<void> {
    const { alarms, clock, meta, events, idempotency } = this.#deps;
    if (this.#deps.halted()) return;
    const live = await this.#deps.load();
    if (!live) return;
    try {
      await live.segments.flush();
      meta.put("flush_attempts", 0);
      await live.maybeCheckpoint(() => readWholeRollout(live.parts, live.meta, live.log));
    } catch (err) {
      const attempts = (meta.get<number>("flush_attempts") ?? 0) + 1;
      meta.put("flush_attempts", attempts);
      const delay = retryDelayMs(attempts);
      objectLog.warn("rollout.flush_failed", {
        tenant: live.meta.tenant,
        thread: live.meta.id,
        attempt: attempts,
        delay_ms: delay,
        error: describeError(err),
      });
      await alarms.at(clock.nowMs() + delay);
    }
    events.prune();
    idempotency.prune();
    meta.packTurns();
    const expiry = events.nextExpiryMs();
    // Old events leave storage even when the thread stays idle.
    if (expiry !== undefined && alarms.unset) await alarms.at(expiry);
    if (this.#deps.taskRunning()) await alarms.within(RUNNING_TASK_ALARM_MS);
    await this.#deps.drainQueue();
    await this.#deps.idleCompaction(live);
  }
}
