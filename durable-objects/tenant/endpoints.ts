import type {
  CreateEndpointRequest,
  EndpointResource,
  ListQuery,
  ListResource,
  PatchEndpointBody,
  RecordedAttempt,
  RpcResult,
  WebhookDelivery,
  WebhookEvent,
  WebhookMessage,
  WebhookSubscriptions,
  WebhookTargetRequest,
  WebhookTargetState,
} from "../../shared/api/index.ts";
import type { Clock } from "../../shared/ports/index.ts";
import { tablePage } from "../common/cursor.ts";
import { ok } from "../common/results.ts";
import type { Sql } from "../common/sql.ts";
import { refusedByLimit } from "./limits.ts";
import { randomId } from "./random-ids.ts";
import { liveSecrets, rotated, type SecretColumns } from "./rotating-secrets.ts";
import type { DeliveryLeases } from "./webhook-leases.ts";

/** Each event's delivery record (status and attempts) is kept this long. */
export const WEBHOOK_DELIVERY_RETENTION_MS = 7 * 24 * 60 * 60_000;
/** A delivery keeps at most this many attempts (the newest; a schedule makes 8). */
export const MAX_RECORDED_ATTEMPTS = 50;

interface EndpointRow extends SecretColumns, Record<string, SqlStorageValue> {
  id: string;
  created_at: string;
  body: string;
}

interface DeliveryRow extends Record<string, SqlStorageValue> {
  id: string;
  created_at: string;
  status: string;
  body: string;
}

/**
 * A tenant's outbound webhook endpoints and the record of each event sent to them (design §12),
 * in the tenant's object: the `whsec_` secret (kept: signing needs it; shown once), the previous
 * one for 24 hours after a rotation, and per `webhook-id` its status and every attempt. The
 * subscriptions (which enabled endpoint wants which events) are what threads record events by;
 * they are kept in memory between changes, since every push of every thread is answered with
 * them. A delivery under way also holds a lease (`tenant/webhook-leases.ts`), which the attempts move.
 */
export class EndpointStore {
  readonly #sql: Sql;
  readonly #clock: Clock;
  readonly #leases: DeliveryLeases;
  #subscriptions: WebhookSubscriptions | undefined;

  constructor(sql: Sql, clock: Clock, leases: DeliveryLeases) {
    this.#sql = sql;
    this.#clock = clock;
    this.#leases = leases;
  }

  /** The new endpoint; `limit_exceeded` when the tenant holds `webhook_endpoints_per_tenant`. */
  create(req: CreateEndpointRequest): RpcResult<EndpointResource> {
    const refused = refusedByLimit(this.#sql, "webhook_endpoints_per_tenant");
    if (refused) return refused;
    const endpoint: EndpointResource = {
      object: "webhook_endpoint",
      id: randomId("we"),
      url: req.url,
      events: req.events,
      description: req.description,
      disabled: false,
      disabled_reason: null,
      created_at: new Date(this.#clock.nowMs()).toISOString(),
      secret_rotated_at: null,
    };
    this.#sql`INSERT INTO tenant_endpoints (id, created_at, body, secret)
      VALUES (${endpoint.id}, ${endpoint.created_at}, ${JSON.stringify(endpoint)}, ${req.secret})`;
    this.#subscriptions = undefined;
    return ok(endpoint);
  }

  #row(id: string): EndpointRow | undefined {
    return this.#sql<EndpointRow>`SELECT * FROM tenant_endpoints WHERE id = ${id}`.toArray()[0];
  }

  get(id: string): EndpointResource | undefined {
    const row = this.#row(id);
    return row && (JSON.parse(row.body) as EndpointResource);
  }

  list(query: ListQuery): ListResource<EndpointResource> | undefined {
    return tablePage<EndpointRow, EndpointResource>(
      this.#sql,
      { table: "tenant_endpoints", time: "created_at" },
      query,
      (row) => JSON.parse(row.body) as EndpointResource,
    );
  }

  #put(endpoint: EndpointResource): void {
    this.#sql`UPDATE tenant_endpoints SET body = ${JSON.stringify(endpoint)}
      WHERE id = ${endpoint.id}`;
    this.#subscriptions = undefined;
  }

  /** The endpoint after the patch (`url` already checked); undefined when there is none. */
  patch(id: string, patch: PatchEndpointBody): EndpointResource | undefined {
    const current = this.get(id);
    if (!current) return undefined;
    const next: EndpointResource = {
      ...current,
      ...(patch.url === undefined ? {} : { url: patch.url }),
      ...(patch.events === undefined ? {} : { events: patch.events }),
      ...(patch.description === undefined ? {} : { description: patch.description }),
      ...(patch.disabled === undefined
        ? {}
        : { disabled: patch.disabled, disabled_reason: patch.disabled ? ("api" as const) : null }),
    };
    this.#put(next);
    return next;
  }

  /** False when there is no such endpoint. Its delivery records go with it. */
  delete(id: string): boolean {
    const deleted = this.#sql`DELETE FROM tenant_endpoints WHERE id = ${id}`.rowsWritten > 0;
    if (deleted) {
      this.#sql`DELETE FROM tenant_webhook_deliveries WHERE endpoint_id = ${id}`;
      this.#leases.endEndpoint(id);
    }
    this.#subscriptions = undefined;
    return deleted;
  }

  rotate(id: string, secret: string): EndpointResource | undefined {
    const row = this.#row(id);
    if (!row) return undefined;
    const now = this.#clock.nowMs();
    const next = rotated(row, secret, now);
    const endpoint: EndpointResource = {
      ...(JSON.parse(row.body) as EndpointResource),
      secret_rotated_at: new Date(now).toISOString(),
    };
    this.#sql`UPDATE tenant_endpoints SET body = ${JSON.stringify(endpoint)},
      secret = ${next.secret}, previous_secret = ${next.previous_secret},
      previous_until = ${next.previous_until} WHERE id = ${id}`;
    return endpoint;
  }

  /** Which enabled endpoint wants which events. */
  subscriptions(): WebhookSubscriptions {
    this.#subscriptions ??= {
      endpoints: this.#sql<{ body: string }>`SELECT body FROM tenant_endpoints ORDER BY id`
        .toArray()
        .map((row) => JSON.parse(row.body) as EndpointResource)
        .filter((endpoint) => !endpoint.disabled)
        .map(({ id, events }) => ({ id, events })),
    };
    return this.#subscriptions;
  }

  /**
   * New deliveries, recorded pending with no attempt and leased to their first hand-off; answers
   * their queue messages. One already recorded (a hand-off repeated) or for an endpoint that no
   * longer exists is left out.
   */
  accept(events: readonly WebhookEvent[]): WebhookMessage[] {
    const endpoints = new Map<string, boolean>();
    const fresh = events.filter((event) => {
      if (!endpoints.has(event.endpointId)) {
        endpoints.set(event.endpointId, this.#row(event.endpointId) !== undefined);
      }
      return endpoints.get(event.endpointId) && this.#delivery(event.webhookId) === undefined;
    });
    for (const event of fresh) {
      const delivery: WebhookDelivery = {
        object: "webhook_delivery",
        id: event.webhookId,
        endpoint_id: event.endpointId,
        type: event.type,
        thread_id: event.threadId,
        turn_id: event.turnId,
        status: "pending",
        created_at: event.createdAt,
        attempts: [],
      };
      this.#putDelivery(delivery);
    }
    return this.#leases.add(fresh);
  }

  /**
   * For each delivery the consumer is about to attempt: where it goes and with which secrets,
   * whether it was delivered, whether a later hand-off superseded its message, and how many
   * attempts it had. The current hand-off's lease runs from now: its attempt is under way.
   */
  targets(deliveries: readonly WebhookTargetRequest[]): WebhookTargetState[] {
    const now = this.#clock.nowMs();
    // A batch's messages are mostly for a few endpoints: each is read once.
    const targets = new Map<string, WebhookTargetState["endpoint"]>();
    const targetOf = (endpointId: string): WebhookTargetState["endpoint"] => {
      if (!targets.has(endpointId)) {
        const row = this.#row(endpointId);
        const endpoint = row && (JSON.parse(row.body) as EndpointResource);
        targets.set(
          endpointId,
          row && endpoint
            ? {
                url: endpoint.url,
                secrets: liveSecrets(row, now).secrets,
                disabled: endpoint.disabled,
              }
            : null,
        );
      }
      return targets.get(endpointId) ?? null;
    };
    return deliveries.map(({ webhookId, endpointId, handoff }) => {
      const delivery = this.#delivery(webhookId);
      const delivered = delivery?.status === "delivered";
      const superseded = this.#leases.standing(webhookId, handoff) === "superseded";
      if (!delivered && !superseded) this.#leases.attempting(webhookId);
      return {
        webhookId,
        endpoint: targetOf(endpointId),
        delivered,
        superseded,
        attempts: delivery?.attempts.length ?? 0,
      };
    });
  }

  #delivery(webhookId: string): WebhookDelivery | undefined {
    const row = this.#sql<DeliveryRow>`
      SELECT * FROM tenant_webhook_deliveries WHERE id = ${webhookId}`.toArray()[0];
    return row && (JSON.parse(row.body) as WebhookDelivery);
  }

  #putDelivery(delivery: WebhookDelivery): void {
    this.#sql`INSERT INTO tenant_webhook_deliveries (id, endpoint_id, created_at, status, body)
      VALUES (${delivery.id}, ${delivery.endpoint_id}, ${delivery.created_at}, ${delivery.status},
        ${JSON.stringify(delivery)})
      ON CONFLICT (id) DO UPDATE SET status = excluded.status, body = excluded.body`;
  }

  /**
   * Records attempts and the statuses they leave. A delivered event stays delivered (a copy of
   * its message that the queue delivered twice may fail later); an attempt of a superseded
   * hand-off is listed but moves nothing else, unless it delivered; a 410 disables the endpoint.
   * A delivery that ended drops its lease; one retried is in flight until its retry is due.
   * Records of endpoints that no longer exist are dropped.
   */
  record(attempts: readonly RecordedAttempt[]): void {
    const now = this.#clock.nowMs();
    const cutoff = new Date(now - WEBHOOK_DELIVERY_RETENTION_MS).toISOString();
    const pruned = new Set<string>();
    const endpoints = new Map<string, EndpointResource | undefined>();
    for (const { message, attempt, status, gone } of attempts) {
      if (!endpoints.has(message.endpointId)) {
        endpoints.set(message.endpointId, this.get(message.endpointId));
      }
      const endpoint = endpoints.get(message.endpointId);
      if (!endpoint) continue;
      const before = this.#delivery(message.webhookId);
      const standing = this.#leases.standing(message.webhookId, message.handoff);
      const delivery: WebhookDelivery = {
        object: "webhook_delivery",
        id: message.webhookId,
        endpoint_id: message.endpointId,
        type: message.type,
        thread_id: message.threadId,
        turn_id: message.turnId,
        status:
          before?.status === "delivered" || status === "delivered"
            ? "delivered"
            : standing === "superseded"
              ? (before?.status ?? status)
              : status,
        created_at: message.createdAt,
        attempts: [...(before?.attempts ?? []), ...(attempt ? [attempt] : [])].slice(
          -MAX_RECORDED_ATTEMPTS,
        ),
      };
      this.#putDelivery(delivery);
      if (delivery.status !== "pending") this.#leases.end(delivery.id);
      else if (standing === "current" && attempt?.next_retry_at) {
        this.#leases.retrying(delivery.id, Date.parse(attempt.next_retry_at));
      }
      if (gone && !endpoint.disabled) {
        const disabled: EndpointResource = { ...endpoint, disabled: true, disabled_reason: "gone" };
        this.#put(disabled);
        endpoints.set(endpoint.id, disabled);
      }
      if (pruned.has(endpoint.id)) continue;
      pruned.add(endpoint.id);
      this.#sql`DELETE FROM tenant_webhook_deliveries
        WHERE endpoint_id = ${endpoint.id} AND created_at < ${cutoff}`;
    }
  }

  /** An endpoint's deliveries, newest first; undefined for a cursor this store did not make. */
  deliveries(endpointId: string, query: ListQuery): ListResource<WebhookDelivery> | undefined {
    return tablePage<DeliveryRow, WebhookDelivery>(
      this.#sql,
      {
        table: "tenant_webhook_deliveries",
        time: "created_at",
        scope: "endpoint_id",
        value: endpointId,
        newestFirst: true,
      },
      query,
      (row) => JSON.parse(row.body) as WebhookDelivery,
    );
  }
}
