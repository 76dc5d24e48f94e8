/**
 * What the suites of the `Tenant` object's webhook stores share: a fresh tenant object's SQLite
 * with a clock the test moves, hook bodies, log entries, attempts, events and leased endpoints.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { migrate } from "../../../durable-objects/common/migrations.ts";
import { sqlOf } from "../../../durable-objects/common/sql.ts";
import { EndpointStore } from "../../../durable-objects/tenant/endpoints.ts";
import { TENANT_MIGRATIONS } from "../../../durable-objects/tenant/schema.ts";
import { DeliveryLeases } from "../../../durable-objects/tenant/webhook-leases.ts";
import type {
  CreateHookBody,
  DeliveryResource,
  RecordedAttempt,
  WebhookAttempt,
  WebhookEvent,
} from "../../../shared/api/index.ts";
import { okValue } from "./results.ts";
import { newTenantId } from "./tenancy.ts";

export const START = Date.UTC(2026, 11, 1, 12);
export const DAY = 24 * 60 * 60_000;
/** The sweep's grace as deployed (an attempt's 15 s twice, and the batch's 1 s). */
export const GRACE = 31_000;

export function withTenantStorage<T>(
  body: (parts: { sql: ReturnType<typeof sqlOf>; clock: { nowMs: () => number; at: number } }) => T,
): Promise<T> {
  return runInDurableObject(env.TENANT.getByName(newTenantId()), (_i, state) => {
    migrate(state.storage.sql, TENANT_MIGRATIONS);
    const clock = { at: START, nowMs: () => clock.at };
    return body({ sql: sqlOf(state.storage.sql), clock });
  });
}

export const hookBody = (id?: string): CreateHookBody & { verify: { secret: string } } => ({
  ...(id ? { id } : {}),
  verify: { scheme: "github", secret: "s-1" },
  thread: "gh-{{body.issue.number}}",
  on_busy: "queue",
});

export function entry(hookId: string, id: string, receivedAt: number, turnStatus: string | null) {
  return {
    object: "delivery",
    id,
    hook_id: hookId,
    thread_id: "t",
    status: "accepted",
    delivery_id: `d-${id}`,
    event: "push",
    received_at: new Date(receivedAt).toISOString(),
    duplicate_of: null,
    turn_id: "turn_1",
    turn_status: turnStatus,
    error: null,
  } as DeliveryResource;
}

export const attempt = (
  status: number | null,
  error: string | null,
  nextRetryAt: number | null = null,
): WebhookAttempt => ({
  at: new Date(START).toISOString(),
  status_code: status,
  error,
  duration_ms: 3,
  next_retry_at: nextRetryAt === null ? null : new Date(nextRetryAt).toISOString(),
});

export function recorded(
  endpointId: string,
  webhookId: string,
  status: RecordedAttempt["status"],
  tried: WebhookAttempt | null,
  gone = false,
  handoff = 1,
): RecordedAttempt {
  return {
    message: {
      endpointId,
      webhookId,
      type: "turn.completed",
      threadId: "t",
      turnId: "turn_1",
      createdAt: new Date(START).toISOString(),
      handoff,
    },
    attempt: tried,
    status,
    ...(gone ? { gone } : {}),
  };
}

export const event = (endpointId: string, webhookId: string): WebhookEvent => ({
  tenant: "acme",
  jurisdiction: null,
  endpointId,
  webhookId,
  type: "turn.completed",
  threadId: "t",
  turnId: "turn_1",
  createdAt: new Date(START).toISOString(),
  payload: `{"id":"${webhookId}"}`,
});

/** A fresh tenant's endpoint store and leases, with one endpoint. */
export function leased(sql: ReturnType<typeof sqlOf>, clock: { nowMs: () => number }) {
  const leases = new DeliveryLeases(sql, clock, GRACE);
  const endpoints = new EndpointStore(sql, clock, leases);
  const { id } = okValue(
    endpoints.create({
      url: "https://e.test/",
      events: ["turn.completed"],
      description: null,
      secret: "whsec_e",
    }),
  );
  const statuses = () =>
    endpoints.deliveries(id, { limit: 10 })?.data.map((d) => [d.id, d.status, d.attempts.length]);
  return { leases, endpoints, id, statuses };
}
