import type { Env } from "../../env.ts";
import type { WebhookEvent, WebhookMessage } from "../../shared/api/index.ts";
import { utf8ByteLength } from "../../shared/context-manager/index.ts";
import { describeError } from "../../shared/observability/index.ts";
import type { Clock } from "../../shared/ports/index.ts";
import { deliveryTimeoutMs } from "../../shared/webhooks/index.ts";
import type { AlarmSchedule } from "../common/alarms.ts";
import { objectLog } from "../common/log.ts";
import type { EndpointStore } from "./endpoints.ts";
import type { DeliveryLeases } from "./webhook-leases.ts";

/** How long a message may wait for its consumer batch (`max_batch_timeout` in wrangler.toml). */
export const QUEUE_BATCH_WAIT_MS = 1_000;
/** Deliveries sent again per run of the sweep; more wait for the next run, at once. */
export const SWEEP_BATCH = 100;
/** The queue takes at most 100 messages and 256 KB (incl. ~100 B of metadata each) per send. */
const SEND_MAX_MESSAGES = 100;
const SEND_MAX_BYTES = 256_000;
const MESSAGE_OVERHEAD_BYTES = 100;

/**
 * How long past what a lease waits for (an attempt's start, a retry's time) a delivery is left to
 * its message before the sweep sends it again: the message's wait for its batch, then the
 * attempt's bound twice (the attempt, and its record after it). 31 s as deployed.
 */
export function sweepGraceMs(env: Pick<Env, "SPINDLE_WEBHOOK_TIMEOUT_MS">): number {
  return QUEUE_BATCH_WAIT_MS + 2 * deliveryTimeoutMs(env.SPINDLE_WEBHOOK_TIMEOUT_MS);
}

export interface WebhookSweepDeps {
  endpoints: EndpointStore;
  leases: DeliveryLeases;
  queue: Queue;
  alarms: AlarmSchedule;
  clock: Clock;
}

/**
 * The tenant's side of the webhook queue (design §12, §15 invariant 12). The tenant's delivery
 * record is the durable truth of an event once its thread hands it over: it is recorded pending
 * and leased (`tenant/webhook-leases.ts`) before it is sent to the queue, and the object's alarm (shared
 * with the tenant's deletion) sends again, with the same `webhook-id`, each delivery whose lease
 * ran out with no attempt in flight: its message was lost (a local runtime killed with its
 * in-memory queue loses every message in it) or is hopelessly late. Each run sends at most
 * `SWEEP_BATCH`; a send that fails is left to a later run, when its lease runs out again.
 */
export class WebhookSweep {
  readonly #deps: WebhookSweepDeps;

  constructor(deps: WebhookSweepDeps) {
    this.#deps = deps;
  }

  /** A thread's events: recorded (those new), the alarm kept due for their leases, then sent. */
  async enqueue(events: readonly WebhookEvent[]): Promise<void> {
    const messages = this.#deps.endpoints.accept(events);
    if (messages.length === 0) return;
    await this.#schedule();
    await this.#send(messages);
  }

  /** The alarm's duty: sends again what the queue lost, and stays due for the next lease. */
  async run(): Promise<void> {
    const messages = this.#deps.leases.takeExpired(SWEEP_BATCH);
    if (messages.length > 0) {
      // No attempt took them in time: the queue lost them, or is far behind.
      objectLog.warn("webhook.resent", { tenant: messages[0]?.tenant, count: messages.length });
      await this.#send(messages);
    }
    await this.#schedule();
  }

  /** Keeps the alarm due when the earliest lease runs out (one already due sooner stays). */
  async #schedule(): Promise<void> {
    const next = this.#deps.leases.nextExpiry();
    // The lease's own time, not a delay from now: a second reading of the clock would move it.
    if (next !== null) await this.#deps.alarms.by(next);
  }

  /** Sends in batches the queue takes; a failure is logged: the leases bring them back. */
  async #send(messages: readonly WebhookMessage[]): Promise<void> {
    try {
      for (const batch of sendBatches(messages)) {
        await this.#deps.queue.sendBatch(batch.map((body) => ({ body })));
      }
    } catch (err) {
      // Their leases bring them back: the sweep sends them again.
      objectLog.warn("webhook.queue_refused", {
        tenant: messages[0]?.tenant,
        count: messages.length,
        error: describeError(err),
      });
    }
  }
}

/** `messages` split into sends of at most 100 messages and 256 KB. */
function sendBatches(messages: readonly WebhookMessage[]): WebhookMessage[][] {
  const batches: WebhookMessage[][] = [];
  let batch: WebhookMessage[] = [];
  let bytes = 0;
  for (const message of messages) {
    const size = utf8ByteLength(JSON.stringify(message)) + MESSAGE_OVERHEAD_BYTES;
    const full = batch.length === SEND_MAX_MESSAGES || bytes + size > SEND_MAX_BYTES;
    if (full && batch.length > 0) {
      batches.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(message);
    bytes += size;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}
