import type {
  AcceptDeliveryRequest,
  AcceptedDelivery,
  CreateThreadRequest,
  DeliveryEntry,
  DeliveryResource,
  RpcResult,
  TenantPolicy,
  ThreadResource,
  Trace,
  WebhookSubscriptions,
} from "../../../shared/api/index.ts";
import type { Clock } from "../../../shared/ports/index.ts";
import { DEDUP_WINDOW_MS } from "../../../shared/webhooks/index.ts";
import type { AlarmSchedule } from "../../common/alarms.ts";
import { fail, guarded, ok, THREAD_NOT_FOUND } from "../../common/results.ts";
import type { LiveThread } from "../live-thread.ts";
import type { QuotaGate } from "../quotas/quota-gate.ts";
import type { TurnRow } from "../storage/meta-store.ts";
import type { Sql } from "../storage/sql.ts";
import { newTurnId, type TaskControl } from "../tasks/task-control.ts";
import type { TurnQueue } from "../tasks/turn-queue.ts";
import { DELIVERY_PUSH_BATCH } from "../tenancy/tenant-sync.ts";
import { FLUSH_DELAY_MS } from "../upkeep.ts";

const FINAL_STATUSES: ReadonlySet<string> = new Set(["completed", "failed", "interrupted"]);

export interface HookIntakeDeps {
  sql: Sql;
  storage: Pick<DurableObjectStorage, "transactionSync">;
  clock: Clock;
  tasks: TaskControl;
  queue: TurnQueue;
  quotas: QuotaGate;
  alarms: AlarmSchedule;
  /** The thread, loaded if need be; undefined when there is none. */
  load: () => Promise<LiveThread | undefined>;
  create: (req: CreateThreadRequest, trace?: Trace) => Promise<RpcResult<ThreadResource>>;
  /** Keeps the tenant's policy the delivery carried. */
  place: (policy: TenantPolicy | undefined) => void;
  /** The tenant's endpoint subscriptions, as the delivery's hook lookup found them. */
  learn: (subscriptions: WebhookSubscriptions, atMs: number) => void;
  /** The log changed: the tenant's object hears of it with the next push. */
  changed: () => void;
  waitUntil: (work: Promise<unknown>) => void;
}

interface DeliveryRow extends Record<string, SqlStorageValue> {
  body: string;
  rev: number;
}

/**
 * The thread's side of inbound hooks (design §12, §15 invariant 11). A verified delivery is
 * recorded with its turn queued in one synchronous step (`spindle_deliveries` and the durable
 * turn queue), so once the edge answers 202 the turn runs exactly once: now, or from the alarm
 * of a new instance if this one goes away first. A delivery id seen within 72 hours is a
 * duplicate and starts nothing. Each entry is the hook's log entry for it; it changes as the
 * turn ends, and the thread's pushes carry each change to the tenant (`pending` and
 * `acknowledged`), coalesced with the index updates and repaired the same way.
 */
export class HookIntake {
  readonly #deps: HookIntakeDeps;
  /** Turns of accepted deliveries that have not ended, read once per instance. */
  #awaiting: Set<string> | undefined;

  constructor(deps: HookIntakeDeps) {
    this.#deps = deps;
  }

  accept(req: AcceptDeliveryRequest, trace?: Trace): Promise<RpcResult<AcceptedDelivery>> {
    const { tasks, quotas, queue } = this.#deps;
    return guarded<AcceptedDelivery>(async () => {
      this.#deps.place(req.policy);
      if (req.webhooks) this.#deps.learn(req.webhooks.subscriptions, req.webhooks.at);
      // A duplicate is known before the thread is loaded (or, deleted since, created again).
      const before = this.#duplicate(req);
      if (before) return before;
      const live = await this.#existing(req, trace);
      if (!live.ok) return live;
      // From here to the answer's record, one synchronous step: no request can come between.
      const first = this.#duplicate(req);
      if (first) return first;
      const full = quotas.inputRefused();
      if (full) return full;
      const running = tasks.running;
      if (running && req.onBusy === "reject") {
        return fail("thread_busy", `Turn ${running.currentId} is running.`);
      }
      const turnId = newTurnId();
      const delivery: DeliveryResource = {
        ...req.delivery,
        status: "accepted",
        duplicate_of: null,
        turn_id: turnId,
        turn_status: "in_progress",
        error: null,
      };
      this.#deps.storage.transactionSync(() => {
        this.#insert(delivery, req.dedupKey, false);
        queue.push({ turnId, content: req.content, requestId: trace?.requestId });
      });
      this.#awaitingTurns().add(turnId);
      // An alarm soon, so a queue left behind by an eviction still drains.
      await this.#deps.alarms.within(FLUSH_DELAY_MS);
      if (running && req.onBusy === "interrupt") {
        running.controller.abort(new Error("interrupted by a hook delivery"));
      }
      this.#deps.waitUntil(tasks.drainQueue());
      this.#deps.changed();
      return ok({ delivery, duplicate: false });
    });
  }

  /** A redelivery within the window: logged as a duplicate, answered with the first delivery. */
  #duplicate(req: AcceptDeliveryRequest): RpcResult<AcceptedDelivery> | undefined {
    const first = this.#accepted(req.delivery.hook_id, req.dedupKey, this.#deps.clock.nowMs());
    if (!first) return undefined;
    const duplicate: DeliveryResource = {
      ...first,
      id: req.delivery.id,
      status: "duplicate",
      duplicate_of: first.id,
      received_at: req.delivery.received_at,
    };
    this.#insert(duplicate, req.dedupKey, true);
    this.#deps.changed();
    return ok({ delivery: first, duplicate: true });
  }

  /** The thread, created from the hook's `thread_config` when there is none yet. */
  async #existing(req: AcceptDeliveryRequest, trace?: Trace): Promise<RpcResult<LiveThread>> {
    const live = await this.#deps.load();
    if (live) return ok(live);
    const { metadata, ...config } = req.threadConfig ?? {};
    const created = await this.#deps.create(
      {
        tenant: req.tenant,
        threadId: req.delivery.thread_id,
        config,
        ...(metadata === undefined ? {} : { metadata }),
        ...(req.policy === undefined ? {} : { policy: req.policy }),
      },
      trace,
    );
    // Another delivery created it meanwhile: this one joins it.
    if (!created.ok && created.error.code !== "thread_exists") return created;
    const now = await this.#deps.load();
    return now ? ok(now) : THREAD_NOT_FOUND;
  }

  /** The accepted delivery of this dedup key within the dedup window, as it stands. */
  #accepted(hookId: string, dedupKey: string, nowMs: number): DeliveryResource | undefined {
    const row = this.#deliveryRow(
      (sql) => sql<DeliveryRow>`SELECT body, rev FROM spindle_deliveries
        WHERE hook_id = ${hookId} AND delivery_id = ${dedupKey} AND status = 'accepted'
          AND received_at >= ${nowMs - DEDUP_WINDOW_MS}
        LIMIT 1`,
    );
    return row && (JSON.parse(row.body) as DeliveryResource);
  }

  /** The first row `query` finds, or undefined (also while no delivery created the table). */
  #deliveryRow(query: (sql: Sql) => SqlStorageCursor<DeliveryRow>): DeliveryRow | undefined {
    const sql = this.#deps.sql;
    return sql.tables.ifExists("spindle_deliveries", undefined, () => query(sql).toArray()[0]);
  }

  /** A log entry; its `delivery_id` column holds the hook's dedup key. */
  #insert(delivery: DeliveryResource, dedupKey: string, final: boolean): void {
    const sql = this.#deps.sql;
    sql.tables.ensuring("spindle_deliveries", () => {
      sql`INSERT INTO spindle_deliveries
        (id, hook_id, delivery_id, status, received_at, turn_id, final, rev, body)
        VALUES (${delivery.id}, ${delivery.hook_id}, ${dedupKey},
          ${delivery.status}, ${Date.parse(delivery.received_at)}, ${delivery.turn_id},
          ${final ? 1 : 0}, 1, ${JSON.stringify(delivery)})`;
    });
  }

  #awaitingTurns(): Set<string> {
    const sql = this.#deps.sql;
    this.#awaiting ??= new Set(
      sql.tables.ifExists("spindle_deliveries", [], () =>
        sql<{ turn_id: string }>`SELECT turn_id FROM spindle_deliveries
          WHERE status = 'accepted' AND final = 0 AND turn_id IS NOT NULL`
          .toArray()
          .map((row) => row.turn_id),
      ),
    );
    return this.#awaiting;
  }

  /**
   * A turn ended or paused (in the step that stored its row): the delivery that started it, if
   * any, takes its status and error. Answers that delivery as it is now.
   */
  turnEnded(row: TurnRow): DeliveryResource | undefined {
    const awaiting = this.#awaitingTurns();
    if (!awaiting.has(row.id)) return undefined;
    const stored = this.#deliveryRow(
      (sql) => sql<DeliveryRow>`SELECT body, rev FROM spindle_deliveries
        WHERE turn_id = ${row.id} AND status = 'accepted'`,
    );
    if (!stored) {
      awaiting.delete(row.id);
      return undefined;
    }
    const final = FINAL_STATUSES.has(row.status);
    const delivery: DeliveryResource = {
      ...(JSON.parse(stored.body) as DeliveryResource),
      turn_status: row.status,
      error: row.error,
    };
    this.#deps.sql`UPDATE spindle_deliveries SET body = ${JSON.stringify(delivery)},
      final = ${final ? 1 : 0}, rev = rev + 1 WHERE id = ${delivery.id}`;
    if (final) awaiting.delete(row.id);
    this.#deps.changed();
    return delivery;
  }

  /** Log entries the tenant has not acknowledged, oldest first. */
  pending(): DeliveryEntry[] {
    const sql = this.#deps.sql;
    return sql.tables.ifExists("spindle_deliveries", [], () =>
      sql<DeliveryRow>`SELECT body, rev FROM spindle_deliveries
        WHERE pushed_rev < rev ORDER BY received_at LIMIT ${DELIVERY_PUSH_BATCH}`
        .toArray()
        .map((row) => ({ delivery: JSON.parse(row.body) as DeliveryResource, rev: row.rev })),
    );
  }

  /** The tenant took these entries: each is done unless it changed since. */
  acknowledged(entries: readonly DeliveryEntry[]): void {
    const sql = this.#deps.sql;
    sql.tables.ifExists("spindle_deliveries", undefined, () => {
      for (const { delivery, rev } of entries) {
        sql`UPDATE spindle_deliveries SET pushed_rev = ${rev}
          WHERE id = ${delivery.id} AND pushed_rev < ${rev}`;
      }
    });
  }

  /** Drops entries past the dedup window that the tenant has. */
  prune(): void {
    const cutoff = this.#deps.clock.nowMs() - DEDUP_WINDOW_MS;
    const sql = this.#deps.sql;
    sql.tables.ifExists("spindle_deliveries", undefined, () => {
      sql`DELETE FROM spindle_deliveries WHERE received_at < ${cutoff} AND pushed_rev = rev`;
    });
  }

  /** Forgets what it read (the storage was wiped by a delete). */
  reset(): void {
    this.#awaiting = undefined;
  }
}
