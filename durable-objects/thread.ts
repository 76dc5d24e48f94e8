import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
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
  ListResource,
  RollbackRequest,
  RolloutExport,
  RpcResult,
  StartTurnRequest,
  SteerRequest,
  SubmitOutputsRequest,
  ThreadResource,
  ThreadRpc,
  TurnResource,
} from "../shared/api/index.ts";
import type { MessageItem, Prompt, ResponseItem } from "../shared/protocol/index.ts";
import { Admission } from "./admission.ts";
import { AlarmSchedule } from "./alarms.ts";
import { EventLog } from "./event-log.ts";
import { IdempotencyKeys, type IdempotencyRecord } from "./idempotency.ts";
import {
  LiveThread,
  type StorageParts,
  storagePartsOf,
  systemClock,
  threadPrefix,
} from "./live-thread.ts";
import { historyPage, queuedTurnResource, threadResource, turnResource } from "./resources.ts";
import { fail, guarded, ok, THREAD_NOT_FOUND } from "./results.ts";
import { exportedRollout, rolloutPrefix } from "./rollout-export.ts";
import { importFingerprint, readRolloutStream } from "./rollout-import.ts";
import { RolloutLog } from "./rollout-log.ts";
import { migrate } from "./schema.ts";
import { SegmentStore } from "./segments.ts";
import { contentOf, newTurnId, TaskControl } from "./task-control.ts";
import { cancelUpload, importThread, restoreThread } from "./thread-from-rollout.ts";
import { TurnQueue } from "./turn-queue.ts";
import { Upkeep } from "./upkeep.ts";

/**
 * One conversation thread (design §5-§7): the object's wiring. It builds the stores over SQLite
 * and R2, loads the thread on its first request (the constructor only migrates the schema), and
 * routes each RPC method of `ThreadRpc` to the engine through one boundary (`#withThread`). Which
 * task runs is `TaskControl`'s, keys are `Admission`'s, the alarm and R2 flushes are `Upkeep`'s,
 * resources are built in `resources.ts`, and import and restore in `thread-from-rollout.ts`.
 */
export class Thread extends DurableObject<Env> implements ThreadRpc {
  readonly #parts: StorageParts;
  readonly #events: EventLog;
  readonly #queue: TurnQueue;
  readonly #idempotency: IdempotencyKeys;
  readonly #admission: Admission;
  readonly #alarms: AlarmSchedule;
  readonly #tasks: TaskControl;
  readonly #upkeep: Upkeep;
  #live: LiveThread | undefined;
  #loading: Promise<LiveThread | undefined> | undefined;
  /** A delete is under way: no flush, checkpoint or queued turn starts. */
  #deleting = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage.sql);
    this.#parts = storagePartsOf(ctx, env);
    const { meta, sql } = this.#parts;
    this.#events = new EventLog(sql, systemClock);
    this.#queue = new TurnQueue(sql);
    this.#idempotency = new IdempotencyKeys(sql, systemClock);
    this.#alarms = new AlarmSchedule(ctx.storage, systemClock);
    const common = {
      meta,
      events: this.#events,
      alarms: this.#alarms,
      load: () => this.#thread(),
      halted: () => this.#deleting,
      waitUntil: (work: Promise<unknown>) => ctx.waitUntil(work),
    };
    this.#tasks = new TaskControl({
      ...common,
      queue: this.#queue,
      afterTask: () => this.#upkeep.scheduleFlush(),
    });
    this.#upkeep = new Upkeep({
      ...common,
      clock: systemClock,
      idempotency: this.#idempotency,
      loaded: () => this.#live,
      taskRunning: () => this.#tasks.running !== undefined,
      drainQueue: () => this.#tasks.drainQueue(),
    });
    this.#admission = new Admission(
      this.#idempotency,
      () => this.#events.lastSeq,
      (turnId) =>
        this.#tasks.running?.turnId === turnId ||
        meta.turn(turnId) !== undefined ||
        this.#queue.has(turnId),
    );
  }

  /** The loaded thread, for subclasses (the test worker's inspection methods). */
  protected loadedThread(): Promise<LiveThread | undefined> {
    return this.#thread();
  }

  /** The thread, loaded once per instance; undefined when it does not exist. */
  async #thread(): Promise<LiveThread | undefined> {
    if (this.#live) return this.#live;
    this.#loading ??= LiveThread.load(this.#parts).then(
      async (live) => {
        this.#live = live;
        this.#loading = undefined;
        // Settling ends a turn, and a turn's end schedules the flush of its lines.
        if (live && this.#tasks.settleInterruptedTurn(live)) await this.#upkeep.scheduleFlush();
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
   * The boundary of every method on an existing thread: `not_found` when there is none, and the
   * core's typed errors answered as their failures.
   */
  #withThread<T>(
    work: (live: LiveThread) => Promise<RpcResult<T>> | RpcResult<T>,
  ): Promise<RpcResult<T>> {
    return guarded(async () => {
      const live = await this.#thread();
      return live ? work(live) : THREAD_NOT_FOUND;
    });
  }

  /** Makes `live` the thread of this instance and schedules the flush of what it wrote. */
  async #adopt(live: LiveThread): Promise<ThreadResource> {
    this.#live = live;
    await this.#upkeep.scheduleFlush();
    return this.#resource(live);
  }

  #resource(live: LiveThread): ThreadResource {
    return threadResource(live, this.#tasks.running !== undefined);
  }

  // --- Threads ----------------------------------------------------------------------------------

  createThread(req: CreateThreadRequest): Promise<RpcResult<ThreadResource>> {
    return guarded(async () => {
      const existing = await this.#existingThread(req);
      if (existing) return existing;
      const live = LiveThread.create(this.#parts, req, () =>
        this.#admission.record(req.idempotency, null),
      );
      return ok(await this.#adopt(live));
    });
  }

  /**
   * The answer to a create, fork or import aimed at a thread that exists: the thread itself for a
   * retry of the request that created it (same key, same request), else `thread_exists`.
   * Undefined when there is no thread yet.
   */
  async #existingThread(req: {
    threadId: string;
    idempotency?: IdempotencyKey;
  }): Promise<RpcResult<ThreadResource> | undefined> {
    const live = await this.#thread();
    if (live === undefined) return undefined;
    const earlier = this.#admission.earlier(req.idempotency);
    if (!earlier.ok) return earlier;
    if (earlier.value) return ok(this.#resource(live));
    return fail("thread_exists", `Thread "${req.threadId}" already exists.`);
  }

  getThread(): Promise<RpcResult<ThreadResource>> {
    return this.#withThread((live) => ok(this.#resource(live)));
  }

  deleteThread(): Promise<RpcResult<null>> {
    return this.#withThread(async (live) => {
      // Nothing new starts (a flush, a checkpoint, a queued turn); what already runs finishes
      // first, and no other event runs until the thread is gone. Otherwise a segment put or a
      // checkpoint written meanwhile would outlive the thread, in R2 or in the emptied storage.
      this.#deleting = true;
      try {
        const running = this.#tasks.running;
        running?.controller.abort(new Error("thread deleted"));
        await running?.done.catch(() => undefined);
        this.#events.closeAll();
        await this.#upkeep.settled();
        await this.ctx.blockConcurrencyWhile(async () => {
          const prefix = threadPrefix(live.meta.tenant, live.meta.id);
          await SegmentStore.deleteAll(this.env.ROLLOUT, prefix);
          await this.#alarms.clear();
          await this.ctx.storage.deleteAll();
          this.#queue.reset();
          this.#live = undefined;
          migrate(this.ctx.storage.sql);
        });
      } finally {
        this.#deleting = false;
      }
      return ok(null);
    });
  }

  // --- Turns ------------------------------------------------------------------------------------

  startTurn(req: StartTurnRequest): Promise<RpcResult<TurnResource>> {
    return this.#withThread(async (live) => {
      const earlier = this.#admission.earlier(req.idempotency);
      if (!earlier.ok) return earlier;
      if (earlier.value?.turnId) return this.#awaitedTurn(live, earlier.value.turnId);
      const turnId = this.#tasks.turnIdFor(req);
      const admitted = await this.#admission.keyed(req.idempotency, turnId, () =>
        this.#tasks.admitTurn(live, req, turnId),
      );
      if (!admitted.ok) return admitted;
      const { task, queued } = admitted.value;
      return ok(task ? await task.done : queuedTurnResource(live.meta.id, queued));
    });
  }

  streamTurn(req: StartTurnRequest): Promise<RpcResult<EventStream>> {
    return this.#withThread(async (live) => {
      const earlier = this.#admission.earlier(req.idempotency);
      if (!earlier.ok) return earlier;
      if (earlier.value?.turnId) return this.#replayedStream(earlier.value);
      const turnId = this.#tasks.turnIdFor(req);
      // Subscribe first, so the stream holds every event of the turn from its start.
      const stream = this.#events.subscribe(this.#events.lastSeq, turnId);
      const admitted = await this.#admission.keyed(req.idempotency, turnId, () =>
        this.#tasks.admitTurn(live, req, turnId),
      );
      if (!admitted.ok) {
        await stream.cancel().catch(() => undefined);
        return admitted;
      }
      return ok(stream);
    });
  }

  /** A keyed request's turn, as its first request answered: once it has ended or paused. */
  async #awaitedTurn(live: LiveThread, turnId: string): Promise<RpcResult<TurnResource>> {
    const running = this.#tasks.running;
    if (running?.turnId === turnId) return ok(await running.done);
    return this.#turn(live, turnId);
  }

  /** The stream a keyed request's first attempt got: the thread's events from the same point on. */
  #replayedStream(earlier: IdempotencyRecord): RpcResult<EventStream> {
    if (earlier.eventSeq + 1 < this.#events.oldestKept()) {
      return fail("event_expired", "That turn's events were dropped; read the turn instead.");
    }
    return ok(this.#events.subscribe(earlier.eventSeq, earlier.turnId ?? undefined));
  }

  getTurn(turnId: string): Promise<RpcResult<TurnResource>> {
    return this.#withThread((live) => this.#turn(live, turnId));
  }

  async #turn(live: LiveThread, turnId: string): Promise<RpcResult<TurnResource>> {
    const row = this.#parts.meta.turn(turnId);
    if (row) return ok(await turnResource(live, row));
    if (this.#queue.has(turnId)) return ok(queuedTurnResource(live.meta.id, turnId));
    return fail("turn_not_found", `No turn "${turnId}" in this thread.`);
  }

  events(req: EventsRequest): Promise<RpcResult<EventStream>> {
    return this.#withThread(() => {
      const last = this.#events.lastSeq;
      if (req.after !== undefined && req.after > last) {
        return fail("invalid_request", `No event ${req.after} yet; the newest is ${last}.`, [
          { path: "after", message: "greater than the newest event" },
        ]);
      }
      if (req.after !== undefined && req.after + 1 < this.#events.oldestKept()) {
        return fail("event_expired", "Events after that point were dropped; re-read the thread.");
      }
      return ok(this.#events.subscribe(req.after ?? last));
    });
  }

  submitOutputs(turnId: string, req: SubmitOutputsRequest): Promise<RpcResult<TurnResource>> {
    return this.#withThread(async (live) => {
      const earlier = this.#admission.earlier(req.idempotency);
      if (!earlier.ok) return earlier;
      if (earlier.value) return this.#awaitedTurn(live, turnId);
      const resumed = this.#tasks.resume(live, turnId, req.items, () =>
        this.#admission.record(req.idempotency, turnId),
      );
      return resumed.ok ? ok(await resumed.value.done) : resumed;
    });
  }

  streamOutputs(turnId: string, req: SubmitOutputsRequest): Promise<RpcResult<EventStream>> {
    return this.#withThread((live) => {
      const earlier = this.#admission.earlier(req.idempotency);
      if (!earlier.ok) return earlier;
      if (earlier.value) return this.#replayedStream(earlier.value);
      const stream = this.#events.subscribe(this.#events.lastSeq, turnId);
      const resumed = this.#tasks.resume(live, turnId, req.items, () =>
        this.#admission.record(req.idempotency, turnId),
      );
      if (!resumed.ok) stream.cancel().catch(() => undefined);
      return resumed.ok ? ok(stream) : resumed;
    });
  }

  steer(turnId: string, req: SteerRequest): Promise<RpcResult<TurnResource>> {
    return this.#withThread(async (live) => {
      const earlier = this.#admission.earlier(req.idempotency);
      if (!earlier.ok) return earlier;
      if (earlier.value) return this.#turn(live, turnId);
      return this.#tasks.steer(live, turnId, contentOf(req.input), (join) =>
        this.#admission.recorded(req.idempotency, turnId, join),
      );
    });
  }

  interrupt(turnId: string): Promise<RpcResult<TurnResource>> {
    return this.#withThread((live) =>
      this.#tasks.interrupt(live, turnId, () => this.#upkeep.scheduleFlush()),
    );
  }

  // --- Thread operations ------------------------------------------------------------------------

  rollback(req: RollbackRequest): Promise<RpcResult<ThreadResource>> {
    return this.#withThread(async (live) => {
      const earlier = this.#admission.earlier(req.idempotency);
      if (!earlier.ok) return earlier;
      if (earlier.value) return ok(this.#resource(live));
      const busy = this.#tasks.busy();
      if (busy) return busy;
      this.#admission.recorded(req.idempotency, null, () => {
        this.#tasks.abandonPausedTurn(live, "interrupted");
        live.session.recordRollback(req.turns);
      });
      return this.#reload(live);
    });
  }

  /**
   * Replaces the loaded thread with a replay of its rollout, after a change whose exact state
   * (reference, baseline, settings) is defined by replay: a rollback, and a message recorded
   * outside a turn, which replay attributes to the turn before it (reference §6.1), so a rollback
   * in between counts it as rolled back with that turn.
   */
  async #reload(live: LiveThread): Promise<RpcResult<ThreadResource>> {
    const updatedAt = live.log.lastWrittenAt;
    const reloaded = await LiveThread.load(this.#parts, live.segments);
    if (!reloaded) return THREAD_NOT_FOUND;
    if (updatedAt !== undefined) {
      reloaded.meta.updated_at = updatedAt;
      this.#parts.meta.put("thread", reloaded.meta);
    }
    return ok(await this.#adopt(reloaded));
  }

  compact(req: CompactRequest): Promise<RpcResult<TurnResource>> {
    return this.#withThread(async (live) => {
      const earlier = this.#admission.earlier(req.idempotency);
      if (!earlier.ok) return earlier;
      if (earlier.value?.turnId) return this.#awaitedTurn(live, earlier.value.turnId);
      const busy = this.#tasks.busy();
      if (busy) return busy;
      const turnId = newTurnId();
      const admitted = await this.#admission.keyed(req.idempotency, turnId, () =>
        this.#tasks.started(live, turnId, (signal) =>
          live.session.compact("manual", signal, { turnId }),
        ),
      );
      return admitted.ok ? ok(await admitted.value.done) : admitted;
    });
  }

  inject(req: InjectRequest): Promise<RpcResult<ThreadResource>> {
    return this.#withThread(async (live) => {
      const earlier = this.#admission.earlier(req.idempotency);
      if (!earlier.ok) return earlier;
      if (earlier.value) return ok(this.#resource(live));
      const running = this.#tasks.running;
      if (running && running.currentKind !== "turn") {
        return fail("thread_busy", "A compaction is running.");
      }
      // The key is recorded in the same synchronous step as the messages: both or neither.
      return this.#admission.keyed(req.idempotency, null, async () => {
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
        return this.#reload(live);
      });
    });
  }

  exportRollout(req: ExportRequest): Promise<RpcResult<RolloutExport>> {
    return this.#withThread((live) => exportedRollout(live, req.allowIncomplete));
  }

  forkSource(req: ForkSourceRequest): Promise<RpcResult<ForkSource>> {
    return this.#withThread((live) =>
      rolloutPrefix(live, req.beforeTurn, this.#tasks.running?.currentId),
    );
  }

  createFromRollout(req: CreateFromRolloutRequest): Promise<RpcResult<ThreadResource>> {
    return guarded(async () => {
      // A keyed import's fingerprint lacks its body, which only this object reads: it is
      // completed once the body is read, and only then compared. Without a record of its key
      // there is nothing to compare, and an existing thread is answered at once.
      const keyedImport = req.source === "import" ? req.idempotency : undefined;
      if (!keyedImport || !this.#admission.has(keyedImport.key)) {
        const existing = await this.#existingThread(req);
        if (existing) {
          await cancelUpload(req);
          return existing;
        }
      }
      const read = await readRolloutStream(req.lines);
      const idempotency = keyedImport && {
        key: keyedImport.key,
        fingerprint: importFingerprint(keyedImport.fingerprint, read),
      };
      if (idempotency) {
        const existing = await this.#existingThread({ threadId: req.threadId, idempotency });
        if (existing) return cancelUpload(req).then(() => existing);
      }
      const imported = await importThread(this.#parts, req, read, () =>
        // The thread exists from here on: so does the key that created it.
        this.#admission.record(idempotency ?? req.idempotency, null),
      );
      if (!imported.ok) return imported;
      this.#tasks.settleInterruptedTurn(imported.value);
      return ok(await this.#adopt(imported.value));
    });
  }

  listHistory(req: ListHistoryRequest): Promise<RpcResult<ListResource<ResponseItem>>> {
    return this.#withThread((live) => historyPage(live, req));
  }

  getPrompt(): Promise<RpcResult<Prompt>> {
    return this.#withThread((live) => ok(live.session.previewPrompt()));
  }

  restore(): Promise<RpcResult<ThreadResource>> {
    return guarded(async () => {
      const [tenant, threadId] = this.ctx.id.name?.split(":") ?? [];
      if (!tenant || !threadId) return fail("internal", "This object has no thread name.");
      const busy = this.#tasks.busy();
      if (busy) return busy;
      const existing = await this.#thread();
      const log = existing?.log ?? new RolloutLog(this.#parts.sql, systemClock, 0);
      const restored = await restoreThread(this.#parts, { tenant, threadId }, log);
      // Lines that were only in SQLite still go to R2.
      return restored.ok ? ok(await this.#adopt(restored.value)) : restored;
    });
  }

  // --- Alarm ------------------------------------------------------------------------------------

  /** Flushes, checkpoints and prunes, then starts a queued turn left waiting. */
  override async alarm(): Promise<void> {
    this.#alarms.fired();
    await this.#upkeep.run();
  }
}
