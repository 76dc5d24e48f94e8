import type {
  PendingCallAnswerInput,
  RpcResult,
  StartTurnRequest,
  TurnResource,
} from "../../../shared/api/index.ts";
import type { Logger } from "../../../shared/observability/index.ts";
import type { ContentItem } from "../../../shared/protocol/index.ts";
import {
  type CompactionTrigger,
  type PendingCallAnswer,
  type PlannedWork,
  UnknownCallIdError,
} from "../../../shared/session/index.ts";
import { uuidv7 } from "../../../shared/uuid/index.ts";
import type { AlarmSchedule } from "../../common/alarms.ts";
import { objectLog } from "../../common/log.ts";
import { fail, failureOf, guarded, ok } from "../../common/results.ts";
import type { LiveThread } from "../live-thread.ts";
import type { ProviderReport } from "../providers.ts";
import { queuedTurnResource, turnResource } from "../resources.ts";
import type { EventLog } from "../storage/event-log.ts";
import type { MetaStore, TurnRow } from "../storage/meta-store.ts";
import { FLUSH_DELAY_MS, RUNNING_TASK_ALARM_MS } from "../upkeep.ts";
import { type RunningTask, runTask, type TaskGenerator } from "./task-runner.ts";
import type { TurnQueue } from "./turn-queue.ts";

export interface TaskControlDeps {
  meta: MetaStore;
  events: EventLog;
  queue: TurnQueue;
  alarms: AlarmSchedule;
  /** The thread, loaded if need be (a queued turn may be started by the alarm of a new instance). */
  load: () => Promise<LiveThread | undefined>;
  /**
   * Runs after every task, with its turn as it ended or paused (undefined: it threw): schedules
   * the flush of its lines and the thread's idle compaction.
   */
  afterTask: (ended: TurnResource | undefined) => Promise<void>;
  /** Whether the thread is being deleted: no queued turn starts. */
  halted: () => boolean;
  waitUntil: (work: Promise<unknown>) => void;
  /** The tenant's quotas as tasks meet them (`thread/quotas/quota-gate.ts`). */
  quotas: TaskQuotas;
  /** A task started or `ended`: the tenant's index shows it. */
  taskChanged: (ended: boolean) => void;
}

/** What a task may spend (`ThreadSession.reservation`), read once and only when a quota needs it. */
export type Reservation = () => number;

/** The reservation of `work`, computed on first read (before the work starts). */
export function reservationOf(live: LiveThread, work: PlannedWork): Reservation {
  let tokens: number | undefined;
  return () => {
    tokens ??= live.session.reservation(work);
    return tokens;
  };
}

/** The tenant's quotas at a task's start, at steered input, and at a task's end. */
export interface TaskQuotas {
  /**
   * The tenant's answer on starting a task, or undefined (no call, no wait) when it sets no
   * quota a task start needs or the thread's lease covers it.
   */
  taskStart(reservation: Reservation): Promise<RpcResult<void>> | undefined;
  /** The same for steered input, which makes the running turn sample once more. */
  steerStart(reservation: Reservation): Promise<RpcResult<void>> | undefined;
  taskStarted(reservation: Reservation): void;
  taskEnded(): void;
}

/** What admitting a turn request did: started or joined a task, or queued the turn. */
export type Accepted =
  | { task: RunningTask; queued?: undefined }
  | { task?: undefined; queued: string };

/**
 * Which task runs: one at a time (a user turn, a compaction, or a resumed turn). Starts tasks,
 * applies `on_busy` to a turn request that finds one running, keeps the durable queue of turns
 * waiting, and ends turns that will not go on (a paused turn that a new turn replaces, a turn cut
 * short when its instance went away).
 */
export class TaskControl {
  readonly #deps: TaskControlDeps;
  #running: RunningTask | undefined;
  /**
   * A turn whose end is being stored while no task runs it (a queued turn that never ran, a
   * paused turn interrupted): the request that ends it, for its events.
   */
  #endingIdle: { turnId: string; requestId: string | undefined } | undefined;

  constructor(deps: TaskControlDeps) {
    this.#deps = deps;
  }

  /** The task running now, if any. */
  get running(): RunningTask | undefined {
    return this.#running;
  }

  /**
   * The turn a start request is about: the running one it steers into, else a new one (with
   * nothing running, `on_busy` does not apply and a steer starts a turn of its own).
   */
  turnIdFor(req: StartTurnRequest): string {
    const running = this.#running?.turnId;
    const steersInto = req.onBusy === "steer" && running !== undefined;
    return steersInto && req.expectedTurnId === running ? running : newTurnId();
  }

  /**
   * The edge request of the task that ends `turnId` (its auto-compaction's too), or of the request
   * that ends it while no task runs it (a queued or paused turn); undefined when no request's work
   * ends it.
   */
  requestIdOf(turnId: string): string | undefined {
    const running = this.#running;
    if (running && (running.turnId === turnId || running.currentId === turnId)) {
      return running.requestId;
    }
    const idle = this.#endingIdle;
    return idle?.turnId === turnId ? idle.requestId : undefined;
  }

  /** `thread_busy` while a task runs, else undefined. */
  busy(): RpcResult<never> | undefined {
    const running = this.#running;
    return running && fail("thread_busy", `Turn ${running.currentId} is running.`);
  }

  /**
   * Starts a task and keeps it as the running one until it ends; then logs it, prunes events,
   * flushes and starts the next queued turn.
   */
  start(
    live: LiveThread,
    turnId: string,
    start: (signal: AbortSignal) => TaskGenerator,
    reservation: Reservation,
    { resumed, requestId }: { resumed?: TurnRow; requestId?: string | undefined } = {},
  ): { task: RunningTask; started: Promise<void> } {
    const configBefore = JSON.stringify(live.session.state.config);
    const startedAt = Date.now();
    const log = logOf(live, requestId);
    live.provider.reset();
    const { task, started } = runTask(
      {
        live,
        meta: this.#deps.meta,
        events: this.#deps.events,
        resourceOf: (row, items) => turnResource(live, row, items),
        onTaskStarted: () => saveConfigIfChanged(live, this.#deps.meta, configBefore),
        log,
      },
      turnId,
      start,
      resumed,
      requestId,
    );
    this.#running = task;
    this.#deps.quotas.taskStarted(reservation);
    this.#deps.waitUntil(this.#deps.alarms.within(RUNNING_TASK_ALARM_MS));
    this.#deps.taskChanged(false);
    task.done.then(
      (turn) => logTaskEnd(log, turn, live.provider, Date.now() - startedAt),
      () => undefined,
    );
    const settle = (ended: TurnResource | undefined) => {
      if (this.#running === task) this.#running = undefined;
      this.#deps.quotas.taskEnded();
      this.#deps.taskChanged(true);
      this.#deps.events.prune();
      this.#deps.waitUntil(this.#deps.afterTask(ended).then(() => this.drainQueue()));
    };
    task.done.then(settle, () => settle(undefined));
    return { task, started };
  }

  /**
   * Asks the tenant whether a task that may spend `reservation()` may start (its quotas), when it
   * sets any a start needs; then checks again that nothing started meanwhile. Undefined: it may.
   * Without such quotas this answers at once, so the caller's checks and its start stay one
   * synchronous step.
   */
  admitted(reservation: Reservation): Promise<RpcResult<never> | undefined> | undefined {
    return this.#deps.quotas
      .taskStart(reservation)
      ?.then((answer) => (answer.ok ? this.busy() : answer));
  }

  /**
   * Starts a task and resolves once it has started, or with the failure of a start that failed
   * before the task's first line (an unknown model, an input that cannot fit, …).
   */
  async started(
    live: LiveThread,
    turnId: string,
    start: (signal: AbortSignal) => TaskGenerator,
    reservation: Reservation,
    requestId?: string,
  ): Promise<RpcResult<RunningTask>> {
    const { task, started } = this.start(live, turnId, start, reservation, { requestId });
    return guarded(async () => {
      await started;
      return ok(task);
    }, "/overrides");
  }

  /**
   * Starts a compaction task (`trigger`) when nothing runs and the tenant's quotas admit it;
   * `keyed` wraps the start (a request's key is recorded with its turn id).
   */
  async startCompaction(
    live: LiveThread,
    trigger: CompactionTrigger,
    keyed: (
      turnId: string,
      start: () => Promise<RpcResult<RunningTask>>,
    ) => Promise<RpcResult<RunningTask>> = (_turnId, start) => start(),
    requestId?: string,
  ): Promise<RpcResult<RunningTask>> {
    const busy = this.busy();
    if (busy) return busy;
    const turnId = newTurnId();
    const reservation = reservationOf(live, { kind: "compaction" });
    const admitting = this.admitted(reservation);
    const refused = admitting && (await admitting);
    if (refused) return refused;
    return keyed(turnId, () =>
      this.started(
        live,
        turnId,
        (signal) => live.session.compact(trigger, signal, { turnId }),
        reservation,
        requestId,
      ),
    );
  }

  /**
   * Applies `on_busy` when a task runs, then starts the turn: the task the request follows (the
   * new turn, or the running one it steered into), or the id of the turn it queued.
   */
  async acceptTurn(
    live: LiveThread,
    req: StartTurnRequest,
    turnId: string,
    requestId?: string,
  ): Promise<RpcResult<Accepted>> {
    await this.drainQueue();
    // A continuation of a named turn continues nothing once another turn followed it.
    if (req.afterTurn !== undefined && this.#deps.meta.lastTurn()?.id !== req.afterTurn) {
      return fail("turn_mismatch", `Turn ${req.afterTurn} is not the thread's newest.`);
    }
    const running = this.#running;
    const { content, replayed } = req;
    if (running) {
      // Replayed items belong before a turn's input: they can neither wait in the queue nor
      // join a running turn.
      if (replayed !== undefined && req.onBusy !== "interrupt") {
        return fail("thread_busy", `Turn ${running.currentId} is running.`);
      }
      switch (req.onBusy) {
        case "reject":
          return fail("thread_busy", `Turn ${running.currentId} is running.`);
        case "queue":
          this.#deps.queue.push({
            turnId,
            content,
            overrides: req.overrides,
            additionalContext: req.additionalContext,
            requestId,
          });
          // An alarm soon, so a queue left behind by an eviction still drains.
          await this.#deps.alarms.within(FLUSH_DELAY_MS);
          return ok({ queued: turnId });
        case "steer": {
          if (req.expectedTurnId !== running.turnId) {
            return fail("turn_mismatch", `The running turn is ${running.turnId}.`);
          }
          if (running.currentKind !== "turn") {
            return fail("turn_not_steerable", "A compaction is running; it takes no input.");
          }
          const joined = await this.#steerInto(live, running, content, (steer) => steer());
          return joined.ok ? ok({ task: running }) : joined;
        }
        case "interrupt":
          running.controller.abort(new Error("interrupted by a new turn"));
          await running.done.catch(() => undefined);
          break;
      }
    }
    const reservation = reservationOf(live, {
      kind: "turn",
      content,
      ...(replayed === undefined ? {} : { replayed }),
      overrides: req.overrides,
    });
    const admitting = this.admitted(reservation);
    if (admitting) {
      const refused = await admitting;
      if (refused) return refused;
    }
    this.abandonPausedTurn(live, "replaced");
    const begun = await this.started(
      live,
      turnId,
      (signal) =>
        live.session.runTurn(
          {
            content,
            additional_context: req.additionalContext,
            ...(replayed === undefined ? {} : { replayed }),
          },
          req.overrides,
          signal,
          { turnId },
        ),
      reservation,
      requestId,
    );
    return begun.ok ? ok({ task: begun.value }) : begun;
  }

  /**
   * Adds `content` to the running turn once the tenant's quotas admit the sampling step it adds
   * (`join` wraps the engine call); a turn that ended while the tenant answered takes nothing.
   */
  async #steerInto(
    live: LiveThread,
    running: RunningTask,
    content: ContentItem[],
    join: (steer: () => void) => void,
  ): Promise<RpcResult<null>> {
    const admitting = this.#deps.quotas.steerStart(reservationOf(live, { kind: "steer", content }));
    if (admitting) {
      const answer = await admitting;
      if (!answer.ok) return answer;
      if (this.#running !== running || running.currentKind !== "turn") {
        return fail("turn_mismatch", `Turn ${running.turnId} ended before the input joined it.`);
      }
    }
    join(() => live.session.steer(content));
    return ok(null);
  }

  /**
   * Resumes a paused turn with outputs for its pending calls, once they check out: every pending
   * call answered, no other, and the tenant's quotas admit the task (checked again after the
   * tenant's answer). `admitted` runs right before the task starts (to record the key).
   */
  async resume(
    live: LiveThread,
    turnId: string,
    items: readonly PendingCallAnswerInput[],
    admitted: () => void,
    requestId?: string,
  ): Promise<RpcResult<RunningTask>> {
    let checked = this.#resumable(live, turnId, items);
    if (!checked.ok) return checked;
    const { outputs: planned, row: paused } = checked.value;
    const reservation = reservationOf(live, {
      kind: "resume",
      outputs: planned,
      queued: paused.queued_input,
    });
    const admitting = this.admitted(reservation);
    if (admitting) {
      const refused = await admitting;
      if (refused) return refused;
      checked = this.#resumable(live, turnId, items);
      if (!checked.ok) return checked;
    }
    const { row, outputs } = checked.value;
    admitted();
    const { task } = this.start(
      live,
      row.id,
      (signal) =>
        live.session.resumeTurn(row.id, row.pending_calls, outputs, signal, row.queued_input),
      reservation,
      { resumed: row, requestId },
    );
    return ok(task);
  }

  /** The paused turn and its answers, when `items` may resume it now. */
  #resumable(
    live: LiveThread,
    turnId: string,
    items: readonly PendingCallAnswerInput[],
  ): RpcResult<{ row: TurnRow; outputs: PendingCallAnswer[] }> {
    const row = this.#deps.meta.turn(turnId);
    if (!row) return fail("turn_not_found", `No turn "${turnId}" in this thread.`);
    if (row.status !== "requires_action") {
      return fail("no_pending_calls", `Turn ${turnId} is not waiting for tool outputs.`);
    }
    const busy = this.busy();
    if (busy) return busy;
    const answers = answersOf(row, items);
    if (!answers.ok) return answers;
    const outputs = answers.value;
    try {
      live.session.checkResume(turnId, row.pending_calls, outputs);
    } catch (err) {
      if (!(err instanceof UnknownCallIdError)) throw err;
      const pending = new Set(row.pending_calls.map((c) => c.call_id));
      const errors = outputs.flatMap((answer, i) =>
        pending.has(answer.call_id)
          ? []
          : [{ path: `/items/${i}/call_id`, message: "not a pending call" }],
      );
      return fail("unknown_call_id", err.message, errors);
    }
    return ok({ row, outputs });
  }

  /**
   * Adds input to the running turn `turnId`; `join` wraps the engine call (to record the key in
   * the same step). Answers the turn as it stands.
   */
  async steer(
    live: LiveThread,
    turnId: string,
    content: ContentItem[],
    join: (steer: () => void) => void,
  ): Promise<RpcResult<TurnResource>> {
    const running = this.#running;
    const { meta, queue } = this.#deps;
    if (running?.turnId === turnId) {
      if (running.currentKind !== "turn") {
        return fail("turn_not_steerable", "A compaction is running; it takes no input.");
      }
      const joined = await this.#steerInto(live, running, content, join);
      if (!joined.ok) return joined;
      const row = meta.turn(running.currentId);
      return ok(row ? await turnResource(live, row) : queuedTurnResource(live.meta.id, turnId));
    }
    const row = meta.turn(turnId);
    if (!row && !queue.has(turnId)) return fail("turn_not_found", `No turn "${turnId}".`);
    if (row?.status === "requires_action") {
      return fail(
        "turn_not_steerable",
        `Turn ${turnId} waits for tool outputs; post them instead.`,
      );
    }
    return fail("turn_mismatch", `Turn ${turnId} is not the running turn.`);
  }

  /**
   * Ends a turn as interrupted: a running one stops its model call, a queued one never starts, a
   * paused one drops its pending calls (then `flush` schedules its lines). A turn that already
   * ended is answered as it is.
   */
  /**
   * `requestId`: the interrupting request, which the events of a queued or paused turn's end
   * carry; a running turn's end carries its own request's, whose work it was.
   */
  async interrupt(
    live: LiveThread,
    turnId: string,
    flush: () => Promise<void>,
    requestId?: string,
  ): Promise<RpcResult<TurnResource>> {
    const running = this.#running;
    const { meta, queue, events } = this.#deps;
    if (running && (running.turnId === turnId || running.currentId === turnId)) {
      running.controller.abort(new Error("interrupted"));
      return ok(await running.done);
    }
    if (queue.remove(turnId)) return ok(this.#interruptedBeforeStart(live, turnId, requestId));
    const row = meta.turn(turnId);
    if (!row) return fail("turn_not_found", `No turn "${turnId}" in this thread.`);
    if (row.status !== "requires_action" || running) return ok(await turnResource(live, row));
    const item = live.session.interruptPausedTurn(turnId);
    this.#endingIdle = { turnId, requestId };
    let done: TurnRow;
    try {
      done = this.markInterrupted(live, row);
    } finally {
      this.#endingIdle = undefined;
    }
    events.emit("item.completed", turnId, { item, context: true });
    const resource = await turnResource(live, done);
    events.emit("turn.interrupted", turnId, resource);
    await flush();
    return ok(resource);
  }

  /** A queued turn interrupted before it started. */
  #interruptedBeforeStart(live: LiveThread, turnId: string, requestId?: string): TurnResource {
    return this.#endedBeforeStart(live, turnId, "interrupted", null, requestId);
  }

  /**
   * A queued turn that ended before it started (interrupted, or refused by a quota when its turn
   * came): it wrote no line, so its row holds none (and sorts before every turn that ran,
   * ordinal 0, so it never counts as the thread's latest). Its terminal event ends the streams
   * that waited for it.
   */
  #endedBeforeStart(
    live: LiveThread,
    turnId: string,
    status: "interrupted" | "failed",
    error: TurnRow["error"],
    requestId: string | undefined,
  ): TurnResource {
    const after = live.log.lastSeq + 1;
    this.#endingIdle = { turnId, requestId };
    try {
      this.#deps.meta.endTurn({
        id: turnId,
        ordinal: 0,
        kind: "turn",
        status,
        first_seq: after,
        last_seq: after - 1,
        pending_calls: [],
        usage: null,
        error,
      });
    } finally {
      this.#endingIdle = undefined;
    }
    const resource: TurnResource = {
      ...queuedTurnResource(live.meta.id, turnId),
      status,
      error,
    };
    logTaskEnd(logOf(live, requestId), resource, undefined, 0);
    this.#deps.events.emit(
      status === "failed" ? "turn.failed" : "turn.interrupted",
      turnId,
      resource,
    );
    return resource;
  }

  /** Runs the next queued turn when nothing else runs (durable: the queue is in SQLite). */
  async drainQueue(): Promise<void> {
    const live = await this.#deps.load();
    if (!live || this.#running || this.#deps.halted()) return;
    const head = this.#deps.queue.peek();
    if (!head) return;
    // The turn leaves the queue only once it starts or is refused: an instance lost while the
    // tenant answers leaves it queued.
    const reservation = reservationOf(live, {
      kind: "turn",
      content: head.content,
      overrides: head.overrides,
    });
    const admitting = this.admitted(reservation);
    if (admitting) {
      const refused = await admitting;
      if (refused && !refused.ok && refused.error.code === "quota_exceeded") {
        if (this.#deps.queue.remove(head.turnId)) {
          const message = refused.error.detail;
          this.#endedBeforeStart(
            live,
            head.turnId,
            "failed",
            { code: "quota_exceeded", message },
            head.requestId,
          );
        }
        return;
      }
      if (refused || this.#running || this.#deps.halted()) return;
    }
    const next = this.#deps.queue.shift();
    if (!next) return;
    this.abandonPausedTurn(live, "replaced");
    const { task, started } = this.start(
      live,
      next.turnId,
      (signal) =>
        live.session.runTurn(
          { content: next.content, additional_context: next.additionalContext },
          next.overrides,
          signal,
          { turnId: next.turnId },
        ),
      reservation,
      { requestId: next.requestId },
    );
    this.#deps.waitUntil(task.done.catch(() => undefined));
    // A turn that cannot start (its input cannot fit, its overrides are refused) has no caller
    // waiting to hear it: it ends failed, so whoever queued it (a hook's delivery) sees why.
    started.catch((err: unknown) => {
      const failure = failureOf(err);
      const error = failure?.ok === false ? failure.error : undefined;
      this.#endedBeforeStart(
        live,
        next.turnId,
        "failed",
        {
          code: error?.code ?? "internal",
          message: error?.detail ?? "The turn could not start.",
        },
        next.requestId,
      );
    });
  }

  /**
   * A new turn (`replaced`) or a rollback (`interrupted`) instead of tool outputs: the paused
   * turn ends, its calls stay unanswered in history (prompts pair them with "aborted").
   */
  abandonPausedTurn(live: LiveThread, reason: "replaced" | "interrupted"): void {
    const last = this.#deps.meta.lastTurn();
    if (last?.status === "requires_action") this.#endTurn(live, last, reason);
  }

  /**
   * A turn that was running when the instance went away ends as interrupted (reference §5.4).
   * True when there was one.
   */
  settleInterruptedTurn(live: LiveThread): boolean {
    const last = this.#deps.meta.lastTurn();
    if (last?.status !== "in_progress") return false;
    this.#endTurn(live, last, "interrupted");
    return true;
  }

  /**
   * Ends the turn of `row` with a `turn_aborted` line, so that a restore from R2 rebuilds the
   * same turn row and the same `updated_at` (the newest line's time).
   */
  #endTurn(live: LiveThread, row: TurnRow, reason: "replaced" | "interrupted"): void {
    live.session.recordTurnAborted(row.id, reason);
    this.markInterrupted(live, row);
  }

  /**
   * Stores `row` as interrupted through the newest line; moves `updated_at`. Its usage is what
   * the ledger counted for it, also the requests an instance lost before the row was updated.
   */
  markInterrupted(live: LiveThread, row: TurnRow): TurnRow {
    const { pending_approvals: _dropped, ...rest } = row;
    const done: TurnRow = {
      ...rest,
      status: "interrupted",
      pending_calls: [],
      usage: live.ledger.turnUsage(row.id) ?? row.usage,
      last_seq: live.log.lastSeq,
    };
    this.#deps.meta.endTurn(done);
    live.touch(this.#deps.meta);
    return done;
  }
}

/**
 * The engine's answers for a paused turn's `items`: outputs as posted, approval responses
 * matched to their requests. An approval response names a request of this turn, and a server
 * call held for approval takes an approval, not an output (`unknown_call_id` otherwise).
 */
function answersOf(
  row: TurnRow,
  items: readonly PendingCallAnswerInput[],
): RpcResult<PendingCallAnswer[]> {
  const requests = new Map((row.pending_approvals ?? []).map((r) => [r.id, r]));
  const held = new Set((row.pending_approvals ?? []).map((r) => r.call_id));
  const answers: PendingCallAnswer[] = [];
  for (const [i, item] of items.entries()) {
    if (item.type === "function_call_output") {
      if (held.has(item.call_id)) {
        return fail(
          "unknown_call_id",
          `Call ${item.call_id} runs on an MCP server: answer its approval request instead.`,
          [{ path: `/items/${i}/call_id`, message: "a server call held for approval" }],
        );
      }
      answers.push({ call_id: item.call_id, output: item.output });
      continue;
    }
    const request = requests.get(item.approval_request_id);
    if (request === undefined) {
      return fail(
        "unknown_call_id",
        `No approval request "${item.approval_request_id}" is pending in this turn.`,
        [{ path: `/items/${i}/approval_request_id`, message: "not a pending approval request" }],
      );
    }
    answers.push({
      call_id: request.call_id,
      request,
      approve: item.approve,
      ...(item.reason === undefined ? {} : { reason: item.reason }),
    });
  }
  return ok(answers);
}

/** The log of a task of `live`'s thread, for the request it runs for. */
function logOf(live: LiveThread, requestId: string | undefined): Logger {
  return objectLog.with({ request_id: requestId, tenant: live.meta.tenant, thread: live.meta.id });
}

/**
 * A task's one log line, when it ends or pauses: how, after how long, what the provider last
 * answered and what it used; never the turn's content. A failed task's line is a warning.
 */
function logTaskEnd(
  log: Logger,
  turn: TurnResource,
  provider: ProviderReport | undefined,
  durationMs: number,
): void {
  const fields = {
    turn: turn.id,
    kind: turn.kind,
    status: turn.status,
    error_code: turn.error?.code ?? null,
    provider: provider?.provider ?? null,
    provider_status: provider?.status ?? null,
    input_tokens: turn.usage?.input_tokens,
    output_tokens: turn.usage?.output_tokens,
    duration_ms: durationMs,
  };
  if (turn.status === "failed") log.warn("turn.ended", fields);
  else log.info("turn.ended", fields);
}

/** A turn's configuration, stored and written as a `spindle_config` line when its overrides changed it. */
function saveConfigIfChanged(live: LiveThread, meta: MetaStore, before: string): void {
  const config = live.session.state.config;
  if (JSON.stringify(config) === before) return;
  meta.put("config", config);
  live.log.append({ type: "spindle_config", payload: config });
}

export const newTurnId = () => `turn_${uuidv7()}`;
