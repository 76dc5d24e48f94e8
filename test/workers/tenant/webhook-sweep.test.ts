/**
 * Events whose queue messages are lost, and receivers that hang (design §12, §15 invariant 12),
 * through the running service: the tenant's sweep sends again a delivery whose message the queue
 * lost (a local runtime killed with its in-memory queue loses every message in it), with the same
 * `webhook-id`, the schedule going on from the attempts made; a late copy of a message sent
 * again is dropped, so one delivery never has two streams of attempts; the sweep shares the
 * tenant's one alarm with its deletion; and a receiver that hangs holds back no other delivery of
 * its batch, of its tenant or another (`durable-objects/tenant/webhook-sweep.ts`, `tenant/webhook-leases.ts`,
 * `worker/webhook-consumer.ts`).
 */
import {
  createExecutionContext,
  createMessageBatch,
  getQueueResult,
  runInDurableObject,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { sweepGraceMs } from "../../../durable-objects/tenant/webhook-sweep.ts";
import type { Env } from "../../../env.ts";
import type { TenantRpc, WebhookEvent, WebhookMessage } from "../../../shared/api/index.ts";
import { MAX_ATTEMPTS } from "../../../shared/webhooks/index.ts";
import { consumeWebhooks } from "../../../worker/webhook-consumer.ts";
import { api, newThreadId } from "../helpers/api.ts";
import { receiver } from "../helpers/receiver.ts";
import { ADMIN_KEY, tenantWithKey } from "../helpers/tenancy.ts";
import {
  createEndpoint,
  deliveriesOf,
  queueMessage,
  thread,
  turn,
  until,
  verified,
} from "../helpers/webhooks.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

/** The sweep waits out its grace: 3 s with the suites' 1 s attempts (vitest.workers.config.ts). */
const SWEEP_TEST_TIMEOUT_MS = 20_000;

/** A thread of a new tenant whose endpoint wants `turn.completed`, answered by `answer`. */
async function subscribedThread(answer?: Parameters<typeof receiver>[0]) {
  const { key } = await tenantWithKey();
  const endpoint = await createEndpoint(key, { events: ["turn.completed"] });
  const received = receiver(answer);
  const id = newThreadId();
  await thread(key)(id);
  return { key, endpoint, received, id };
}

/**
 * The queue's sends, the first `lose` of them lost: taken (the send resolves) but never
 * delivered.
 */
function losingSends(lose: number) {
  const sends = vi.spyOn(env.WEBHOOKS, "sendBatch");
  for (let i = 0; i < lose; i++) {
    sends.mockImplementationOnce(async () => undefined as unknown as QueueSendBatchResponse);
  }
  const sent = (call: number): WebhookMessage[] =>
    [...(sends.mock.calls[call]?.[0] ?? [])].map((m) => m.body as WebhookMessage);
  return { sends, sent };
}

/** Runs the consumer on `bodies` as one batch that no queue holds: a retry it asks for is lost. */
async function consumeOnce(bodies: WebhookMessage[], vars: Partial<Env> = {}) {
  const batch = createMessageBatch<WebhookMessage>(
    "spindle-webhooks",
    bodies.map((body, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body })),
  );
  const ctx = createExecutionContext();
  await consumeWebhooks(batch, { ...env, ...vars } as unknown as Env);
  return getQueueResult(batch, ctx);
}

describe("the tenant's sweep", { timeout: SWEEP_TEST_TIMEOUT_MS }, () => {
  it("sends again a delivery whose queue message was lost: it arrives once, with its webhook-id", async () => {
    const { key, endpoint, received, id } = await subscribedThread();
    const { sends, sent } = losingSends(1);
    const done = await turn(key)(id, "hello");
    const [delivery] = await until(key, endpoint.id, (d) => d[0]?.status === "delivered");
    expect(sent(0).map((m) => m.webhookId)).toEqual([delivery?.id]);
    expect(sends.mock.calls.length).toBeGreaterThanOrEqual(2);
    expect(received.map((r) => [r.id, verified(endpoint.secret, r).data.turn_id])).toEqual([
      [delivery?.id, done.id],
    ]);
    expect(delivery?.attempts.map((a) => a.status_code)).toEqual([200]);
  });

  it("sends a delivery the queue refused once it takes messages again", async () => {
    const { key, endpoint, received, id } = await subscribedThread();
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const sends = vi
      .spyOn(env.WEBHOOKS, "sendBatch")
      .mockRejectedValueOnce(new Error("the queue is down"));
    const done = await turn(key)(id, "hello");
    const [delivery] = await until(key, endpoint.id, (d) => d[0]?.status === "delivered");
    expect(sends.mock.calls.length).toBeGreaterThanOrEqual(2);
    expect(warn.mock.calls.map(([line]) => JSON.parse(String(line)).event)).toContain(
      "webhook.queue_refused",
    );
    expect(received.map((r) => [r.id, verified(endpoint.secret, r).data.turn_id])).toEqual([
      [delivery?.id, done.id],
    ]);
  });

  it("sends again a delivery whose retry was lost, and the schedule goes on from the attempts made", async () => {
    const { key, endpoint, received, id } = await subscribedThread(() => 503);
    const { sends, sent } = losingSends(1);
    await turn(key)(id, "hello");
    await vi.waitUntil(() => sends.mock.calls.length > 0, { timeout: 5_000 });
    const [message] = sent(0);
    if (!message) throw new Error("nothing was handed to the queue");
    // The first attempt fails; the retry it asks for is lost with the batch.
    const first = await consumeOnce([message]);
    expect(first.retryMessages).toEqual([{ msgId: "m0" }]);
    const [delivery] = await until(key, endpoint.id, (d) => d[0]?.status === "failed");
    // Eight attempts in all, though the message sent again started the queue's count anew.
    expect(delivery?.attempts.map((a) => a.error)).toEqual(Array(MAX_ATTEMPTS).fill("http_503"));
    expect(new Set(received.map((r) => r.id))).toEqual(new Set([message.webhookId]));
    expect(received).toHaveLength(MAX_ATTEMPTS);
  });

  it("drops a late copy of a message it sent again: one stream of attempts per delivery", async () => {
    const { key, endpoint, received, id } = await subscribedThread();
    // The hand-off and the sweep's first send again are both taken and held back, not lost.
    const { sends, sent } = losingSends(2);
    await turn(key)(id, "hello");
    await vi.waitUntil(() => sends.mock.calls.length >= 2, { timeout: 10_000, interval: 50 });
    const [original] = sent(0);
    const [again] = sent(1);
    if (!original || !again) throw new Error("nothing was handed to the queue");
    expect(again.webhookId).toBe(original.webhookId);
    // The original arrives late: dropped unsent, as the sweep's copy owns the delivery now.
    expect(await consumeOnce([original])).toMatchObject({ explicitAcks: ["m0"] });
    expect(received).toEqual([]);
    expect((await deliveriesOf(key, endpoint.id))[0]).toMatchObject({
      id: original.webhookId,
      status: "pending",
      attempts: [],
    });
    expect(await consumeOnce([again])).toMatchObject({ explicitAcks: ["m0"] });
    expect(received.map((r) => r.id)).toEqual([original.webhookId]);
    const [delivery] = await until(key, endpoint.id, (d) => d[0]?.status === "delivered");
    expect(delivery?.attempts.map((a) => a.status_code)).toEqual([200]);
  });
});

describe("the tenant's one alarm", () => {
  it("stays due for the earliest lease, and a deletion brings it forward", async () => {
    const { key, tenant } = await tenantWithKey();
    const endpoint = await createEndpoint(key, { events: ["turn.completed"] });
    losingSends(2);
    const object = env.TENANT.getByName(tenant.id);
    const stub = object as unknown as TenantRpc;
    const alarm = () => runInDurableObject(object, (_i, state) => state.storage.getAlarm());
    const event = (webhookId: string): WebhookEvent => {
      const { handoff: _, ...rest } = queueMessage(tenant.id, endpoint.id, webhookId);
      return rest;
    };
    const before = Date.now();
    expect(await stub.enqueueWebhooks([event("msg_1")])).toEqual({ ok: true, value: null });
    const first = (await alarm()) ?? 0;
    expect(first).toBeGreaterThanOrEqual(before + sweepGraceMs(env));
    // A second delivery a little later: its lease ends later.
    await new Promise((resolve) => setTimeout(resolve, 10));
    await stub.enqueueWebhooks([event("msg_2")]);
    // The later lease leaves the alarm where the earlier one needs it.
    expect(await alarm()).toBe(first);
    expect(
      (await api("DELETE", `/v1/admin/tenants/${tenant.id}`, undefined, ADMIN_KEY)).status,
    ).toBe(202);
    // Due at once (or already run): not left behind the lease's time.
    const deleting = await alarm();
    expect(deleting === null || deleting < first).toBe(true);
    await vi.waitUntil(
      async () =>
        (await api("GET", `/v1/admin/tenants/${tenant.id}`, undefined, ADMIN_KEY)).status === 404,
      { timeout: 5_000, interval: 50 },
    );
  });
});

describe("a receiver that hangs", () => {
  it("holds back no other delivery of its batch: the others are delivered and recorded while it hangs", async () => {
    const a = await tenantWithKey();
    const b = await tenantWithKey();
    const slow = await createEndpoint(a.key);
    const fast = await createEndpoint(a.key);
    const other = await createEndpoint(b.key);
    let release: (status: number) => void = () => {};
    const hanging = new Promise<number>((resolve) => {
      release = resolve;
    });
    const received = receiver((request) => (request.url === slow.url ? hanging : 200));
    // An attempt's bound far above this test's waits: only the release ends the slow one.
    const consumed = consumeOnce(
      [
        queueMessage(a.tenant.id, slow.id, "msg_slow"),
        queueMessage(a.tenant.id, fast.id, "msg_fast"),
        queueMessage(b.tenant.id, other.id, "msg_other"),
      ],
      { SPINDLE_WEBHOOK_TIMEOUT_MS: "600000" },
    );
    await until(a.key, fast.id, (d) => d[0]?.status === "delivered");
    await until(b.key, other.id, (d) => d[0]?.status === "delivered");
    // Still hanging: its request arrived, and its attempt is not over.
    expect(received.map((r) => r.id).sort()).toEqual(["msg_fast", "msg_other", "msg_slow"]);
    expect(await deliveriesOf(a.key, slow.id)).toEqual([]);
    release(200);
    const result = await consumed;
    expect([...result.explicitAcks].sort()).toEqual(["m0", "m1", "m2"]);
    expect((await deliveriesOf(a.key, slow.id))[0]).toMatchObject({ status: "delivered" });
  });
});
