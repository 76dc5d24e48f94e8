/**
 * The consumer of the webhook queue (design §12, §15 invariant 12): each message is one event
 * for one endpoint, sent by the tenant's object (a thread's event, the test event, or one the
 * tenant's sweep sent again). It is signed per Standard Webhooks (a fresh `webhook-timestamp` on
 * each attempt, the same `webhook-id`), posted with a 15 s timeout and redirects not followed, and
 * on failure retried through the queue on the schedule 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h
 * (`msg.retry({delaySeconds})`, by the attempts the delivery had), then recorded as failed. An
 * event the tenant already shows delivered (the queue delivered its message twice) and a message
 * of a hand-off the sweep superseded are dropped unsent.
 *
 * One receiver that hangs holds back no other: a batch's attempts run at once, each bounded by the
 * timeout, and each is recorded in the tenant's object and acked (or retried) as soon as it ends,
 * the attempts that end while a record is in flight going together in the next (one call for the
 * endpoints per tenant per batch, then at most one record in flight). Messages the dead-letter
 * queue receives (a consumer that kept failing) are recorded as failed.
 */
import { tenantStubIn } from "../durable-objects/index.ts";
import type { Env } from "../env.ts";
import type { RecordedAttempt, WebhookMessage, WebhookTargetState } from "../shared/api/index.ts";
import { describeError } from "../shared/observability/index.ts";
import { outboundUrlRefusal } from "../shared/outbound/index.ts";
import { deliveryTimeoutMs, retryDelaySeconds, signStandard } from "../shared/webhooks/index.ts";
import { edgeLog } from "./observability.ts";
import { outboundPolicy } from "./outbound-policy.ts";

/** The dead-letter queue's name ends so; its messages are past every retry. */
export const DEAD_LETTER_SUFFIX = "-dlq";
/** How long before a message whose recording failed is tried again. */
const RECORD_RETRY_S = 10;

const USER_AGENT = "Spindle-Webhooks/1";

type Outcome =
  | { ack: true; record?: RecordedAttempt }
  | { ack: false; delaySeconds: number; record?: RecordedAttempt };

export async function consumeWebhooks(batch: MessageBatch, env: Env): Promise<void> {
  const dead = batch.queue.endsWith(DEAD_LETTER_SUFFIX);
  const groups = new Map<string, Message<WebhookMessage>[]>();
  for (const message of batch.messages as readonly Message<WebhookMessage>[]) {
    const key = `${message.body.jurisdiction ?? "g"}:${message.body.tenant}`;
    groups.set(key, [...(groups.get(key) ?? []), message]);
  }
  await Promise.all([...groups.values()].map((messages) => consumeTenant(messages, env, dead)));
}

/**
 * One tenant's messages of a batch: one call for their endpoints, then each attempt recorded and
 * its message acked or retried as it ends.
 */
async function consumeTenant(
  messages: readonly Message<WebhookMessage>[],
  env: Env,
  dead: boolean,
): Promise<void> {
  const first = messages[0]?.body;
  if (!first) return;
  const tenant = tenantStubIn(env, first.jurisdiction, first.tenant);
  const log = edgeLog.with({ tenant: first.tenant, jurisdiction: first.jurisdiction });
  let targets: WebhookTargetState[];
  try {
    const answer = await tenant.webhookTargets(
      messages.map(({ body }) => ({
        webhookId: body.webhookId,
        endpointId: body.endpointId,
        handoff: body.handoff,
      })),
    );
    if (!answer.ok) throw new Error(`${answer.error.code}: ${answer.error.detail}`);
    targets = answer.value;
  } catch (err) {
    log.warn("webhook.targets_failed", { count: messages.length, error: describeError(err) });
    for (const message of messages) message.retry({ delaySeconds: RECORD_RETRY_S });
    return;
  }
  const record = coalesced(async (records: RecordedAttempt[]) => {
    try {
      const recorded = await tenant.recordWebhookAttempts(records);
      if (!recorded.ok) throw new Error(`${recorded.error.code}: ${recorded.error.detail}`);
    } catch (err) {
      log.warn("webhook.record_failed", { count: records.length, error: describeError(err) });
      throw err;
    }
  });
  await Promise.all(
    messages.map(async (message, i) => {
      const target = targets[i];
      const outcome: Outcome = !target
        ? { ack: false, delaySeconds: RECORD_RETRY_S }
        : dead
          ? deadLetter(message, target)
          : await attempt(message, target, env);
      if (outcome.record) {
        logAttempt(message, outcome.record);
        try {
          await record(outcome.record);
        } catch {
          // Unrecorded: tried again (a repeat of a delivered event may reach the receiver twice,
          // with the same webhook-id).
          message.retry({ delaySeconds: RECORD_RETRY_S });
          return;
        }
      }
      if (outcome.ack) message.ack();
      else message.retry({ delaySeconds: outcome.delaySeconds });
    }),
  );
}

/**
 * `flush` as a batching call: an item waits for the flush in flight to end, then goes with every
 * item that came meanwhile; each call answers when its own flush does.
 */
function coalesced<T>(flush: (items: T[]) => Promise<void>): (item: T) => Promise<void> {
  let waiting: T[] = [];
  let next: Promise<void> | undefined;
  let last: Promise<unknown> = Promise.resolve();
  return (item) => {
    waiting.push(item);
    if (next === undefined) {
      next = last.then(() => {
        const items = waiting;
        waiting = [];
        next = undefined;
        return flush(items);
      });
      last = next.catch(() => {});
    }
    return next;
  };
}

/** A message as its delivery record keeps it: without its tenant, jurisdiction and payload. */
export function recordOf(
  body: WebhookMessage,
  status: RecordedAttempt["status"],
  attemptOf: RecordedAttempt["attempt"],
  gone = false,
): RecordedAttempt {
  const { tenant: _t, jurisdiction: _j, payload: _p, ...message } = body;
  return { message, attempt: attemptOf, status, ...(gone ? { gone } : {}) };
}

/**
 * An attempt's log line (or a dead letter's): the request whose work caused the event, the event,
 * and how the receiver answered; never its URL or the payload.
 */
function logAttempt(message: Message<WebhookMessage>, record: RecordedAttempt): void {
  const { body } = message;
  const fields = {
    request_id: body.requestId,
    tenant: body.tenant,
    thread: body.threadId ?? undefined,
    turn: body.turnId ?? undefined,
    endpoint: body.endpointId,
    webhook_id: body.webhookId,
    event_type: body.type,
    attempt: message.attempts,
    status: record.status,
    status_code: record.attempt?.status_code ?? null,
    error_code: record.attempt?.error ?? null,
    duration_ms: record.attempt?.duration_ms,
  };
  if (record.status === "delivered") edgeLog.info("webhook.attempt", fields);
  else edgeLog.warn("webhook.attempt", fields);
}

/** A message past every retry: failed, unless it was delivered after all. */
function deadLetter(message: Message<WebhookMessage>, target: WebhookTargetState): Outcome {
  if (target.delivered || target.superseded || target.endpoint === null) return { ack: true };
  const at = new Date().toISOString();
  const failed = { at, status_code: null, error: "exhausted", duration_ms: 0, next_retry_at: null };
  return { ack: true, record: recordOf(message.body, "failed", failed) };
}

/** One attempt to deliver `message`, and what follows it. */
async function attempt(
  message: Message<WebhookMessage>,
  target: WebhookTargetState,
  env: Env,
): Promise<Outcome> {
  const { body } = message;
  const { endpoint } = target;
  if (endpoint === null || target.delivered || target.superseded) return { ack: true };
  const started = Date.now();
  const at = new Date(started).toISOString();
  const refused = endpoint.disabled
    ? "disabled"
    : outboundUrlRefusal(endpoint.url, outboundPolicy(env)) && "url_refused";
  if (refused) {
    const skipped = { at, status_code: null, error: refused, duration_ms: 0, next_retry_at: null };
    return { ack: true, record: recordOf(body, "failed", skipped) };
  }
  const { statusCode, error } = await post(endpoint.url, endpoint.secrets, body, env);
  const durationMs = Date.now() - started;
  const result = { at, status_code: statusCode, error, duration_ms: durationMs };
  if (error === null) {
    return { ack: true, record: recordOf(body, "delivered", { ...result, next_retry_at: null }) };
  }
  // 410 Gone: the receiver asks for no more (Standard Webhooks): the endpoint is disabled.
  const gone = statusCode === 410;
  // A message the sweep sent again starts the queue's count anew: the delivery's attempts go on.
  const attempts = Math.max(message.attempts, target.attempts + 1);
  const delay = gone ? undefined : retryDelaySeconds(attempts, retryScale(env));
  if (delay === undefined) {
    return {
      ack: true,
      record: recordOf(body, "failed", { ...result, next_retry_at: null }, gone),
    };
  }
  const next = new Date(Date.now() + delay * 1000).toISOString();
  return {
    ack: false,
    delaySeconds: delay,
    record: recordOf(body, "pending", { ...result, next_retry_at: next }),
  };
}

/** Posts the signed event: the status code, and an error unless it was a 2xx. */
async function post(
  url: string,
  secrets: readonly string[],
  body: WebhookMessage,
  env: Env,
): Promise<{ statusCode: number | null; error: string | null }> {
  const timestamp = new Date();
  try {
    const res = await fetch(url, {
      method: "POST",
      redirect: "manual",
      headers: {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": body.webhookId,
        "webhook-timestamp": String(Math.floor(timestamp.getTime() / 1000)),
        "webhook-signature": signStandard(secrets, body.webhookId, timestamp, body.payload),
      },
      body: body.payload,
      signal: AbortSignal.timeout(deliveryTimeoutMs(env.SPINDLE_WEBHOOK_TIMEOUT_MS)),
    });
    // The answer's body is not read: only its status counts.
    await res.body?.cancel().catch(() => {});
    if (res.status >= 200 && res.status < 300) return { statusCode: res.status, error: null };
    const error = res.status >= 300 && res.status < 400 ? "redirect" : `http_${res.status}`;
    return { statusCode: res.status, error };
  } catch (err) {
    const timedOut = err instanceof Error && err.name === "TimeoutError";
    return { statusCode: null, error: timedOut ? "timeout" : "network" };
  }
}

function retryScale(env: Env): number {
  const raw = env.SPINDLE_WEBHOOK_RETRY_SCALE?.trim();
  const scale = Number(raw);
  return raw !== undefined && raw !== "" && Number.isFinite(scale) && scale >= 0 ? scale : 1;
}
