import { Webhook } from "standardwebhooks";
import { vi } from "vitest";
import type { WebhookMessage } from "../../../shared/api/index.ts";
import { WEBHOOK_EVENT_TYPES } from "../../../shared/webhooks/index.ts";
import { api, json } from "./api.ts";
import { RECEIVER_URL, type Received } from "./receiver.ts";

/** The workerd suites' view of outbound webhooks: endpoints, their records, verified events. */

export interface Endpoint {
  object: "webhook_endpoint";
  id: string;
  url: string;
  events: string[];
  description: string | null;
  disabled: boolean;
  disabled_reason: string | null;
  created_at: string;
  secret_rotated_at: string | null;
  secret?: string;
}

export interface Attempt {
  at: string;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  next_retry_at: string | null;
}

export interface Delivery {
  id: string;
  endpoint_id: string;
  type: string;
  thread_id: string | null;
  turn_id: string | null;
  status: string;
  created_at: string;
  attempts: Attempt[];
}

export interface Event {
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
}

/** A new endpoint of the key's tenant, at a fresh path of the receiver. */
export async function createEndpoint(key: string, body: Record<string, unknown> = {}) {
  return json<Endpoint & { secret: string }>(
    await api(
      "POST",
      "/v1/webhook-endpoints",
      { url: `${RECEIVER_URL}/${crypto.randomUUID()}`, events: [...WEBHOOK_EVENT_TYPES], ...body },
      key,
    ),
    201,
  );
}

/** Verified with the `standardwebhooks` package, as any receiver would. */
export function verified(secret: string, request: Received): Event {
  return new Webhook(secret).verify(request.body, {
    "webhook-id": request.id,
    "webhook-timestamp": request.timestamp,
    "webhook-signature": request.signature,
  }) as Event;
}

export async function deliveriesOf(key: string, endpointId: string): Promise<Delivery[]> {
  return (
    await json<{ data: Delivery[] }>(
      await api("GET", `/v1/webhook-endpoints/${endpointId}/deliveries?limit=100`, undefined, key),
    )
  ).data;
}

/** Waits until the endpoint's record shows `done`. */
export async function until(key: string, endpointId: string, done: (d: Delivery[]) => boolean) {
  let deliveries: Delivery[] = [];
  await vi.waitUntil(
    async () => {
      deliveries = await deliveriesOf(key, endpointId);
      return done(deliveries);
    },
    { timeout: 10_000, interval: 50 },
  );
  return deliveries;
}

/** Creates a thread of the key's tenant. */
export const thread =
  (key: string) =>
  async (id: string, body: Record<string, unknown> = {}) =>
    json(await api("POST", "/v1/threads", { id, ...body }, key), 201);

/** Runs a turn on a thread of the key's tenant. */
export const turn = (key: string) => async (id: string, input: string) =>
  json<{ id: string; status: string; pending_calls: { call_id: string; name: string }[] }>(
    await api("POST", `/v1/threads/${id}/turns`, { input }, key),
  );

/** A queue message of a delivery's first hand-off, for a batch a test gives the consumer. */
export function queueMessage(
  tenant: string,
  endpointId: string,
  webhookId: string,
): WebhookMessage {
  return {
    tenant,
    jurisdiction: null,
    endpointId,
    webhookId,
    type: "turn.completed",
    threadId: "t1",
    turnId: "turn_1",
    createdAt: new Date().toISOString(),
    payload: "{}",
    handoff: 1,
  };
}
