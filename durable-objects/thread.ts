import { DurableObject } from "cloudflare:workers";
import { v7 as uuidv7 } from "uuid";
import { DEFAULT_MODEL_SLUG, type ModelCatalog } from "../shared/models/index.ts";
import type {
  ContentItem,
  MessageItem,
  ResponseItem,
  RolloutLine,
  SessionConfiguration,
  ThreadConfig,
} from "../shared/protocol/index.ts";
import {
  type Checkpoint,
  createCheckpoint,
  encodeRolloutLine,
  reconstructRollout,
} from "../shared/rollout/index.ts";
import {
  InvalidConfigurationError,
  resolveSessionConfiguration,
  SessionError,
  type ToolCallOutput,
  threadConfigFromTurnContext,
  truncationPolicyOf,
  UnknownCallIdError,
  UnknownModelError,
} from "../shared/session/index.ts";
import type { Env } from "../worker/env.ts";
import type { ListResource, ThreadResource, TurnResource } from "../worker/schemas.ts";
import type {
  CompactRequest,
  CreateFromRolloutRequest,
  CreateThreadRequest,
  EventStream,
  EventsRequest,
  ExportRequest,
  ForkSource,
  ForkSourceRequest,
  IdempotencyKey,
  InjectRequest,
  ListHistoryRequest,
  RollbackRequest,
  RolloutExport,
  RpcFailure,
  RpcResult,
  StartTurnRequest,
  SteerRequest,
  SubmitOutputsRequest,
  ThreadRpc,
} from "../worker/thread-rpc.ts";
import { DEFAULT_ITEM_GROUP_LIMITS } from "./checkpoint-store.ts";
import { EventLog } from "./event-log.ts";
import { IdempotencyKeys, type IdempotencyRecord } from "./idempotency.ts";
import {
  DEFAULT_CHECKPOINT_EVERY_LINES,
  LiveThread,
  readWholeRollout,
  type StorageParts,
  systemClock,
  threadPrefix,
  withoutContextBaseline,
} from "./live-thread.ts";
import { MetaStore, type ThreadMeta, type TurnRow } from "./meta-store.ts";
import { catalogOf, modelClientFactory } from "./providers.ts";
import {
  type ImportedLine,
  importFingerprint,
  jsonlStream,
  readRolloutStream,
} from "./rollout-import.ts";
import { decodeTolerantly, RolloutLog } from "./rollout-log.ts";
import { clearRolloutState, migrate } from "./schema.ts";
import { SegmentStore } from "./segments.ts";
import { sqlOf } from "./sql.ts";
import { type RunningTask, runTask, type TaskGenerator } from "./task-runner.ts";
import { turnRowsFromRollout } from "./turn-index.ts";
import { TurnQueue } from "./turn-queue.ts";

/** Lines written at turn end are flushed to R2 this long after, so bursts share one segment. */
export const FLUSH_DELAY_MS = 1_000;
/** An unflushed tail longer than this is flushed right away. */
export const FLUSH_TAIL_MAX_LINES = 5_000;
/**
 * While a task runs, an alarm stays due within this long: if the instance goes away mid-turn,
 * the alarm wakes a new one, which settles the turn and flushes its lines without waiting for a
 * request.
 */
const RUNNING_TASK_ALARM_MS = 30_000;
const FLUSH_RETRY_MAX_MS = 5 * 60_000;

const ok = <T>(value: T): RpcResult<T> => ({ ok: true, value });
const fail = (
  code: RpcFailure["code"],
  detail: string,
  errors?: RpcFailure["errors"],
): RpcResult<never> => ({ ok: false, error: errors ? { code, detail, errors } : { code, detail } });
const NOT_FOUND = fail("not_found", "No such thread.");

const nowIso = () => new Date(systemClock.nowMs()).toISOString();
const newTurnId = () => `turn_${uuidv7()}`;

/** The turn a start request is about: the running one it steers into, else a new one. */
const turnIdOf = (req: StartTurnRequest) =>
  req.onBusy === "steer" && req.expectedTurnId ? req.expectedTurnId : newTurnId();

/** Maps the core's typed errors to API failures; undefined for anything unexpected. */
function failureOf(err: unknown): RpcResult<never> | undefined {
  if (err instanceof UnknownModelError)
    return fail("unknown_model", `Unknown model "${err.model}".`);
  if (err instanceof InvalidConfigurationError) {
    return fail("invalid_request", err.message, [
      { path: `/overrides/${err.path}`, message: err.message },
    ]);
  }
  if (err instanceof SessionError) return fail(err.code as RpcFailure["code"], err.message);
  return undefined;
}

function contentOf(input: readonly { content: readonly ContentItem[] }[]): ContentItem[] {
  return input.flatMap((m) => [...m.content]);
}

/**
 * One conversation thread (design §5-§7). Thin: it wires the core engine to SQLite (rollout
 * tail, checkpoint, manifest, meta, events, queue) and R2 (segments), runs one task at a time and
 * routes the API's operations to the engine. The constructor only migrates the schema; the first
 * request loads the thread.
 */
export class Thread extends DurableObject<Env> implements ThreadRpc {
  readonly #parts: StorageParts;
  readonly #events: EventLog;
  readonly #queue: TurnQueue;
  readonly #idempotency: IdempotencyKeys;
  /** Keys whose request is being admitted right now: a retry meanwhile is told to wait. */
  readonly #admitting = new Set<string>();
  #live: LiveThread | undefined;
  #loading: Promise<LiveThread | undefined> | undefined;
  #task: RunningTask | undefined;
  /**
   * When the alarm is due, as this instance last set or read it (null: none; undefined: not read
   * yet). Saves a storage round trip per turn: consecutive turns find it already due soon.
   */
  #alarmDue: number | null | undefined;
  /** Every flush-and-tidy run started so far, settled or not (a delete waits for them). */
  #tidying: Promise<void> | undefined;
  /** A delete is under way: no flush, checkpoint or queued turn starts. */
  #deleting = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage.sql);
    const sql = sqlOf(ctx.storage.sql);
    this.#parts = {
      catalog: catalogOf(env),
      modelClients: (threadId) => modelClientFactory(env, threadId),
      checkpointEveryLines:
        Number(env.SPINDLE_CHECKPOINT_EVERY_LINES) || DEFAULT_CHECKPOINT_EVERY_LINES,
      checkpointGroups: {
        ...DEFAULT_ITEM_GROUP_LIMITS,
        maxItems: Number(env.SPINDLE_CHECKPOINT_GROUP_ITEMS) || DEFAULT_ITEM_GROUP_LIMITS.maxItems,
      },
      sql,
      storage: ctx.storage,
      bucket: env.ROLLOUT,
      meta: new MetaStore(sql),
    };
    this.#events = new EventLog(sql, systemClock);
    this.#queue = new TurnQueue(sql);
    this.#idempotency = new IdempotencyKeys(sql, systemClock);
  }

  // --- Loading ----------------------------------------------------------------------------------

  /** The thread, loaded once per instance; undefined when it does not exist. */
  async #thread(): Promise<LiveThread | undefined> {
    if (this.#live) return this.#live;
    this.#loading ??= LiveThread.load(this.#parts).then(
      async (live) => {
        this.#live = live;
        this.#loading = undefined;
        // Settling ends a turn, and a turn's end schedules the flush of its lines.
        if (live && this.#settleInterruptedTurn(live)) await this.#scheduleFlush();
        return live;
      },
      (err: unknown) => {
        // The next request tries again instead of every request failing on a cached rejection.
        this.#loading = undefined;
        throw err;
      },
    );
    return this.#loading;
  }

  /**
   * A turn that was running when the instance went away ends as interrupted (reference §5.4).
   * True when there was one.
   */
  #settleInterruptedTurn(live: LiveThread): boolean {
    const last = this.#parts.meta.lastTurn();
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
    this.#markInterrupted(live, row);
  }

  /** Stores `row` as interrupted through the newest line, waiting for nothing; moves `updated_at`. */
  #markInterrupted(live: LiveThread, row: TurnRow): TurnRow {
    const done: TurnRow = {
      ...row,
      status: "interrupted",
      pending_calls: [],
      last_seq: live.log.lastSeq,
    };
    this.#parts.meta.putTurn(done);
    live.touch(this.#parts.meta);
    return done;
  }

  #resource(live: LiveThread): ThreadResource {
    const meta = live.meta;
    const last = this.#parts.meta.lastTurn();
    const status = this.#task
      ? "running"
      : last?.status === "requires_action"
        ? "requires_action"
        : "idle";
    return {
      object: "thread",
      id: meta.id,
      status,
      config: live.session.state.config,
      turn_count: meta.turn_count,
      token_usage: live.session.history.tokenInfo ?? null,
      created_at: meta.created_at,
      updated_at: meta.updated_at,
      forked_from: meta.forked_from,
      warnings: meta.warnings,
    };
  }

  /** A turn's resource; its items are read back from the rollout unless given. */
  async #turnResource(
    live: LiveThread,
    row: TurnRow,
    items?: ResponseItem[],
  ): Promise<TurnResource> {
    const recorded =
      items ??
      (await this.#linesBetween(live, row.first_seq, row.last_seq)).flatMap((l) =>
        l.type === "response_item" ? [l.payload] : [],
      );
    return {
      object: "turn",
      id: row.id,
      thread_id: live.meta.id,
      kind: row.kind ?? "turn",
      status: row.status,
      items: recorded,
      pending_calls: row.pending_calls,
      usage: row.usage,
      error: row.error,
    };
  }

  #queuedResource(live: LiveThread, turnId: string): TurnResource {
    return {
      object: "turn",
      id: turnId,
      thread_id: live.meta.id,
      kind: "turn",
      status: "in_progress",
      items: [],
      pending_calls: [],
      usage: null,
      error: null,
    };
  }

  /**
   * Lines in [first, last]: from SQLite when it still has them, else from the R2 segments that
   * hold them (SQLite read first: a line leaves it only once it is in R2).
   */
  async #linesBetween(live: LiveThread, first: number, last: number): Promise<RolloutLine[]> {
    if (last < first) return [];
    const stored = live.log.firstStoredSeq();
    if (stored !== undefined && stored <= first) {
      return live.log.linesBetween(first, last);
    }
    const local = live.log.rawAfter(first - 1, last - first + 1);
    const bySeq = new Map((await live.segments.readLines(first, last)).map((l) => [l.seq, l]));
    for (const line of local) bySeq.set(line.seq, line);
    const raw = [...bySeq.values()].sort((a, b) => a.seq - b.seq);
    return decodeTolerantly(raw).lines;
  }

  // --- Tasks ------------------------------------------------------------------------------------

  /**
   * Starts a task and keeps it as the running one until it ends; then flushes, prunes events and
   * starts the next queued turn.
   */
  #startTask(
    live: LiveThread,
    turnId: string,
    start: (signal: AbortSignal) => TaskGenerator,
    resumed?: TurnRow,
  ): { task: RunningTask; started: Promise<void> } {
    const configBefore = JSON.stringify(live.session.state.config);
    const { task, started } = runTask(
      {
        live,
        meta: this.#parts.meta,
        events: this.#events,
        resourceOf: (row, items) => this.#turnResource(live, row, items),
        onTaskStarted: () => this.#saveConfigIfChanged(live, configBefore),
      },
      turnId,
      start,
      resumed,
    );
    this.#task = task;
    this.ctx.waitUntil(this.#alarmWithin(RUNNING_TASK_ALARM_MS));
    const settle = () => {
      if (this.#task === task) this.#task = undefined;
      this.#events.prune();
      this.ctx.waitUntil(this.#afterTask());
    };
    task.done.then(settle, settle);
    return { task, started };
  }

  async #afterTask(): Promise<void> {
    await this.#scheduleFlush();
    await this.#drainQueue();
  }

  #saveConfigIfChanged(live: LiveThread, before: string): void {
    const config = live.session.state.config;
    if (JSON.stringify(config) === before) return;
    this.#parts.meta.put("config", config);
    live.log.append({ type: "spindle_config", payload: config });
  }

  /** Runs the next queued turn when nothing else runs (durable: the queue is in SQLite). */
  async #drainQueue(): Promise<void> {
    const live = await this.#thread();
    if (!live || this.#task || this.#deleting) return;
    const next = this.#queue.shift();
    if (!next) return;
    this.#abandonPausedTurn(live, "replaced");
    const { task } = this.#startTask(live, next.turnId, (signal) =>
      live.session.runTurn({ content: next.content }, next.overrides, signal, {
        turnId: next.turnId,
      }),
    );
    this.ctx.waitUntil(
      task.done.then(
        () => undefined,
        () => undefined,
      ),
    );
  }

  /**
   * A new turn (`replaced`) or a rollback (`interrupted`) instead of tool outputs: the paused turn
   * ends, its calls stay unanswered in history (prompts pair them with "aborted").
   */
  #abandonPausedTurn(live: LiveThread, reason: "replaced" | "interrupted"): void {
    const last = this.#parts.meta.lastTurn();
    if (last?.status === "requires_action") this.#endTurn(live, last, reason);
  }

  /**
   * Starts a user turn now (after `on_busy` was dealt with). Resolves once the turn has started
   * (or failed to start, with a 4xx result).
   */
  async #beginTurn(
    live: LiveThread,
    req: StartTurnRequest,
    turnId: string,
  ): Promise<RpcResult<RunningTask>> {
    this.#abandonPausedTurn(live, "replaced");
    return this.#startedTask(live, turnId, (signal) =>
      live.session.runTurn({ content: contentOf(req.input) }, req.overrides, signal, { turnId }),
    );
  }

  /**
   * Starts a task and resolves once it has started, or with the 4xx result of a start that
   * failed before the task's first line (an unknown model, a context that cannot fit, …).
   */
  async #startedTask(
    live: LiveThread,
    turnId: string,
    start: (signal: AbortSignal) => TaskGenerator,
  ): Promise<RpcResult<RunningTask>> {
    const { task, started } = this.#startTask(live, turnId, start);
    try {
      await started;
    } catch (err) {
      const failure = failureOf(err);
      if (failure) return failure;
      throw err;
    }
    return ok(task);
  }

  /**
   * Applies `on_busy` when a task runs. Returns the task the request follows (the new turn, or
   * the running one it steered into), or a queued turn's id, or a failure.
   */
  async #admitTurn(
    live: LiveThread,
    req: StartTurnRequest,
    turnId: string,
  ): Promise<RpcResult<{ task?: RunningTask; queued?: string }>> {
    await this.#drainQueue();
    const running = this.#task;
    if (running) {
      switch (req.onBusy) {
        case "reject":
          return fail("thread_busy", `Turn ${running.currentId} is running.`);
        case "queue":
          this.#queue.push({ turnId, content: contentOf(req.input), overrides: req.overrides });
          await this.#scheduleQueueCheck();
          return ok({ queued: turnId });
        case "steer": {
          if (req.expectedTurnId !== running.turnId) {
            return fail("turn_mismatch", `The running turn is ${running.turnId}.`);
          }
          if (running.currentKind !== "turn") {
            return fail("turn_not_steerable", "A compaction is running; it takes no input.");
          }
          live.session.steer(contentOf(req.input));
          return ok({ task: running });
        }
        case "interrupt":
          running.controller.abort(new Error("interrupted by a new turn"));
          await running.done.catch(() => undefined);
          break;
      }
    }
    const begun = await this.#beginTurn(live, req, turnId);
    return begun.ok ? ok({ task: begun.value }) : begun;
  }

  /** An alarm soon, so a queue left behind by an eviction still drains. */
  async #scheduleQueueCheck(): Promise<void> {
    await this.#alarmWithin(FLUSH_DELAY_MS);
  }

  /**
   * Makes the (single) alarm fire within `ms`: an alarm already due sooner stays, a later one
   * (event expiry, a flush retry's backoff) is brought forward. The alarm handler does every
   * duty each time, so nothing is lost by firing early.
   */
  async #alarmWithin(ms: number): Promise<void> {
    const due = systemClock.nowMs() + ms;
    if (this.#alarmDue === undefined) {
      const stored = await this.ctx.storage.getAlarm();
      // A call that ran during the read (a task's start and its end) may have set one already.
      this.#alarmDue ??= stored;
    }
    if (this.#alarmDue === null || this.#alarmDue > due) await this.#setAlarm(due);
  }

  async #setAlarm(at: number): Promise<void> {
    this.#alarmDue = at;
    await this.ctx.storage.setAlarm(at);
  }

  // --- RPC: threads -----------------------------------------------------------------------------

  async createThread(req: CreateThreadRequest): Promise<RpcResult<ThreadResource>> {
    const existing = await this.#existingThread(req);
    if (existing) return existing;
    let config: SessionConfiguration;
    try {
      config = resolveSessionConfiguration(
        undefined,
        req.config,
        this.#parts.catalog,
        DEFAULT_MODEL_SLUG,
      );
    } catch (err) {
      const failure = failureOf(err);
      if (failure) return failure;
      throw err;
    }
    const now = nowIso();
    const meta = newMeta(req.tenant, req.threadId, now, null);
    const log = new RolloutLog(this.#parts.sql, systemClock, 0);
    this.ctx.storage.transactionSync(() => {
      log.append({
        type: "session_meta",
        payload: sessionMetaPayload(req.threadId, now, config, null),
      });
      log.append({ type: "spindle_config", payload: config });
      // The newest line's time, as a restore from the rollout reads it back.
      meta.updated_at = log.lastWrittenAt ?? now;
      this.#parts.meta.put("thread", meta);
      this.#parts.meta.put("config", config);
      this.#recordKey(req.idempotency, null);
    });
    const live = new LiveThread(this.#parts, meta, config, log, undefined, undefined);
    this.#live = live;
    await this.#scheduleFlush();
    return ok(this.#resource(live));
  }

  /**
   * The answer to a create, fork or import aimed at a thread that exists: the thread itself for a
   * retry of the request that created it (same key, same request), else a failure. Undefined when
   * there is no thread yet.
   */
  async #existingThread(req: {
    threadId: string;
    idempotency?: IdempotencyKey;
  }): Promise<RpcResult<ThreadResource> | undefined> {
    const live = await this.#thread();
    if (live === undefined) return undefined;
    const earlier = this.#earlierRequest(req.idempotency);
    if (!earlier.ok) return earlier;
    if (earlier.value) return ok(this.#resource(live));
    return fail("thread_exists", `Thread "${req.threadId}" already exists.`);
  }

  async getThread(): Promise<RpcResult<ThreadResource>> {
    const live = await this.#thread();
    return live ? ok(this.#resource(live)) : NOT_FOUND;
  }

  async deleteThread(): Promise<RpcResult<null>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    // Nothing new starts (a flush, a checkpoint, a queued turn); what already runs finishes
    // first, and no other event runs until the thread is gone. Otherwise a segment put or a
    // checkpoint written meanwhile would outlive the thread, in R2 or in the emptied storage.
    this.#deleting = true;
    try {
      this.#task?.controller.abort(new Error("thread deleted"));
      await this.#task?.done.catch(() => undefined);
      this.#events.closeAll();
      await this.#tidying;
      await this.ctx.blockConcurrencyWhile(async () => {
        await SegmentStore.deleteAll(
          this.env.ROLLOUT,
          threadPrefix(live.meta.tenant, live.meta.id),
        );
        await this.ctx.storage.deleteAlarm();
        this.#alarmDue = null;
        await this.ctx.storage.deleteAll();
        this.#queue.reset();
        this.#live = undefined;
        migrate(this.ctx.storage.sql);
      });
    } finally {
      this.#deleting = false;
    }
    return ok(null);
  }

  // --- RPC: turns -------------------------------------------------------------------------------

  async startTurn(req: StartTurnRequest): Promise<RpcResult<TurnResource>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const earlier = this.#earlierRequest(req.idempotency);
    if (!earlier.ok) return earlier;
    if (earlier.value?.turnId) return this.#awaitedTurn(earlier.value.turnId);
    const turnId = turnIdOf(req);
    const admitted = await this.#keyed(req.idempotency, turnId, () =>
      this.#admitTurn(live, req, turnId),
    );
    if (!admitted.ok) return admitted;
    const { task, queued } = admitted.value;
    if (queued) return ok(this.#queuedResource(live, queued));
    if (!task) return fail("internal", "No turn was started.");
    return ok(await task.done);
  }

  async streamTurn(req: StartTurnRequest): Promise<RpcResult<EventStream>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const earlier = this.#earlierRequest(req.idempotency);
    if (!earlier.ok) return earlier;
    if (earlier.value?.turnId) return this.#replayedStream(earlier.value);
    const turnId = turnIdOf(req);
    // Subscribe first, so the stream holds every event of the turn from its start.
    const stream = this.#events.subscribe(this.#events.lastSeq, turnId);
    const admitted = await this.#keyed(req.idempotency, turnId, () =>
      this.#admitTurn(live, req, turnId),
    );
    if (!admitted.ok) {
      await stream.cancel().catch(() => undefined);
      return admitted;
    }
    return ok(stream);
  }

  /** A keyed request's turn, as its first request answered: once it has ended or paused. */
  async #awaitedTurn(turnId: string): Promise<RpcResult<TurnResource>> {
    const running = this.#task;
    if (running?.turnId === turnId) return ok(await running.done);
    return this.getTurn(turnId);
  }

  /** The stream a keyed request's first attempt got: the thread's events from the same point on. */
  #replayedStream(earlier: IdempotencyRecord): RpcResult<EventStream> {
    if (earlier.eventSeq + 1 < this.#events.oldestKept()) {
      return fail("event_expired", "That turn's events were dropped; read the turn instead.");
    }
    return ok(this.#events.subscribe(earlier.eventSeq, earlier.turnId ?? undefined));
  }

  /**
   * The earlier request with this `Idempotency-Key`, when it was this same request and what it
   * did is there to answer with; undefined when this request is to be carried out.
   */
  #earlierRequest(key: IdempotencyKey | undefined): RpcResult<IdempotencyRecord | undefined> {
    if (key === undefined) return ok(undefined);
    if (this.#admitting.has(key.key)) {
      return fail("idempotency_key_in_use", "The first request with this key is still starting.");
    }
    const record = this.#idempotency.find(key.key);
    if (record === undefined) return ok(undefined);
    if (record.fingerprint !== key.fingerprint) {
      return fail("idempotency_key_reused", "This key was used with a different request.");
    }
    const { turnId } = record;
    if (
      turnId !== null &&
      this.#task?.turnId !== turnId &&
      this.#parts.meta.turn(turnId) === undefined &&
      !this.#queue.has(turnId)
    ) {
      // The instance went away before the turn's first line: it never happened.
      this.#idempotency.forget(key.key);
      return ok(undefined);
    }
    return ok(record);
  }

  /** Records a request's key in the synchronous step that carries it out (it cannot fail then). */
  #recordKey(key: IdempotencyKey | undefined, turnId: string | null): void {
    if (key !== undefined) {
      this.#idempotency.record(key.key, key.fingerprint, turnId, this.#events.lastSeq);
    }
  }

  /**
   * Admits a request under its key: recorded first (with the turn it is about to start, join or
   * queue), forgotten if admission fails, so only a request that took effect is ever replayed.
   */
  async #keyed<T>(
    key: IdempotencyKey | undefined,
    turnId: string | null,
    admit: () => Promise<RpcResult<T>>,
  ): Promise<RpcResult<T>> {
    if (key === undefined) return admit();
    this.#recordKey(key, turnId);
    this.#admitting.add(key.key);
    try {
      const result = await admit();
      if (!result.ok) this.#idempotency.forget(key.key);
      return result;
    } catch (err) {
      this.#idempotency.forget(key.key);
      throw err;
    } finally {
      this.#admitting.delete(key.key);
    }
  }

  async getTurn(turnId: string): Promise<RpcResult<TurnResource>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const row = this.#parts.meta.turn(turnId);
    if (row) return ok(await this.#turnResource(live, row));
    if (this.#queue.has(turnId)) return ok(this.#queuedResource(live, turnId));
    return fail("turn_not_found", `No turn "${turnId}" in this thread.`);
  }

  async events(req: EventsRequest): Promise<RpcResult<EventStream>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const last = this.#events.lastSeq;
    if (req.after !== undefined) {
      if (req.after > last) {
        return fail("invalid_request", `No event ${req.after} yet; the newest is ${last}.`, [
          { path: "after", message: "greater than the newest event" },
        ]);
      }
      if (req.after + 1 < this.#events.oldestKept()) {
        return fail("event_expired", "Events after that point were dropped; re-read the thread.");
      }
    }
    return ok(this.#events.subscribe(req.after ?? last));
  }

  /** Checks a resume request; the pending row and outputs when it can go ahead. */
  async #checkOutputs(
    live: LiveThread,
    turnId: string,
    req: SubmitOutputsRequest,
  ): Promise<RpcResult<{ row: TurnRow; outputs: ToolCallOutput[] }>> {
    const row = this.#parts.meta.turn(turnId);
    if (!row) return fail("turn_not_found", `No turn "${turnId}" in this thread.`);
    if (row.status !== "requires_action") {
      return fail("no_pending_calls", `Turn ${turnId} is not waiting for tool outputs.`);
    }
    if (this.#task) return fail("thread_busy", `Turn ${this.#task.currentId} is running.`);
    const outputs: ToolCallOutput[] = req.items.map((i) => ({
      call_id: i.call_id,
      output: i.output as ToolCallOutput["output"],
    }));
    try {
      live.session.checkResume(turnId, row.pending_calls, outputs);
    } catch (err) {
      if (err instanceof UnknownCallIdError) {
        const pending = new Set(row.pending_calls.map((c) => c.call_id));
        const errors = req.items.flatMap((item, i) =>
          pending.has(item.call_id)
            ? []
            : [{ path: `/items/${i}/call_id`, message: "not a pending call" }],
        );
        return fail("unknown_call_id", err.message, errors);
      }
      const failure = failureOf(err);
      if (failure) return failure;
      throw err;
    }
    return ok({ row, outputs });
  }

  #resume(live: LiveThread, row: TurnRow, outputs: ToolCallOutput[]) {
    return this.#startTask(
      live,
      row.id,
      (signal) =>
        live.session.resumeTurn(row.id, row.pending_calls, outputs, signal, row.queued_input),
      row,
    );
  }

  async submitOutputs(turnId: string, req: SubmitOutputsRequest): Promise<RpcResult<TurnResource>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const earlier = this.#earlierRequest(req.idempotency);
    if (!earlier.ok) return earlier;
    if (earlier.value) return this.#awaitedTurn(turnId);
    const checked = await this.#checkOutputs(live, turnId, req);
    if (!checked.ok) return checked;
    this.#recordKey(req.idempotency, turnId);
    const { task } = this.#resume(live, checked.value.row, checked.value.outputs);
    return ok(await task.done);
  }

  async streamOutputs(turnId: string, req: SubmitOutputsRequest): Promise<RpcResult<EventStream>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const earlier = this.#earlierRequest(req.idempotency);
    if (!earlier.ok) return earlier;
    if (earlier.value) return this.#replayedStream(earlier.value);
    const checked = await this.#checkOutputs(live, turnId, req);
    if (!checked.ok) return checked;
    this.#recordKey(req.idempotency, turnId);
    const stream = this.#events.subscribe(this.#events.lastSeq, turnId);
    this.#resume(live, checked.value.row, checked.value.outputs);
    return ok(stream);
  }

  async steer(turnId: string, req: SteerRequest): Promise<RpcResult<TurnResource>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const earlier = this.#earlierRequest(req.idempotency);
    if (!earlier.ok) return earlier;
    if (earlier.value) return this.getTurn(turnId);
    const running = this.#task;
    if (running && running.turnId === turnId) {
      if (running.currentKind !== "turn") {
        return fail("turn_not_steerable", "A compaction is running; it takes no input.");
      }
      this.#recordKey(req.idempotency, turnId);
      live.session.steer(contentOf(req.input));
      const row = this.#parts.meta.turn(running.currentId);
      return row ? ok(await this.#turnResource(live, row)) : ok(this.#queuedResource(live, turnId));
    }
    const row = this.#parts.meta.turn(turnId);
    if (!row && !this.#queue.has(turnId)) return fail("turn_not_found", `No turn "${turnId}".`);
    if (row?.status === "requires_action") {
      return fail(
        "turn_not_steerable",
        `Turn ${turnId} waits for tool outputs; post them instead.`,
      );
    }
    return fail("turn_mismatch", `Turn ${turnId} is not the running turn.`);
  }

  async interrupt(turnId: string): Promise<RpcResult<TurnResource>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const running = this.#task;
    if (running && (running.turnId === turnId || running.currentId === turnId)) {
      running.controller.abort(new Error("interrupted"));
      return ok(await running.done);
    }
    if (this.#queue.remove(turnId)) {
      return ok({ ...this.#queuedResource(live, turnId), status: "interrupted" });
    }
    const row = this.#parts.meta.turn(turnId);
    if (!row) return fail("turn_not_found", `No turn "${turnId}" in this thread.`);
    if (row.status === "requires_action" && !running) {
      const item = live.session.interruptPausedTurn(turnId);
      const done = this.#markInterrupted(live, row);
      this.#events.emit("item.completed", turnId, { item, context: true });
      const resource = await this.#turnResource(live, done);
      this.#events.emit("turn.interrupted", turnId, resource);
      await this.#scheduleFlush();
      return ok(resource);
    }
    return ok(await this.#turnResource(live, row));
  }

  // --- RPC: thread operations -------------------------------------------------------------------

  async rollback(req: RollbackRequest): Promise<RpcResult<ThreadResource>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const earlier = this.#earlierRequest(req.idempotency);
    if (!earlier.ok) return earlier;
    if (earlier.value) return ok(this.#resource(live));
    if (this.#task) return fail("thread_busy", `Turn ${this.#task.currentId} is running.`);
    // The body schema admits only valid counts, so the rollback below is recorded, in the same
    // synchronous step as its key.
    this.#recordKey(req.idempotency, null);
    this.#abandonPausedTurn(live, "interrupted");
    try {
      live.session.recordRollback(req.turns);
    } catch (err) {
      if (req.idempotency) this.#idempotency.forget(req.idempotency.key);
      const failure = failureOf(err);
      if (failure) return failure;
      throw err;
    }
    const reloaded = await this.#reload(live);
    return reloaded ? ok(this.#resource(reloaded)) : NOT_FOUND;
  }

  /**
   * Replaces the loaded thread with a replay of its rollout, after a change whose exact state
   * (reference, baseline, settings) is defined by replay: a rollback, and a message recorded
   * outside a turn, which replay attributes to the turn before it (reference §6.1), so a rollback
   * in between counts it as rolled back with that turn.
   */
  async #reload(live: LiveThread): Promise<LiveThread | undefined> {
    const updatedAt = live.log.lastWrittenAt;
    const reloaded = await LiveThread.load(this.#parts, live.segments);
    if (!reloaded) return undefined;
    if (updatedAt !== undefined) {
      reloaded.meta.updated_at = updatedAt;
      this.#parts.meta.put("thread", reloaded.meta);
    }
    this.#live = reloaded;
    await this.#scheduleFlush();
    return reloaded;
  }

  async compact(req: CompactRequest): Promise<RpcResult<TurnResource>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const earlier = this.#earlierRequest(req.idempotency);
    if (!earlier.ok) return earlier;
    if (earlier.value?.turnId) return this.#awaitedTurn(earlier.value.turnId);
    if (this.#task) return fail("thread_busy", `Turn ${this.#task.currentId} is running.`);
    const turnId = newTurnId();
    const admitted = await this.#keyed(req.idempotency, turnId, () =>
      this.#startedTask(live, turnId, (signal) =>
        live.session.compact("manual", signal, { turnId }),
      ),
    );
    if (!admitted.ok) return admitted;
    return ok(await admitted.value.done);
  }

  async inject(req: InjectRequest): Promise<RpcResult<ThreadResource>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const earlier = this.#earlierRequest(req.idempotency);
    if (!earlier.ok) return earlier;
    if (earlier.value) return ok(this.#resource(live));
    const running = this.#task;
    if (running && running.currentKind !== "turn") {
      return fail("thread_busy", "A compaction is running.");
    }
    // The key is recorded in the same synchronous step as the messages: both or neither.
    return this.#keyed(req.idempotency, null, async () => {
      try {
        if (running) {
          // While a turn runs, injected input joins it as pending input (reference §5.5).
          for (const item of req.items) live.session.steer([...item.content]);
          return ok(this.#resource(live));
        }
        const messages: MessageItem[] = req.items.map((m) => ({
          type: "message",
          role: "user",
          content: [...m.content],
        }));
        for (const item of live.session.inject(messages)) {
          this.#events.emit("item.completed", null, { item, context: false });
        }
        const reloaded = await this.#reload(live);
        return reloaded ? ok(this.#resource(reloaded)) : NOT_FOUND;
      } catch (err) {
        const failure = failureOf(err);
        if (failure) return failure;
        throw err;
      }
    });
  }

  async exportRollout(req: ExportRequest): Promise<RpcResult<RolloutExport>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const { lines, lastSeq, warnings } = await readWholeRollout(this.#parts, live.meta, live.log);
    const missingLines = lastSeq - lines.length;
    if (missingLines > 0 && !req.allowIncomplete) {
      const shown = warnings.slice(0, 3).join("; ");
      const more = warnings.length > 3 ? ` (and ${warnings.length - 3} more)` : "";
      return fail(
        "rollout_incomplete",
        `${missingLines} of the rollout's ${lastSeq} lines cannot be read: ${shown}${more}. ` +
          "Ask with allow_incomplete=true for the lines that can.",
      );
    }
    return ok({ lines: jsonlStream(lines.map((l) => l.text)), missingLines });
  }

  async forkSource(req: ForkSourceRequest): Promise<RpcResult<ForkSource>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    let cut = live.log.lastSeq + 1;
    if (req.beforeTurn !== undefined) {
      const row = this.#parts.meta.turn(req.beforeTurn);
      if (!row) return fail("turn_not_found", `No turn "${req.beforeTurn}" in this thread.`);
      cut = row.first_seq;
    } else if (this.#task) {
      // The last consistent point: before the running task's first line.
      const row = this.#parts.meta.turn(this.#task.currentId);
      if (row) cut = row.first_seq;
    }
    const { lines, warnings } = await readWholeRollout(this.#parts, live.meta, live.log);
    const prefix = lines.filter((l) => l.seq < cut).map((l) => l.text);
    return ok({ lines: jsonlStream(prefix), forkedFrom: live.meta.id, warnings });
  }

  async createFromRollout(req: CreateFromRolloutRequest): Promise<RpcResult<ThreadResource>> {
    // A keyed import's fingerprint lacks its body, which only this object reads: it is
    // completed once the body is read, and only then compared. Without a record of its key there
    // is nothing to compare, and an existing thread is answered at once, as for any request.
    const keyedImport = req.source === "import" ? req.idempotency : undefined;
    if (!keyedImport || this.#idempotency.find(keyedImport.key) === undefined) {
      const existing = await this.#existingThread(req);
      if (existing) {
        await req.lines.cancel().catch(() => undefined);
        return existing;
      }
    }
    const read = await readRolloutStream(req.lines);
    const idempotency = keyedImport && {
      key: keyedImport.key,
      fingerprint: read.ok
        ? importFingerprint(keyedImport.fingerprint, read.lines)
        : "an unreadable body",
    };
    if (idempotency) {
      const existing = await this.#existingThread({ threadId: req.threadId, idempotency });
      if (existing) return existing;
    }
    if (!read.ok) {
      return fail("invalid_request", `Line ${read.lineNumber}: ${read.reason}`, [
        { path: `/line/${read.lineNumber}`, message: read.reason },
      ]);
    }
    const [first, ...rest] = read.lines;
    if (!first)
      return fail("invalid_request", "The rollout is empty.", [
        { path: "/line/1", message: "no line" },
      ]);
    if (first.line.type !== "session_meta") {
      return fail("invalid_request", "The first line must be session_meta.", [
        { path: "/line/1", message: `expected session_meta, got ${first.line.type}` },
      ]);
    }
    const resolved = configOfRollout(
      this.#parts.catalog,
      read.lines.map((l) => l.line),
      first.line.payload.cwd,
    );
    if (!resolved.ok) return resolved;
    const now = nowIso();
    const forkedFrom = req.forkedFrom ?? null;
    const meta = newMeta(req.tenant, req.threadId, now, forkedFrom);
    const ownMeta = {
      ...first.line.payload,
      id: req.threadId,
      timestamp: now,
      ...(forkedFrom ? { forked_from_id: forkedFrom } : {}),
    };
    const log = new RolloutLog(this.#parts.sql, systemClock, 0);
    const config = resolved.value.config;
    const metaLine = { timestamp: now, type: "session_meta", payload: ownMeta } as RolloutLine;
    const stored: ImportedLine[] = [{ text: encodeRolloutLine(metaLine), line: metaLine }, ...rest];
    this.ctx.storage.transactionSync(() => {
      for (const line of stored) log.appendText(line.text);
      this.#parts.meta.put("config", config);
    });
    const lines = stored.map((l) => l.line);
    // A fork of a damaged rollout lacks lines: as for its source, the context is sent again.
    const inherited = req.warnings ?? [];
    const rebuilt = reconstructRollout(lines, { truncation: truncationPolicyOf(config) });
    const state = inherited.length > 0 ? withoutContextBaseline(rebuilt) : rebuilt;
    const turns = turnRowsFromRollout(stored.map((l, i) => ({ seq: i + 1, line: l.line })));
    meta.turn_count = turns.filter((t) => t.kind !== "compaction").length;
    meta.warnings = [...inherited, ...resolved.value.warnings, ...state.warnings].map(
      (message) => ({
        code: "rollout_repaired",
        message,
      }),
    );
    this.ctx.storage.transactionSync(() => {
      this.#parts.meta.put("thread", meta);
      for (const t of turns) this.#parts.meta.putTurn(t);
      // The thread exists from here on: so does the key that created it.
      this.#recordKey(idempotency ?? req.idempotency, null);
    });
    const live = new LiveThread(this.#parts, meta, config, log, undefined, state);
    this.#live = live;
    this.#settleInterruptedTurn(live);
    await this.#scheduleFlush();
    return ok(this.#resource(live));
  }

  async listHistory(req: ListHistoryRequest): Promise<RpcResult<ListResource<ResponseItem>>> {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    const history = live.session.history;
    let start = 0;
    if (req.cursor !== undefined) {
      const parsed = parseCursor(req.cursor);
      if (!parsed || parsed.v !== live.rewrites || parsed.i > history.length) {
        return fail(
          "invalid_request",
          "The cursor is invalid or the history was rewritten since.",
          [{ path: "cursor", message: "unknown or expired cursor" }],
        );
      }
      start = parsed.i;
    }
    // A page reads only the stored runs of history it falls in (a cold start reads none).
    const end = Math.min(start + req.limit, history.length);
    return ok({
      object: "list",
      data: history.slice(start, end),
      next_cursor: end < history.length ? makeCursor(live.rewrites, end) : null,
    });
  }

  async getPrompt() {
    const live = await this.#thread();
    if (!live) return NOT_FOUND;
    return ok(live.session.previewPrompt());
  }

  /**
   * Rebuilds the thread from R2 alone (design §6): every segment, plus whatever SQLite tail exists.
   * Works on an empty SQLite (the identity comes from the DO name `{tenant}:{thread}`).
   */
  async restore(): Promise<RpcResult<ThreadResource>> {
    const name = this.ctx.id.name;
    const [tenant, threadId] = name?.split(":") ?? [];
    if (!tenant || !threadId) return fail("internal", "This object has no thread name.");
    if (this.#task) return fail("thread_busy", `Turn ${this.#task.currentId} is running.`);
    const existing = await this.#thread();
    const log = existing?.log ?? new RolloutLog(this.#parts.sql, systemClock, 0);
    const whole = await readWholeRollout(this.#parts, { tenant, id: threadId }, log, {
      everyLine: true,
    });
    const rows = whole.lines;
    if (rows.length === 0) return fail("not_found", "No rollout in R2 for this thread.");
    const lines = rows.map((r) => r.line);
    const metaLine = lines.find((l) => l.type === "session_meta");
    if (metaLine?.type !== "session_meta") {
      return fail("internal", "The rollout in R2 has no session_meta line.");
    }
    const resolved = configOfRollout(this.#parts.catalog, lines, metaLine.payload.cwd);
    if (!resolved.ok) return fail("internal", "The rollout's configuration cannot be resolved.");
    const config = resolved.value.config;
    const turns = turnRowsFromRollout(rows);
    const meta: ThreadMeta = {
      ...newMeta(
        tenant,
        threadId,
        metaLine.payload.timestamp ?? metaLine.timestamp,
        metaLine.payload.forked_from_id ?? null,
      ),
      updated_at: newestTimestamp(lines) ?? metaLine.timestamp,
      turn_count: turns.filter((t) => t.kind !== "compaction").length,
    };
    const rebuilt = reconstructRollout(lines, { truncation: truncationPolicyOf(config) });
    const state = whole.warnings.length > 0 ? withoutContextBaseline(rebuilt) : rebuilt;
    meta.warnings = [...whole.warnings, ...resolved.value.warnings, ...state.warnings].map(
      (message) => ({
        code: "rollout_repaired",
        message,
      }),
    );
    const lastSeq = rows.at(-1)?.seq ?? 0;
    const flushed = whole.segments.at(-1)?.last_seq ?? 0;
    // SQLite keeps only the lines R2 lacks, so the lines R2 has go into a checkpoint: a reload
    // needs every line after the checkpoint in SQLite. Not when lines were lost: a checkpoint
    // would keep the context baseline that `state` dropped (a replay from R2 drops it again).
    const checkpoint =
      whole.warnings.length === 0 && flushed > 0
        ? createCheckpoint(
            rows.filter((r) => r.seq <= flushed).map((r) => r.line),
            { truncation: truncationPolicyOf(config), lastSeq: flushed },
          )
        : undefined;
    // Rewrite local state from the rollout, in one transaction: lines R2 holds are recorded as
    // flushed.
    this.ctx.storage.transactionSync(() => {
      clearRolloutState(this.ctx.storage.sql);
      this.#parts.meta.put("thread", meta);
      this.#parts.meta.put("config", config);
      for (const t of turns) this.#parts.meta.putTurn(t);
      for (const s of whole.segments) SegmentStore.recordDone(this.#parts.sql, s);
      for (const r of rows) if (r.seq > flushed) RolloutLog.insert(this.#parts.sql, r.seq, r.text);
    });
    const live = new LiveThread(
      this.#parts,
      meta,
      config,
      new RolloutLog(this.#parts.sql, systemClock, lastSeq),
      checkpoint,
      state,
    );
    if (checkpoint) live.checkpoints.save(checkpoint);
    this.#live = live;
    // Lines that were only in SQLite still go to R2.
    await this.#scheduleFlush();
    return ok(this.#resource(live));
  }

  /** @internal For tests only: the live engine state that a cold start must reproduce exactly. */
  /** Stored runs at the front of the live history, and how many of them were never read. */
  async storedRunsForTesting(): Promise<{ runs: number; unread: number } | undefined> {
    const live = await this.#thread();
    const runs = live?.session.state.history.toState().sealed ?? [];
    return live && { runs: runs.length, unread: runs.filter((run) => !run.parsed).length };
  }

  /**
   * @internal For tests only: the history and token info of the checkpoint in memory, and of a
   * checkpoint replayed from the stored lines it covers (undefined: no checkpoint yet).
   */
  async checkpointReplayForTesting() {
    const live = await this.#thread();
    const checkpoint = live?.checkpoint;
    if (!live || !checkpoint) return undefined;
    const whole = await readWholeRollout(this.#parts, live.meta, live.log);
    const covered = whole.lines.filter((l) => l.seq <= checkpoint.lastSeq).map((l) => l.line);
    const replayed = createCheckpoint(covered, {
      truncation: checkpoint.truncation,
      lastSeq: checkpoint.lastSeq,
    });
    // Plain JSON, stored runs read: what a reload of either would restore.
    const plain = (c: Checkpoint) =>
      JSON.parse(
        JSON.stringify({
          items: [...(c.sealed ?? []).flatMap((run) => run.items), ...c.items],
          tokenInfo: c.tokenInfo ?? null,
        }),
      ) as unknown;
    return { checkpoint: plain(checkpoint), replayed: plain(replayed) };
  }

  async inspectForTesting() {
    const live = await this.#thread();
    if (!live) return undefined;
    const { config, history, previousTurnSettings } = live.session.state;
    // Tests compare plain states: stored runs of history are read into items first.
    history.readSealed();
    return {
      config,
      history: history.toState(),
      previousTurnSettings,
      lastSeq: live.log.lastSeq,
      flushedThrough: live.segments.flushedThrough(),
      checkpointSeq: live.checkpoint?.lastSeq,
    };
  }

  // --- Flushing ---------------------------------------------------------------------------------

  async #scheduleFlush(): Promise<void> {
    const live = this.#live;
    if (!live) return;
    if (live.log.lastSeq - live.segments.flushedThrough() >= FLUSH_TAIL_MAX_LINES) {
      this.ctx.waitUntil(this.#flushAndTidy());
      return;
    }
    await this.#alarmWithin(FLUSH_DELAY_MS);
  }

  /**
   * Flushes the tail to R2, then checkpoints, then starts a queued turn left waiting. A failed
   * flush is retried with backoff; nothing is lost.
   */
  override async alarm(): Promise<void> {
    // The alarm that woke us is spent; whatever this run sets is the next one.
    this.#alarmDue = null;
    await this.#flushAndTidy();
  }

  /** Flushes, checkpoints and prunes, then starts a queued turn; tracked so a delete can wait. */
  #flushAndTidy(): Promise<void> {
    const run = this.#flushAndTidyOnce();
    this.#tidying = Promise.allSettled([this.#tidying, run]).then(() => undefined);
    return run;
  }

  async #flushAndTidyOnce(): Promise<void> {
    if (this.#deleting) return;
    const live = await this.#thread();
    if (!live) return;
    try {
      await live.segments.flush();
      this.#parts.meta.put("flush_attempts", 0);
      await live.maybeCheckpoint(() => readWholeRollout(this.#parts, live.meta, live.log));
    } catch (err) {
      const attempts = (this.#parts.meta.get<number>("flush_attempts") ?? 0) + 1;
      this.#parts.meta.put("flush_attempts", attempts);
      const delay = Math.min(FLUSH_DELAY_MS * 2 ** attempts, FLUSH_RETRY_MAX_MS);
      console.warn(`[rollout] flush failed (attempt ${attempts}), retrying in ${delay} ms`, err);
      await this.#setAlarm(systemClock.nowMs() + delay);
    }
    this.#events.prune();
    this.#idempotency.prune();
    const expiry = this.#events.nextExpiryMs();
    if (expiry !== undefined && this.#alarmDue === null) {
      // Old events leave storage even when the thread stays idle.
      await this.#setAlarm(expiry);
    }
    if (this.#task) await this.#alarmWithin(RUNNING_TASK_ALARM_MS);
    await this.#drainQueue();
  }
}

/**
 * The latest time among the lines: a thread's `updated_at`. Not simply the last line's: an
 * imported or forked thread's own `session_meta` is newer than the lines it copied.
 */
function newestTimestamp(lines: readonly RolloutLine[]): string | undefined {
  let newest: string | undefined;
  let newestMs = Number.NEGATIVE_INFINITY;
  for (const line of lines) {
    const ms = Date.parse(line.timestamp);
    if (ms >= newestMs) {
      newestMs = ms;
      newest = line.timestamp;
    }
  }
  return newest;
}

function newMeta(
  tenant: string,
  id: string,
  createdAt: string,
  forkedFrom: string | null,
): ThreadMeta {
  return {
    tenant,
    id,
    created_at: createdAt,
    updated_at: createdAt,
    forked_from: forkedFrom,
    turn_count: 0,
    warnings: [],
  };
}

function sessionMetaPayload(
  id: string,
  now: string,
  config: SessionConfiguration,
  forkedFrom: string | null,
) {
  return {
    id,
    timestamp: now,
    cwd: config.environments[0]?.cwd ?? "/",
    originator: "spindle",
    cli_version: "spindle-0.1.0",
    source: "api",
    model_provider: config.provider,
    ...(forkedFrom ? { forked_from_id: forkedFrom } : {}),
  };
}

/**
 * A rollout's configuration: its newest `spindle_config` line, else one resolved from its newest
 * `turn_context` (a plain Codex rollout), else the defaults at the session's cwd.
 */
function configOfRollout(
  catalog: ModelCatalog,
  lines: readonly RolloutLine[],
  cwd: string | undefined,
): RpcResult<{ config: SessionConfiguration; warnings: string[] }> {
  const own = lines.findLast((l) => l.type === "spindle_config");
  if (own?.type === "spindle_config") return ok({ config: own.payload, warnings: [] });
  const context = lines.findLast((l) => l.type === "turn_context");
  let update: ThreadConfig = cwd ? { cwd } : {};
  const warnings: string[] = [];
  if (context?.type === "turn_context") {
    const derived = threadConfigFromTurnContext(context.payload, new Set(catalog.slugs()));
    update = derived.config;
    warnings.push(
      ...derived.dropped.map((d) => `imported ${d} is not supported here; the default is used`),
    );
  }
  try {
    const config = resolveSessionConfiguration(undefined, update, catalog, DEFAULT_MODEL_SLUG);
    return ok({ config, warnings });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return fail("invalid_request", `The rollout's settings cannot be used: ${message}`, [
      { path: "/line/1", message },
    ]);
  }
}

/** A history page cursor: the index to go on from, valid while no rewrite happened since. */
function makeCursor(rewrites: number, index: number): string {
  return btoa(JSON.stringify({ v: rewrites, i: index }));
}

function parseCursor(cursor: string): { v: number; i: number } | undefined {
  try {
    const value = JSON.parse(atob(cursor)) as unknown;
    if (typeof value !== "object" || value === null) return undefined;
    const { v, i } = value as Record<string, unknown>;
    return Number.isInteger(v) && Number.isInteger(i) && (i as number) >= 0
      ? { v: v as number, i: i as number }
      : undefined;
  } catch {
    return undefined;
  }
}
