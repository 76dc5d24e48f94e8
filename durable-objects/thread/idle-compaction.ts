import type { RpcResult, TurnResource } from "../../shared/api/index.ts";
import type { Clock } from "../../shared/ports/index.ts";
import type { IdleCompactionConfig } from "../../shared/protocol/index.ts";
import { idleCompactionDueMs, idleCompactionOf } from "../../shared/session/index.ts";
import type { AlarmSchedule } from "../common/alarms.ts";
import { objectLog } from "../common/log.ts";
import type { LiveThread } from "./live-thread.ts";
import type { MetaStore } from "./storage/meta-store.ts";
import type { RunningTask } from "./tasks/task-runner.ts";
import type { TurnQueue } from "./tasks/turn-queue.ts";

/** The meta key of the scheduled idle compaction: in SQLite, so an evicted thread's alarm finds it. */
export const IDLE_COMPACTION_KEY = "idle_compaction";

/** A scheduled idle compaction: when, and the turn whose end scheduled it. */
export interface IdleCompactionDue {
  due_ms: number;
  /** Any later turn (or a rollback that removed this one) cancels it. */
  after_turn: string;
}

export interface IdleCompactionDeps {
  meta: MetaStore;
  alarms: AlarmSchedule;
  clock: Clock;
  queue: TurnQueue;
  /** The task running now, if any. */
  running: () => RunningTask | undefined;
  /** The tenant's default, as the newest request that carried its policy said. */
  tenantDefault: () => IdleCompactionConfig | null;
  /** Starts an `idle` compaction task when nothing runs and the tenant's quotas admit it. */
  compact: (live: LiveThread) => Promise<RpcResult<RunningTask>>;
}

/**
 * Idle compaction (design §14): when a user turn that made a model request ends and leaves the
 * thread idle, schedules a compaction for shortly before the prompt cache expires
 * (`idleCompactionDueMs`), on the object's alarm; when it comes due, compacts if the thread is
 * still as the turn left it and its context is large enough.
 */
export class IdleCompaction {
  readonly #deps: IdleCompactionDeps;

  constructor(deps: IdleCompactionDeps) {
    this.#deps = deps;
  }

  /** The scheduled idle compaction, if any. */
  scheduled(): IdleCompactionDue | undefined {
    return this.#deps.meta.get<IdleCompactionDue | null>(IDLE_COMPACTION_KEY) ?? undefined;
  }

  /**
   * After a task's end: schedules the next idle compaction, or cancels the one scheduled when the
   * thread has none to do. Only a user turn that made a model request schedules one: a turn
   * waiting on tools is not idle, and after any compaction the context is the compacted one (so
   * a thread is idle-compacted at most once per user turn).
   */
  async taskEnded(live: LiveThread, ended: TurnResource | undefined): Promise<void> {
    const due = ended && this.#dueAfter(live, ended);
    if (ended === undefined || due === undefined) {
      if (this.scheduled() !== undefined) this.#deps.meta.put(IDLE_COMPACTION_KEY, null);
      return;
    }
    const scheduled: IdleCompactionDue = { due_ms: due, after_turn: ended.id };
    this.#deps.meta.put(IDLE_COMPACTION_KEY, scheduled);
    await this.#deps.alarms.by(due);
  }

  /** When the idle compaction after `ended` is due; undefined: there is none to do. */
  #dueAfter(live: LiveThread, ended: TurnResource): number | undefined {
    const { config } = live.session.state;
    const settings = this.#settings(live);
    const requestStartedMs = live.provider.requestStartedMs;
    const model = live.parts.catalog.get(config.model);
    if (ended.kind !== "turn" || ended.status === "requires_action") return undefined;
    if (!settings || requestStartedMs === null || !model) return undefined;
    return idleCompactionDueMs({
      lastRequestStartMs: requestStartedMs,
      idleSinceMs: this.#deps.clock.nowMs(),
      promptCacheTtlS: model.promptCacheTtlS,
      afterIdleS: settings.after_idle_s,
    });
  }

  #settings(live: LiveThread): IdleCompactionConfig | null {
    return idleCompactionOf(live.session.state.config, this.#deps.tenantDefault());
  }

  /**
   * The alarm's duty: keeps the alarm due for a scheduled compaction, and once it is due runs it
   * (once: it is unscheduled first) if the thread is still as it was left and is large enough.
   */
  async run(live: LiveThread): Promise<void> {
    const { meta, alarms, clock, queue } = this.#deps;
    const scheduled = this.scheduled();
    if (scheduled === undefined) return;
    if (clock.nowMs() < scheduled.due_ms) {
      await alarms.by(scheduled.due_ms);
      return;
    }
    // Something else runs or waits: its end schedules again.
    if (this.#deps.running() !== undefined || queue.peek() !== undefined) return;
    meta.put(IDLE_COMPACTION_KEY, null);
    const log = objectLog.with({ tenant: live.meta.tenant, thread: live.meta.id });
    const last = meta.lastTurn();
    const settings = this.#settings(live);
    if (last?.id !== scheduled.after_turn || last.status === "requires_action" || !settings) return;
    const tokens = live.session.contextTokens();
    if (tokens < settings.min_context_tokens) return;
    const started = await this.#deps.compact(live);
    if (started.ok)
      log.info("idle_compaction.started", { turn: started.value.turnId, count: tokens });
    // A quota's refusal (or a task that started meanwhile): the next turn's end schedules again.
    else log.info("idle_compaction.skipped", { error_code: started.error.code });
  }
}
