import type { WebhookEvent, WebhookMessage } from "../../shared/api/index.ts";
import type { Clock } from "../../shared/ports/index.ts";
import { retryDelayMs } from "../common/alarms.ts";
import type { Sql } from "../common/sql.ts";

interface LeaseRow extends Record<string, SqlStorageValue> {
  id: string;
  handoff: number;
  message: string;
}

/** How an attempt's message stands against its delivery's lease. */
export type LeaseStanding = "current" | "superseded" | "untracked";

/**
 * The deliveries of a tenant's events still under way (design §12), in `tenant_webhook_leases`:
 * for each `webhook-id` neither delivered nor failed yet, its message (to send it again), which
 * hand-off to the queue is current, and until when that hand-off is in flight. A queue message
 * can go missing (a local runtime killed with its in-memory queue loses them all), so a lease that
 * runs out with no attempt under way means its message is lost or hopelessly late, and the sweep (`tenant/webhook-sweep.ts`) sends it again as the next hand-off. A message of an
 * earlier hand-off is superseded: the consumer drops it, so a delivery never has two streams of
 * attempts.
 *
 * Each lease lasts `graceMs` past what it waits for: an attempt's start (a new hand-off, an
 * attempt begun), or the retry a failed attempt asked for.
 */
export class DeliveryLeases {
  readonly #sql: Sql;
  readonly #clock: Clock;
  readonly #graceMs: number;

  constructor(sql: Sql, clock: Clock, graceMs: number) {
    this.#sql = sql;
    this.#clock = clock;
    this.#graceMs = graceMs;
  }

  /** Leases new deliveries to their first hand-off; answers their queue messages. */
  add(events: readonly WebhookEvent[]): WebhookMessage[] {
    const until = this.#clock.nowMs() + this.#graceMs;
    return events.map((event) => {
      this
        .#sql`INSERT INTO tenant_webhook_leases (id, endpoint_id, handoff, in_flight_until, message)
        VALUES (${event.webhookId}, ${event.endpointId}, 1, ${until}, ${JSON.stringify(event)})`;
      return { ...event, handoff: 1 };
    });
  }

  #handoff(webhookId: string): number | undefined {
    return this.#sql<{ handoff: number }>`
      SELECT handoff FROM tenant_webhook_leases WHERE id = ${webhookId}`.toArray()[0]?.handoff;
  }

  /** Where `handoff` of the delivery stands: the current one, an earlier one, or one untracked. */
  standing(webhookId: string, handoff: number): LeaseStanding {
    const current = this.#handoff(webhookId);
    if (current === undefined) return "untracked";
    return current === handoff ? "current" : "superseded";
  }

  /** An attempt of the current hand-off begins: in flight for the grace from now. */
  attempting(webhookId: string): void {
    this.#extend(webhookId, this.#clock.nowMs());
  }

  /** The current hand-off's attempt failed and asked for a retry at `retryAtMs`. */
  retrying(webhookId: string, retryAtMs: number): void {
    this.#extend(webhookId, retryAtMs);
  }

  #extend(webhookId: string, fromMs: number): void {
    this.#sql`UPDATE tenant_webhook_leases SET in_flight_until = ${fromMs + this.#graceMs}
      WHERE id = ${webhookId}`;
  }

  /** The delivery ended (delivered or failed): nothing more to send. */
  end(webhookId: string): void {
    this.#sql`DELETE FROM tenant_webhook_leases WHERE id = ${webhookId}`;
  }

  /** An endpoint went: its deliveries with it. */
  endEndpoint(endpointId: string): void {
    this.#sql`DELETE FROM tenant_webhook_leases WHERE endpoint_id = ${endpointId}`;
  }

  /**
   * Up to `limit` deliveries whose lease ran out, oldest first, each made its next hand-off: in
   * flight for the grace plus a backoff that grows with its hand-offs (2 s, 4 s, … 5 min), so a
   * queue that keeps losing them is not flooded. Answers the messages to send.
   */
  takeExpired(limit: number): WebhookMessage[] {
    const now = this.#clock.nowMs();
    const rows = this.#sql<LeaseRow>`SELECT id, handoff, message FROM tenant_webhook_leases
      WHERE in_flight_until <= ${now} ORDER BY in_flight_until LIMIT ${limit}`.toArray();
    return rows.map((row) => {
      const handoff = row.handoff + 1;
      const until = now + this.#graceMs + retryDelayMs(row.handoff);
      this.#sql`UPDATE tenant_webhook_leases SET handoff = ${handoff}, in_flight_until = ${until}
        WHERE id = ${row.id}`;
      return { ...(JSON.parse(row.message) as WebhookEvent), handoff };
    });
  }

  /** When the next lease runs out (epoch ms); null when no delivery is under way. */
  nextExpiry(): number | null {
    return (
      this.#sql<{ at: number | null }>`
        SELECT MIN(in_flight_until) AS at FROM tenant_webhook_leases`.one().at ?? null
    );
  }
}
