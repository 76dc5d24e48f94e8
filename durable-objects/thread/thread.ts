import { DurableObject } from "cloudflare:workers";
import type { Env } from "../../env.ts";
import type {
  AcceptDeliveryRequest,
  AcceptedDelivery,
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
  ListTurnsRequest,
  PatchThreadBody,
  RestoreRequest,
  RollbackRequest,
  RolloutExport,
  RpcResult,
  StartTurnRequest,
  SteerRequest,
  SubmitOutputsRequest,
  TenantPolicy,
  ThreadResource,
  ThreadRpc,
  Trace,
  TurnRequestsResource,
  TurnResource,
  TurnSummary,
  YieldedQuota,
} from "../../shared/api/index.ts";
import type { Prompt, ResponseItem } from "../../shared/protocol/index.ts";
import { AlarmSchedule } from "../common/alarms.ts";
import { systemClock } from "../common/clock.ts";
import { requireBucketIn, threadNameOf } from "../common/placement.ts";
import { fail, guarded, ok, THREAD_NOT_FOUND } from "../common/results.ts";
import { ThreadCreation } from "./creation.ts";
import { deleteThreadState } from "./deletion.ts";
import { HistoryEdits } from "./history-edits.ts";
import { IdleCompaction } from "./idle-compaction.ts";
import { KeyedRequests } from "./keyed-requests.ts";
import { LiveThread, type StorageParts, storagePartsOf } from "./live-thread.ts";
import { threadServerTools } from "./mcp/server-tools.ts";
import { turnRequestsResource } from "./model-requests.ts";
import { QuotaGate } from "./quotas/quota-gate.ts";
import { historyPage, queuedTurnResource, threadResource, turnResource } from "./resources.ts";
import { exportedRollout, rolloutPrefix } from "./rollouts/export.ts";
import { EventLog } from "./storage/event-log.ts";
import { IdempotencyKeys, type IdempotencyRecord } from "./storage/idempotency-keys.ts";
import { migrateThread } from "./storage/schema.ts";
import { TaskControl } from "./tasks/task-control.ts";
import { TurnQueue } from "./tasks/turn-queue.ts";
import { TenantSync } from "./tenancy/tenant-sync.ts";
import { turnPage } from "./turn-list.ts";
import { Upkeep } from "./upkeep.ts";
import { HookIntake } from "./webhooks/hook-intake.ts";
import { WebhookOutbox } from "./webhooks/outbox.ts";

/**
 * One conversation thread (design §5-§7): the object's wiring. It builds the stores over SQLite
 * and R2, loads the thread on its first request (the constructor only migrates the schema), and
 * routes each RPC method of `ThreadRpc` to the engine through one boundary (`#withThread`). Which
 * task runs is `TaskControl`'s, keys are `KeyedRequests`'s, the alarm and R2 flushes are `Upkeep`'s,
 * resources are built in `thread/resources.ts`, and import and restore in `thread/rollouts/from-rollout.ts`. The
 * tenant's index and ledger are fed by `TenantSync`, its quotas applied by `QuotaGate` (§11);
 * hook deliveries are taken by `HookIntake`, and events for webhook endpoints leave through
 * `WebhookOutbox` (§12).
 */
export class Thread extends DurableObject<Env> implements ThreadRpc {
  readonly #parts: StorageParts;
  readonly #events: EventLog;
  readonly #queue: TurnQueue;
  readonly #idempotency: IdempotencyKeys;
  readonly #keyed: KeyedRequests;
  readonly #alarms: AlarmSchedule;
  readonly #tasks: TaskControl;
  readonly #upkeep: Upkeep;
  readonly #sync: TenantSync;
  readonly #quotas: QuotaGate;
  readonly #creation: ThreadCreation;
  readonly #edits: HistoryEdits;
  readonly #intake: HookIntake;
  readonly #outbox: WebhookOutbox;
  readonly #idle: IdleCompaction;
  #live: LiveThread | undefined;
  #loading: Promise<LiveThread | undefined> | undefined;
  /** A delete is under way: no flush, checkpoint or queued turn starts, and no loan is made. */
  #deleting = false;
  /** Fork sources being answered: a delete waits for them, so none lends a deleted segment. */
  readonly #lending = new Set<Promise<unknown>>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrateThread(ctx.storage.sql);
    this.#alarms = new AlarmSchedule(ctx.storage, systemClock);
    this.#sync = TenantSync.ofObject(ctx, env, systemClock, this.#alarms, {
      snapshot: async () => {
        const live = await this.#thread();
        return live ? this.#resource(live) : null;
      },
      tenantGone: async () => {
        await this.deleteThread();
      },
      deliveries: {
        pending: () => this.#intake.pending(),
        acknowledged: (entries) => this.#intake.acknowledged(entries),
      },
      subscriptions: (subscriptions, at) => this.#outbox.learn(subscriptions, at),
    });
    this.#parts = {
      ...storagePartsOf(ctx, env, requireBucketIn(env, this.#sync.policy.jurisdiction)),
      serverTools: threadServerTools(env, this.#sync),
      admitMore: (reserve) => this.#quotas.steerStart(reserve)?.then((answer) => answer.ok),
    };
    const { meta, sql, storage } = this.#parts;
    this.#quotas = new QuotaGate(this.#sync, sql, {
      clock: systemClock,
      spent: () => {
        const totals = this.#live?.ledger.totals();
        return totals ? totals.input_tokens + totals.output_tokens : 0;
      },
      running: () => this.#tasks.running !== undefined,
      later: (ms, fn) => {
        const timer = setTimeout(fn, ms);
        return () => clearTimeout(timer);
      },
    });
    this.#outbox = WebhookOutbox.ofObject(ctx, this.#alarms, this.#sync);
    this.#events = new EventLog(sql, systemClock);
    this.#queue = new TurnQueue(sql);
    this.#idempotency = new IdempotencyKeys(sql, systemClock);
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
      afterTask: async (ended) => {
        await this.#upkeep.scheduleFlush();
        const live = this.#live;
        if (live) await this.#idle.taskEnded(live, ended);
      },
      quotas: this.#quotas,
      taskChanged: () => this.#sync.kick(),
    });
    this.#idle = new IdleCompaction({
      meta,
      alarms: this.#alarms,
      clock: systemClock,
      queue: this.#queue,
      running: () => this.#tasks.running,
      tenantDefault: () => this.#sync.policy.threadDefaults?.idle_compaction ?? null,
      compact: (live) => this.#tasks.startCompaction(live, "idle"),
    });
    this.#upkeep = new Upkeep({
      ...common,
      clock: systemClock,
      idempotency: this.#idempotency,
      loaded: () => this.#live,
      taskRunning: () => this.#tasks.running !== undefined,
      drainQueue: () => this.#tasks.drainQueue(),
      idleCompaction: (live) => this.#idle.run(live),
    });
    this.#keyed = new KeyedRequests(
      this.#idempotency,
      () => this.#events.lastSeq,
      (turnId) =>
        this.#tasks.running?.turnId === turnId ||
        meta.turn(turnId) !== undefined ||
        this.#queue.has(turnId),
    );
    this.#creation = new ThreadCreation({
      parts: this.#parts,
      keyed: this.#keyed,
      tasks: this.#tasks,
      sync: this.#sync,
      thread: () => this.#thread(),
      resource: (live) => this.#resource(live),
      adopt: (live) => this.#adopt(live),
      place: (policy) => this.#place(policy),
      created: (requestId) => this.#outbox.record("thread.created", {}, requestId),
      name: threadNameOf(ctx),
    });
    this.#edits = new HistoryEdits({
      parts: this.#parts,
      keyed: this.#keyed,
      tasks: this.#tasks,
      events: this.#events,
      quotas: this.#quotas,
      resource: (live) => this.#resource(live),
      adopt: (live) => this.#adopt(live),
    });
    this.#intake = new HookIntake({
      ...common,
      sql,
      storage,
      clock: systemClock,
      tasks: this.#tasks,
      queue: this.#queue,
      quotas: this.#quotas,
      create: (req, trace) => this.#creation.create(req, trace),
      place: (policy) => this.#place(policy),
      learn: (subscriptions, at) => this.#outbox.learn(subscriptions, at),
      changed: () => this.#sync.kick(),
    });
    // In the step that stores a turn's end: its delivery's outcome, then its events.
    meta.onTurnEnded = (row) =>
      this.#outbox.turnEnded(row, this.#intake.turnEnded(row), this.#tasks.requestIdOf(row.id));
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
        // A push a crash cut short is found stale and made again.
        if (live) this.#sync.kick();
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

  /**
   * The boundary of every keyed request on an existing thread (`#withThread`): the tenant's policy
   * it carried kept, then a retry answered by `retry`, a first request carried out by `first`.
   */
  #withKeyed<T>(
    req: { policy?: TenantPolicy; idempotency?: IdempotencyKey },
    retry: (
      live: LiveThread,
      earlier: IdempotencyRecord,
    ) => Promise<RpcResult<T>> | RpcResult<T> | undefined,
    first: (live: LiveThread) => Promise<RpcResult<T>> | RpcResult<T>,
  ): Promise<RpcResult<T>> {
    return this.#withThread((live) => {
      this.#place(req.policy);
      return this.#keyed.answer(req.idempotency, {
        retry: (earlier) => retry(live, earlier),
        first: () => first(live),
      });
    });
  }

  /**
   * Makes `live` the thread of this instance, schedules the flush of what it wrote and tells the
   * tenant's index.
   */
  async #adopt(live: LiveThread): Promise<ThreadResource> {
    this.#live = live;
    await this.#upkeep.scheduleFlush();
    this.#sync.kick(true);
    return this.#resource(live);
  }

  /**
   * Keeps the tenant's policy a request carried; the first one also picks the bucket of the
   * tenant's jurisdiction (an object created for a thread has none before).
   */
  #place(policy: TenantPolicy | undefined): void {
    if (policy === undefined) return;
    this.#sync.place(policy);
    if (this.#live === undefined) {
      this.#parts.bucket = requireBucketIn(this.env, policy.jurisdiction);
    }
  }

  #resource(live: LiveThread): ThreadResource {
    return threadResource(live, this.#tasks.running !== undefined);
  }

  // --- Threads ----------------------------------------------------------------------------------

  createThread(req: CreateThreadRequest, trace?: Trace): Promise<RpcResult<ThreadResource>> {
    return this.#creation.create(req, trace);
  }

  getThread(): Promise<RpcResult<ThreadResource>> {
    return this.#withThread((live) => ok(this.#resource(live)));
  }

  deleteThread(trace?: Trace): Promise<RpcResult<null>> {
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
        await Promise.allSettled(this.#lending);
        await this.ctx.blockConcurrencyWhile(async () => {
          await deleteThreadState(this.ctx.storage, this.#parts.bucket, this.#alarms, live);
          this.#queue.reset();
          this.#intake.reset();
          this.#outbox.reset();
          // The tombstone's push ends the tenant's hold.
          this.#quotas.reset();
          this.#live = undefined;
          this.#outbox.record("thread.deleted", {}, trace?.requestId);
        });
      } finally {
        this.#deleting = false;
      }
      // The tenant's index drops it (retried by the alarm if this push fails).
      this.#sync.kick(true);
      return ok(null);
    });
  }

  async yieldQuota(grant: number): Promise<RpcResult<YieldedQuota>> {
    return ok(this.#quotas.yieldQuota(grant));
  }

  // --- Turns ------------------------------------------------------------------------------------

  startTurn(req: StartTurnRequest, trace?: Trace): Promise<RpcResult<TurnResource>> {
    return this.#withKeyed(req, this.#retriedTurn, async (live) => {
      const full = this.#quotas.inputRefused();
      if (full) return full;
      const turnId = this.#tasks.turnIdFor(req);
      const admitted = await this.#keyed.keyed(req.idempotency, turnId, () =>
        this.#tasks.acceptTurn(live, req, turnId, trace?.requestId),
      );
      if (!admitted.ok) return admitted;
      const { task, queued } = admitted.value;
      return ok(task ? await task.done : queuedTurnResource(live.meta.id, queued));
    });
  }

  streamTurn(req: StartTurnRequest, trace?: Trace): Promise<RpcResult<EventStream>> {
    const retry = (_: LiveThread, earlier: IdempotencyRecord) =>
      earlier.turnId ? this.#replayedStream(earlier) : undefined;
    return this.#withKeyed(req, retry, async (live) => {
      const full = this.#quotas.inputRefused();
      if (full) return full;
      const turnId = this.#tasks.turnIdFor(req);
      // Subscribe first, so the stream holds every event of the turn from its start.
      const stream = this.#events.subscribe(this.#events.lastSeq, turnId);
      const admitted = await this.#keyed.keyed(req.idempotency, turnId, () =>
        this.#tasks.acceptTurn(live, req, turnId, trace?.requestId),
      );
      if (!admitted.ok) {
        await stream.cancel().catch(() => undefined);
        return admitted;
      }
      return ok(stream);
    });
  }

  /** A retried turn request's answer: its turn, once it has ended or paused (none: start it). */
  #retriedTurn = (live: LiveThread, earlier: IdempotencyRecord) =>
    earlier.turnId ? this.#awaitedTurn(live, earlier.turnId) : undefined;

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

  keyedTurn(key: IdempotencyKey): Promise<RpcResult<string | null>> {
    return this.#withThread(() => {
      const earlier = this.#keyed.earlier(key);
      return earlier.ok ? ok(earlier.value?.turnId ?? null) : earlier;
    });
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

  submitOutputs(
    turnId: string,
    req: SubmitOutputsRequest,
    trace?: Trace,
  ): Promise<RpcResult<TurnResource>> {
    const retry = (live: LiveThread) => this.#awaitedTurn(live, turnId);
    return this.#withKeyed(req, retry, async (live) => {
      const resumed = await this.#resume(live, turnId, req, trace);
      return resumed.ok ? ok(await resumed.value.done) : resumed;
    });
  }

  streamOutputs(
    turnId: string,
    req: SubmitOutputsRequest,
    trace?: Trace,
  ): Promise<RpcResult<EventStream>> {
    const retry = (_: LiveThread, earlier: IdempotencyRecord) => this.#replayedStream(earlier);
    return this.#withKeyed(req, retry, async (live) => {
      const stream = this.#events.subscribe(this.#events.lastSeq, turnId);
      const resumed = await this.#resume(live, turnId, req, trace);
      if (!resumed.ok) stream.cancel().catch(() => undefined);
      return resumed.ok ? ok(stream) : resumed;
    });
  }

  /** Resumes the paused turn with the request's outputs; its key is recorded as the task starts. */
  #resume(live: LiveThread, turnId: string, req: SubmitOutputsRequest, trace: Trace | undefined) {
    const record = () => this.#keyed.record(req.idempotency, turnId);
    return this.#tasks.resume(live, turnId, req.items, record, trace?.requestId);
  }

  steer(turnId: string, req: SteerRequest): Promise<RpcResult<TurnResource>> {
    const retry = (live: LiveThread) => this.#turn(live, turnId);
    return this.#withKeyed(req, retry, (live) =>
      this.#tasks.steer(live, turnId, req.content, (join) =>
        this.#keyed.recorded(req.idempotency, turnId, join),
      ),
    );
  }

  interrupt(turnId: string, trace?: Trace): Promise<RpcResult<TurnResource>> {
    return this.#withThread((live) =>
      this.#tasks.interrupt(live, turnId, () => this.#upkeep.scheduleFlush(), trace?.requestId),
    );
  }

  // --- Thread operations ------------------------------------------------------------------------

  rollback(req: RollbackRequest): Promise<RpcResult<ThreadResource>> {
    return this.#withThread((live) => this.#edits.rollback(live, req));
  }

  compact(req: CompactRequest, trace?: Trace): Promise<RpcResult<TurnResource>> {
    return this.#withKeyed(req, this.#retriedTurn, async (live) => {
      const admitted = await this.#tasks.startCompaction(
        live,
        "manual",
        (turnId, start) => this.#keyed.keyed(req.idempotency, turnId, start),
        trace?.requestId,
      );
      return admitted.ok ? ok(await admitted.value.done) : admitted;
    });
  }

  inject(req: InjectRequest): Promise<RpcResult<ThreadResource>> {
    return this.#withThread((live) => {
      this.#place(req.policy);
      return this.#edits.inject(live, req);
    });
  }

  exportRollout(req: ExportRequest): Promise<RpcResult<RolloutExport>> {
    return this.#withThread((live) => exportedRollout(live, req.allowIncomplete));
  }

  forkSource(req: ForkSourceRequest): Promise<RpcResult<ForkSource>> {
    return this.#withThread((live) => {
      // A thread being deleted lends nothing: its fork copies.
      const { borrower: _, ...withoutLoan } = req;
      const answer = rolloutPrefix(
        live,
        this.#deleting ? withoutLoan : req,
        this.#tasks.running?.currentId,
      );
      this.#lending.add(answer);
      return answer.finally(() => this.#lending.delete(answer));
    });
  }

  createFromRollout(
    req: CreateFromRolloutRequest,
    trace?: Trace,
  ): Promise<RpcResult<ThreadResource>> {
    return this.#creation.createFromRollout(req, trace);
  }

  listHistory(req: ListHistoryRequest): Promise<RpcResult<ListResource<ResponseItem>>> {
    return this.#withThread((live) => historyPage(live, req));
  }

  listTurns(req: ListTurnsRequest): Promise<RpcResult<ListResource<TurnSummary>>> {
    return this.#withThread((live) => turnPage(live, req));
  }

  turnRequests(turnId: string): Promise<RpcResult<TurnRequestsResource>> {
    return this.#withThread(async (live) => {
      const row = this.#parts.meta.turn(turnId);
      if (row === undefined) return fail("turn_not_found", `No turn "${turnId}" in this thread.`);
      return ok(await turnRequestsResource(live, row));
    });
  }

  getPrompt(): Promise<RpcResult<Prompt>> {
    return this.#withThread(async (live) => {
      const serverTools = await live.session.captureServerTools();
      return ok(live.session.previewPrompt(serverTools));
    });
  }

  restore(req: RestoreRequest): Promise<RpcResult<ThreadResource>> {
    return this.#creation.restore(req);
  }

  patchThread(req: PatchThreadBody): Promise<RpcResult<ThreadResource>> {
    return this.#withThread((live) => this.#edits.patchMetadata(live, req));
  }

  // --- Hooks ------------------------------------------------------------------------------------

  acceptDelivery(req: AcceptDeliveryRequest, trace?: Trace): Promise<RpcResult<AcceptedDelivery>> {
    return this.#intake.accept(req, trace);
  }

  // --- Alarm ------------------------------------------------------------------------------------

  /**
   * Flushes, checkpoints and prunes, then starts a queued turn left waiting; pushes to the
   * tenant's object what it has not acknowledged, and hands the outbox to it.
   */
  override async alarm(): Promise<void> {
    this.#alarms.fired();
    await this.#upkeep.run();
    await this.#sync.repair();
    await this.#outbox.repair();
    this.#intake.prune();
  }
}
