import type {
  DeliveryResource,
  Jurisdiction,
  TenantRpc,
  WebhookEvent,
  WebhookSubscriptions,
} from "../../../shared/api/index.ts";
import { describeError } from "../../../shared/observability/index.ts";
import type { Clock } from "../../../shared/ports/index.ts";
import { uuidv7 } from "../../../shared/uuid/index.ts";
import {
  eventPayload,
  type WebhookEventData,
  type WebhookEventType,
} from "../../../shared/webhooks/index.ts";
import type { AlarmSchedule } from "../../common/alarms.ts";
import { systemClock } from "../../common/clock.ts";
import { objectLog } from "../../common/log.ts";
import { threadNameOf } from "../../common/placement.ts";
import type { TurnRow } from "../storage/meta-store.ts";
import { type Sql, sqlOf } from "../storage/sql.ts";
import { RetryCount, SyncValues } from "../tenancy/sync-values.ts";
import type { TenantSync } from "../tenancy/tenant-sync.ts";

/**
 * How long the endpoint subscriptions a thread learned are taken as they are: the bound on how
 * late a thread applies an endpoint created, changed or deleted. Every push of the thread (about
 * one a second while it runs turns) and every hook delivery refreshes them; an event due with
 * older ones is written unresolved and resolved against the tenant's current subscriptions when
 * it is handed off (one call to the tenant's object, off the turn's path).
 */
export const SUBSCRIPTIONS_TTL_MS = 10_000;
/** Rows per hand-off. */
export const HANDOFF_BATCH = 100;

interface Known {
  subscriptions: WebhookSubscriptions;
  at: number;
}

/** An outbox row's body: the event without its routing (tenant, endpoint, id). */
type RowBody = Omit<WebhookEvent, "tenant" | "jurisdiction" | "endpointId" | "webhookId">;

interface OutboxRow extends Record<string, SqlStorageValue> {
  id: string;
  endpoint_id: string | null;
  body: string;
}

export interface WebhookOutboxDeps {
  sql: Sql;
  storage: Pick<DurableObjectStorage, "transactionSync">;
  clock: Clock;
  alarms: AlarmSchedule;
  /** The object's tenant and thread (undefined for an unnamed object: it records nothing). */
  name: { tenant: string; incarnation: string | null; threadId: string } | undefined;
  jurisdiction: () => Jurisdiction;
  tenant: () => TenantRpc | undefined;
  waitUntil: (work: Promise<unknown>) => void;
}

/**
 * The thread's outbound events (design §12, §15 invariants 12 and 14). An event is written to
 * `spindle_outbox` in the synchronous step that stores what it reports (a turn's row after its
 * last line, the thread's first lines, its deletion), one row per subscribed endpoint, so an
 * event exists exactly when its line does and an eviction right after loses none. Rows are then
 * handed to the tenant's object off the turn's path (which records each delivery, sends it to the
 * webhook queue, and sends it again if the queue loses it: `tenant/webhook-sweep.ts`) and deleted once
 * it has them; a hand-off that failed, or that an instance lost, is made again by the alarm.
 *
 * A tenant without endpoints costs a turn nothing here: the thread knows its tenant's
 * subscriptions (answered with each push, at most `SUBSCRIPTIONS_TTL_MS` old) and writes no row
 * for an event no endpoint wants.
 */
export class WebhookOutbox {
  readonly #deps: WebhookOutboxDeps;
  readonly #values: SyncValues;
  readonly #handoffFailures: RetryCount;
  #known: Known | undefined;
  /** Rows not handed off, counted once per instance (undefined: not counted yet). */
  #rows: number | undefined;
  #inFlight: Promise<void> | undefined;
  #again = false;

  constructor(deps: WebhookOutboxDeps) {
    this.#deps = deps;
    this.#values = new SyncValues(deps.sql);
    this.#handoffFailures = new RetryCount(this.#values, "outbox_attempts");
  }

  /** The outbox of a Thread object: its tenant and placement are its sync's. */
  static ofObject(ctx: DurableObjectState, alarms: AlarmSchedule, sync: TenantSync): WebhookOutbox {
    return new WebhookOutbox({
      sql: sqlOf(ctx.storage.sql),
      storage: ctx.storage,
      clock: systemClock,
      alarms,
      name: threadNameOf(ctx),
      jurisdiction: () => sync.policy.jurisdiction,
      tenant: () => sync.tenant(),
      waitUntil: (work) => ctx.waitUntil(work),
    });
  }

  /** Keeps the tenant's subscriptions as of `atMs`; stored when they changed. */
  learn(subscriptions: WebhookSubscriptions, atMs: number): void {
    const known = this.#knownNow();
    if (known !== undefined && known.at > atMs) return;
    const changed = JSON.stringify(known?.subscriptions) !== JSON.stringify(subscriptions);
    this.#known = { subscriptions, at: atMs };
    // Stored so a new instance starts from them; not at every refresh of an unchanged set.
    if (changed || known === undefined || atMs - known.at > SUBSCRIPTIONS_TTL_MS / 2) {
      this.#values.put("webhooks", this.#known);
    }
  }

  #knownNow(): Known | undefined {
    this.#known ??= this.#values.get<Known>("webhooks");
    return this.#known;
  }

  /** The endpoints that want `type`, or undefined when the subscriptions are too old to say. */
  #targets(type: string): string[] | undefined {
    const known = this.#knownNow();
    if (known === undefined || this.#deps.clock.nowMs() - known.at > SUBSCRIPTIONS_TTL_MS) {
      return undefined;
    }
    return known.subscriptions.endpoints
      .filter((endpoint) => endpoint.events.includes(type as WebhookEventType))
      .map((endpoint) => endpoint.id);
  }

  /**
   * Records a turn's event as its row is stored: `hook.failed` too for a delivery's failure;
   * `requestId` is the edge request whose work ended it.
   */
  turnEnded(row: TurnRow, delivery: DeliveryResource | undefined, requestId?: string): void {
    const type =
      row.kind === "compaction" && row.status === "completed"
        ? "thread.compacted"
        : (`turn.${row.status}` as WebhookEventType);
    const data = {
      turn_id: row.id,
      status: row.status,
      usage: row.usage,
      ...(row.status === "requires_action"
        ? { pending_calls: row.pending_calls.map(({ call_id, name }) => ({ call_id, name })) }
        : {}),
      ...(row.status === "requires_action" && row.pending_approvals?.length
        ? { pending_approvals: row.pending_approvals }
        : {}),
      ...(row.error ? { error: row.error } : {}),
      ...(row.kind === "compaction" && row.trigger ? { trigger: row.trigger } : {}),
    };
    this.record(type, data, requestId);
    if (delivery && row.status === "failed") {
      const failed = { ...data, hook_id: delivery.hook_id, delivery_id: delivery.id };
      this.record("hook.failed", failed, requestId);
    }
  }

  /**
   * Writes `type`'s event for each endpoint that wants it (nothing when none does), in the
   * caller's synchronous step, then hands it off in the background. `requestId`: the edge
   * request that caused it, which its queue message carries for the consumer's log lines.
   */
  record(
    type: WebhookEventType,
    data: Partial<Omit<WebhookEventData, "thread_id" | "sequence">> = {},
    requestId?: string,
  ): void {
    const name = this.#deps.name;
    if (name === undefined) return;
    const targets = this.#targets(type);
    if (targets?.length === 0) return;
    const sequence = (this.#values.get<number>("webhook_sequence") ?? 0) + 1;
    this.#values.put("webhook_sequence", sequence);
    const now = this.#deps.clock.nowMs();
    const createdAt = new Date(now).toISOString();
    const body: RowBody = {
      type,
      threadId: name.threadId,
      turnId: data.turn_id ?? null,
      createdAt,
      payload: eventPayload(type, createdAt, {
        thread_id: name.threadId,
        turn_id: null,
        status: null,
        usage: null,
        ...data,
        sequence,
      }),
      ...(requestId === undefined ? {} : { requestId }),
    };
    const text = JSON.stringify(body);
    const before = this.#count();
    const sql = this.#deps.sql;
    sql.tables.ensuring("spindle_outbox", () => {
      for (const endpoint of targets ?? [null]) {
        sql`INSERT INTO spindle_outbox (id, endpoint_id, created_at, body)
          VALUES (${newWebhookId()}, ${endpoint}, ${now}, ${text})`;
      }
    });
    this.#rows = before + (targets?.length ?? 1);
    this.handOff();
  }

  #count(): number {
    const sql = this.#deps.sql;
    this.#rows ??= sql.tables.ifExists(
      "spindle_outbox",
      0,
      () => sql<{ n: number }>`SELECT COUNT(*) AS n FROM spindle_outbox`.one().n,
    );
    return this.#rows;
  }

  /** Hands the outbox to the tenant in the background (one hand-off at a time). */
  handOff(): void {
    if (this.#inFlight) {
      this.#again = true;
      return;
    }
    // After the caller's synchronous step (it may be a transaction): nothing is sent before
    // the rows it wrote are committed.
    const run = Promise.resolve()
      .then(() => this.#drain())
      .then(() => {
        this.#inFlight = undefined;
        if (this.#again) {
          this.#again = false;
          this.handOff();
        }
      });
    this.#inFlight = run;
    this.#deps.waitUntil(run);
  }

  /** The alarm's duty: hand off whatever is left. */
  async repair(): Promise<void> {
    await this.#inFlight;
    if (this.#count() > 0) await this.#drain();
  }

  /** Hands off every row, a batch at a time. Never throws: a failure keeps an alarm due. */
  async #drain(): Promise<void> {
    try {
      while (this.#count() > 0) {
        const resolved = await this.#resolve();
        const sent = await this.#sendBatch();
        if (resolved + sent === 0) break;
      }
      this.#handoffFailures.succeeded();
    } catch (err) {
      const { attempts, delayMs } = this.#handoffFailures.failed();
      objectLog.warn("webhook.handoff_failed", {
        tenant: this.#deps.name?.tenant,
        thread: this.#deps.name?.threadId,
        attempt: attempts,
        delay_ms: delayMs,
        error: describeError(err),
      });
      await this.#deps.alarms.within(delayMs);
    }
  }

  /**
   * Rows written without known subscriptions become one row per endpoint that wants them.
   * Answers how many it resolved.
   */
  async #resolve(): Promise<number> {
    const sql = this.#deps.sql;
    const unresolved = sql.tables.ifExists("spindle_outbox", [], () =>
      sql<OutboxRow>`SELECT * FROM spindle_outbox
        WHERE endpoint_id IS NULL LIMIT ${HANDOFF_BATCH}`.toArray(),
    );
    if (unresolved.length === 0) return 0;
    const tenant = this.#deps.tenant();
    if (!tenant) throw new Error("the thread has no tenant to ask for its endpoints");
    const askedAt = this.#deps.clock.nowMs();
    const answer = await tenant.webhookSubscriptions(this.#deps.name?.incarnation ?? null);
    if (!answer.ok) throw new Error(`${answer.error.code}: ${answer.error.detail}`);
    this.learn(answer.value, askedAt);
    let rows = this.#count();
    this.#deps.storage.transactionSync(() => {
      for (const row of unresolved) {
        const { type } = JSON.parse(row.body) as RowBody;
        this.#deps.sql`DELETE FROM spindle_outbox WHERE id = ${row.id}`;
        rows -= 1;
        for (const endpoint of answer.value.endpoints) {
          if (!endpoint.events.includes(type as WebhookEventType)) continue;
          this.#deps.sql`INSERT INTO spindle_outbox (id, endpoint_id, created_at, body)
            VALUES (${newWebhookId()}, ${endpoint.id}, ${askedAt}, ${row.body})`;
          rows += 1;
        }
      }
    });
    this.#rows = rows;
    return unresolved.length;
  }

  /** Hands the oldest rows to the tenant and deletes them; answers how many. */
  async #sendBatch(): Promise<number> {
    const name = this.#deps.name;
    if (name === undefined) return 0;
    const sql = this.#deps.sql;
    const rows = sql.tables.ifExists("spindle_outbox", [], () =>
      sql<OutboxRow>`SELECT * FROM spindle_outbox
        WHERE endpoint_id IS NOT NULL ORDER BY created_at, id LIMIT ${HANDOFF_BATCH}`.toArray(),
    );
    if (rows.length === 0) return 0;
    const tenant = this.#deps.tenant();
    if (!tenant) throw new Error("the thread has no tenant to hand its events to");
    const jurisdiction = this.#deps.jurisdiction();
    const events = rows.map(
      (row): WebhookEvent => ({
        ...(JSON.parse(row.body) as RowBody),
        tenant: name.tenant,
        jurisdiction,
        incarnation: name.incarnation,
        endpointId: row.endpoint_id ?? "",
        webhookId: row.id,
      }),
    );
    const answer = await tenant.enqueueWebhooks(events);
    if (!answer.ok) throw new Error(`${answer.error.code}: ${answer.error.detail}`);
    // A row handed off twice (this instance lost before the delete) is the same webhook-id twice:
    // the tenant takes it once.
    this.#deps.sql`DELETE FROM spindle_outbox
      WHERE id IN (SELECT value FROM json_each(${JSON.stringify(rows.map((row) => row.id))}))`;
    this.#rows = Math.max(0, this.#count() - rows.length);
    return rows.length;
  }

  /** Forgets what it counted (the storage was rewritten by a delete). */
  reset(): void {
    this.#rows = undefined;
    this.#known = undefined;
  }
}

/** A `webhook-id`: one per event and endpoint (no `.`, as Standard Webhooks asks). */
export function newWebhookId(): string {
  return `msg_${uuidv7().replaceAll("-", "")}`;
}
