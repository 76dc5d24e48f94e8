/**
 * Outbound webhooks (design §12, §15 invariants 12 and 14) through the running service, with the
 * queue consumer run by miniflare as in production (retries compressed to none by
 * SPINDLE_WEBHOOK_RETRY_SCALE=0, an attempt bounded to 1 s): the endpoint routes, every lifecycle
 * event signed so the `standardwebhooks` package verifies it, retries of a receiver that fails,
 * times out or redirects, 410, exhaustion, the dead-letter queue, rotation, the test event, the
 * outbox surviving the instance, and a tenant without endpoints writing nothing
 * (`durable-objects/thread/webhooks/outbox.ts`, `worker/webhook-consumer.ts`).
 */
import {
  createExecutionContext,
  createMessageBatch,
  getQueueResult,
  runDurableObjectAlarm,
  runInDurableObject,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { sqlOf } from "../../../durable-objects/thread/storage/sql.ts";
import type { Env } from "../../../env.ts";
import type { WebhookMessage } from "../../../shared/api/index.ts";
import { consumeWebhooks } from "../../../worker/webhook-consumer.ts";
import { api, json, newThreadId, post, untilRunning } from "../helpers/api.ts";
import { RECEIVER_URL, type Received, receiver } from "../helpers/receiver.ts";
import { tenantWithKey, threadObjectOf } from "../helpers/tenancy.ts";
import {
  createEndpoint,
  type Delivery,
  deliveriesOf,
  type Endpoint,
  queueMessage,
  thread,
  turn,
  until,
  verified,
} from "../helpers/webhooks.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the endpoint routes", () => {
  it("create shows the whsec_ secret once; get and list never; patch and delete change them", async () => {
    const { key } = await tenantWithKey();
    const created = await createEndpoint(key, { description: "ci", events: ["turn.completed"] });
    expect(created).toEqual({
      object: "webhook_endpoint",
      id: expect.stringMatching(/^we_/),
      url: expect.stringContaining(RECEIVER_URL),
      events: ["turn.completed"],
      description: "ci",
      disabled: false,
      disabled_reason: null,
      created_at: expect.any(String),
      secret_rotated_at: null,
      secret: expect.stringMatching(/^whsec_/),
    });
    const { secret: _, ...resource } = created;
    const got = await json(await api("GET", `/v1/webhook-endpoints/${created.id}`, undefined, key));
    expect(got).toEqual(resource);
    const listed = await json<{ data: unknown[] }>(
      await api("GET", "/v1/webhook-endpoints", undefined, key),
    );
    expect(listed.data).toEqual([resource]);
    const patched = await json(
      await api(
        "PATCH",
        `/v1/webhook-endpoints/${created.id}`,
        { events: ["turn.failed", "hook.failed"], disabled: true },
        key,
      ),
    );
    expect(patched).toEqual({
      ...resource,
      events: ["turn.failed", "hook.failed"],
      disabled: true,
      disabled_reason: "api",
    });
    expect(
      (await api("DELETE", `/v1/webhook-endpoints/${created.id}`, undefined, key)).status,
    ).toBe(204);
    expect((await api("GET", `/v1/webhook-endpoints/${created.id}`, undefined, key)).status).toBe(
      404,
    );
  });

  it("refuses URLs that are not https (but loopback in development), and unknown events", async () => {
    const { key } = await tenantWithKey();
    const refused = await api(
      "POST",
      "/v1/webhook-endpoints",
      { url: "http://hooks.example.com/x", events: ["turn.completed"] },
      key,
    );
    expect(await json(refused, 400)).toMatchObject({
      code: "invalid_request",
      errors: [
        {
          path: "/url",
          message:
            "the scheme is http:, and an outbound URL is https (http only to a loopback host)",
        },
      ],
    });
    const unknown = await api(
      "POST",
      "/v1/webhook-endpoints",
      { url: "https://hooks.example.com/x", events: ["turn.started"] },
      key,
    );
    expect(unknown.status).toBe(400);
    const { id } = await createEndpoint(key);
    const patch = await api(
      "PATCH",
      `/v1/webhook-endpoints/${id}`,
      { url: "https://10.0.0.1/x" },
      key,
    );
    expect(patch.status).toBe(400);
  });

  it("need the hooks scope", async () => {
    const { tenant } = await tenantWithKey();
    const limited = await json<{ key: string }>(
      await api(
        "POST",
        `/v1/admin/tenants/${tenant.id}/keys`,
        { scopes: ["threads"] },
        "sk-local-admin",
      ),
      201,
    );
    const res = await api("GET", "/v1/webhook-endpoints", undefined, limited.key);
    expect(res.status).toBe(403);
  });
});

describe("invariant 12: every terminal turn yields one event per endpoint, delivered, signed", () => {
  it("each lifecycle event arrives once, verified by the standardwebhooks package", async () => {
    const { key } = await tenantWithKey();
    const endpoint = await createEndpoint(key);
    const received = receiver(
      () => 200,
      () => new Response(JSON.stringify({ error: { message: "bad request" } }), { status: 400 }),
    );
    const id = newThreadId();
    await thread(key)(id, { tools: [{ name: "lookup", description: "search" }] });
    const completed = await turn(key)(id, "hello");
    const paused = await turn(key)(id, "/call lookup {}");
    const call = paused.pending_calls[0];
    const resumed = await json<{ id: string }>(
      await api(
        "POST",
        `/v1/threads/${id}/turns/${paused.id}/outputs`,
        { items: [{ type: "function_call_output", call_id: call?.call_id, output: "42" }] },
        key,
      ),
    );
    const slow = post(`/v1/threads/${id}/turns`, { input: "/slow 200 wait" }, key);
    await untilRunning(id, key);
    const instead = await json<{ id: string }>(
      await api("POST", `/v1/threads/${id}/turns`, { input: "now", on_busy: "interrupt" }, key),
    );
    const interrupted = await json<{ id: string; status: string }>(await slow);
    expect(interrupted.status).toBe("interrupted");
    const compaction = await json<{ id: string }>(
      await api("POST", `/v1/threads/${id}/compact`, undefined, key),
    );
    const failing = newThreadId();
    await thread(key)(failing, { model: "gpt-test" });
    const failed = await turn(key)(failing, "hi");
    expect(failed.status).toBe("failed");
    expect((await api("DELETE", `/v1/threads/${failing}`, undefined, key)).status).toBe(204);

    const deliveries = await until(
      key,
      endpoint.id,
      (d) => d.length === 10 && d.every((x) => x.status === "delivered"),
    );
    const events = received.map((r) => verified(endpoint.secret, r));
    const byType = (type: string) => events.filter((e) => e.type === type);
    expect(events.map((e) => e.type).sort()).toEqual(
      [
        "thread.created",
        "thread.created",
        "turn.completed",
        "turn.requires_action",
        "turn.completed",
        "turn.interrupted",
        "turn.completed",
        "thread.compacted",
        "turn.failed",
        "thread.deleted",
      ].sort(),
    );
    // Each delivered at its first attempt, the record naming what it reports.
    expect(deliveries.map((d) => [d.type, d.status, d.attempts.map((a) => a.status_code)])).toEqual(
      events.map((e) => [e.type, "delivered", [200]]).reverse(),
    );
    expect(byType("turn.requires_action")[0]?.data).toEqual({
      thread_id: id,
      turn_id: paused.id,
      status: "requires_action",
      usage: expect.any(Object),
      pending_calls: [{ call_id: call?.call_id, name: "lookup" }],
      sequence: expect.any(Number),
    });
    expect(byType("turn.failed")[0]?.data).toEqual({
      thread_id: failing,
      turn_id: failed.id,
      status: "failed",
      usage: null,
      error: { code: "provider_error", message: expect.any(String) },
      sequence: expect.any(Number),
    });
    expect(byType("turn.completed").map((e) => e.data.turn_id)).toEqual([
      completed.id,
      paused.id,
      instead.id,
    ]);
    expect(resumed.id).toBe(paused.id);
    expect(byType("turn.interrupted")[0]?.data).toMatchObject({
      turn_id: interrupted.id,
      status: "interrupted",
    });
    expect(byType("thread.created").map((e) => e.data)).toEqual([
      { thread_id: id, turn_id: null, status: null, usage: null, sequence: 1 },
      { thread_id: failing, turn_id: null, status: null, usage: null, sequence: 1 },
    ]);
    expect(byType("thread.compacted")[0]?.data).toMatchObject({
      thread_id: id,
      turn_id: compaction.id,
      status: "completed",
    });
    // One webhook-id per event, each delivered once.
    expect(new Set(received.map((r) => r.id)).size).toBe(received.length);
    expect(received.every((r) => r.redirect === "manual")).toBe(true);
  });
});

describe("retries", () => {
  it("a receiver that fails, times out or redirects is tried again, with the same webhook-id, until it answers 2xx", async () => {
    const { key } = await tenantWithKey();
    const endpoint = await createEndpoint(key, { events: ["turn.completed"] });
    const answers: (number | "hang")[] = [500, "hang", 302, 204];
    const received = receiver((_, n) => answers[n] ?? 200);
    const id = newThreadId();
    await thread(key)(id);
    const done = await turn(key)(id, "hello");
    const [delivery] = await until(key, endpoint.id, (d) => d[0]?.status === "delivered");
    expect(received.map((r) => [r.id, verified(endpoint.secret, r).data.turn_id])).toEqual(
      received.map(() => [delivery?.id, done.id]),
    );
    expect(received.every((r) => r.redirect === "manual")).toBe(true);
    expect(
      delivery?.attempts.map((a) => [a.status_code, a.error, a.next_retry_at !== null]),
    ).toEqual([
      [500, "http_500", true],
      [null, "timeout", true],
      [302, "redirect", true],
      [204, null, false],
    ]);
    expect(delivery).toMatchObject({ type: "turn.completed", thread_id: id, turn_id: done.id });
  });

  it("a receiver that answers 410 Gone disables the endpoint: no more attempts, the delivery failed", async () => {
    const { key, tenant } = await tenantWithKey();
    const endpoint = await createEndpoint(key, { events: ["turn.completed"] });
    const received = receiver(() => 410);
    const id = newThreadId();
    await thread(key)(id);
    await turn(key)(id, "hello");
    const [delivery] = await until(key, endpoint.id, (d) => d[0]?.status === "failed");
    expect(delivery?.attempts.map((a) => [a.status_code, a.error, a.next_retry_at])).toEqual([
      [410, "http_410", null],
    ]);
    expect(
      await json(await api("GET", `/v1/webhook-endpoints/${endpoint.id}`, undefined, key)),
    ).toMatchObject({ disabled: true, disabled_reason: "gone" });
    // The next event: whatever the thread hands off for it is refused as disabled, unsent.
    const sent = vi.spyOn(env.WEBHOOKS, "sendBatch");
    await turn(key)(id, "again");
    await vi.waitUntil(async () => (await outboxOf(tenant.id, id)).rows === 0, { timeout: 5_000 });
    const handedOff = sent.mock.calls.flatMap(([messages]) =>
      [...messages].map((m) => (m.body as WebhookMessage).webhookId),
    );
    const after = await until(key, endpoint.id, (d) =>
      handedOff.every((webhookId) => d.some((x) => x.id === webhookId && x.status === "failed")),
    );
    for (const webhookId of handedOff) {
      expect(after.find((x) => x.id === webhookId)?.attempts.map((a) => a.error)).toEqual([
        "disabled",
      ]);
    }
    expect(received).toHaveLength(1);
  });

  it("a receiver that always fails gets eight attempts, then the delivery is failed", async () => {
    const { key } = await tenantWithKey();
    const endpoint = await createEndpoint(key, { events: ["thread.created"] });
    const received = receiver(() => 503);
    await thread(key)(newThreadId());
    const [delivery] = await until(key, endpoint.id, (d) => d[0]?.status === "failed");
    expect(delivery?.attempts.map((a) => a.error)).toEqual(Array(8).fill("http_503"));
    expect(delivery?.attempts.map((a) => a.next_retry_at === null)).toEqual([
      ...Array(7).fill(false),
      true,
    ]);
    expect(new Set(received.map((r) => r.id))).toEqual(new Set([delivery?.id]));
  });

  it("waits as the schedule says after each failed attempt: 5 s after the first, 5 min after the second", async () => {
    const { key, tenant } = await tenantWithKey();
    const endpoint = await createEndpoint(key);
    receiver(() => 500);
    const message = (webhookId: string) => queueMessage(tenant.id, endpoint.id, webhookId);
    const batch = createMessageBatch<WebhookMessage>("spindle-webhooks", [
      { id: "m1", timestamp: new Date(), attempts: 1, body: message("msg_first") },
      { id: "m2", timestamp: new Date(), attempts: 2, body: message("msg_second") },
    ]);
    const ctx = createExecutionContext();
    // The schedule as deployed, not the compressed one the other tests run with.
    await consumeWebhooks(batch, { ...env, SPINDLE_WEBHOOK_RETRY_SCALE: "1" } as unknown as Env);
    const result = await getQueueResult(batch, ctx);
    // Both are retried (the test queue records which, not the delay: the records show it).
    expect(result.retryMessages).toEqual([{ msgId: "m1" }, { msgId: "m2" }]);
    const waits = Object.fromEntries(
      (await deliveriesOf(key, endpoint.id)).map((d) => {
        const last = d.attempts.at(-1);
        const wait = last?.next_retry_at ? Date.parse(last.next_retry_at) - Date.parse(last.at) : 0;
        return [d.id, Math.round(wait / 1000)];
      }),
    );
    expect(waits).toEqual({ msg_first: 5, msg_second: 300 });
  });

  it("a message the dead-letter queue receives is recorded as failed, unless it was delivered", async () => {
    const { key, tenant } = await tenantWithKey();
    const endpoint = await createEndpoint(key);
    const message = (webhookId: string) => queueMessage(tenant.id, endpoint.id, webhookId);
    const batch = createMessageBatch<WebhookMessage>("spindle-webhooks-dlq", [
      { id: "m1", timestamp: new Date(), attempts: 1, body: message("msg_dead") },
    ]);
    const ctx = createExecutionContext();
    await consumeWebhooks(batch, env as unknown as Env);
    expect(await getQueueResult(batch, ctx)).toMatchObject({ explicitAcks: ["m1"] });
    const [delivery] = await deliveriesOf(key, endpoint.id);
    expect(delivery).toMatchObject({
      id: "msg_dead",
      status: "failed",
      attempts: [{ status_code: null, error: "exhausted", next_retry_at: null }],
    });
  });
});

describe("the endpoint's secret, state and test event", () => {
  it("a rotated secret signs beside the new one for a day: a receiver with either verifies", async () => {
    const { key } = await tenantWithKey();
    const endpoint = await createEndpoint(key, { events: ["thread.created"] });
    const rotated = await json<Endpoint & { secret: string }>(
      await api("POST", `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, {}, key),
    );
    expect(rotated.secret).not.toBe(endpoint.secret);
    expect(rotated.secret_rotated_at).not.toBe(null);
    const received = receiver();
    await thread(key)(newThreadId());
    await until(key, endpoint.id, (d) => d[0]?.status === "delivered");
    const [request] = received;
    if (!request) throw new Error("nothing arrived");
    expect(request.signature.split(" ")).toHaveLength(2);
    expect(verified(rotated.secret, request).type).toBe("thread.created");
    expect(verified(endpoint.secret, request).type).toBe("thread.created");
  });

  it("POST …/test sends webhook.test, listed at once as pending and then delivered", async () => {
    const { key } = await tenantWithKey();
    const endpoint = await createEndpoint(key, { events: ["turn.failed"] });
    const received = receiver();
    const queued = await json<Delivery>(
      await api("POST", `/v1/webhook-endpoints/${endpoint.id}/test`, {}, key),
      202,
    );
    expect(queued).toEqual({
      object: "webhook_delivery",
      id: expect.stringMatching(/^msg_/),
      endpoint_id: endpoint.id,
      type: "webhook.test",
      thread_id: null,
      turn_id: null,
      status: "pending",
      created_at: expect.any(String),
      attempts: [],
    });
    const [delivery] = await until(key, endpoint.id, (d) => d[0]?.status === "delivered");
    expect(delivery?.id).toBe(queued.id);
    expect(verified(endpoint.secret, received[0] as Received)).toEqual({
      type: "webhook.test",
      timestamp: queued.created_at,
      data: { endpoint_id: endpoint.id },
    });
  });

  it("a disabled endpoint receives nothing, an enabled one what it subscribes to only", async () => {
    const { key } = await tenantWithKey();
    const off = await createEndpoint(key);
    await api("PATCH", `/v1/webhook-endpoints/${off.id}`, { disabled: true }, key);
    const on = await createEndpoint(key, { events: ["turn.completed"] });
    const received = receiver();
    const id = newThreadId();
    await thread(key)(id);
    await turn(key)(id, "hello");
    await until(key, on.id, (d) => d[0]?.status === "delivered");
    expect(received.map((r) => verified(on.secret, r).type)).toEqual(["turn.completed"]);
    expect(await deliveriesOf(key, off.id)).toEqual([]);
  });
});

/** The tenant objects' stubs made in this isolate refuse hand-offs (the object out of reach). */
function handOffsFail(): void {
  const getByName = env.TENANT.getByName.bind(env.TENANT);
  vi.spyOn(env.TENANT, "getByName").mockImplementation((name) => {
    const stub = getByName(name);
    return new Proxy(stub, {
      get: (target, property) => {
        if (property === "enqueueWebhooks") {
          return async () => {
            throw new Error("the tenant's object is out of reach");
          };
        }
        const value: unknown = Reflect.get(target, property);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  });
}

/** The thread's outbox rows and webhook values, read in its object. */
async function outboxOf(tenant: string, id: string) {
  return runInDurableObject(await threadObjectOf(tenant, id), (_i, state) => ({
    // The table is created with the first row.
    rows: sqlOf(state.storage.sql).tables.ifExists(
      "spindle_outbox",
      0,
      () => state.storage.sql.exec("SELECT COUNT(*) AS n FROM spindle_outbox").one().n,
    ),
    sequence: state.storage.sql
      .exec("SELECT value FROM spindle_sync WHERE key = 'webhook_sequence'")
      .toArray()[0]?.value,
  }));
}

describe("the outbox", () => {
  it("invariant 14: a tenant without endpoints costs its turns nothing: no row, no hand-off", async () => {
    const { key, tenant } = await tenantWithKey();
    const sends = vi.spyOn(env.WEBHOOKS, "sendBatch");
    const id = newThreadId();
    await thread(key)(id);
    // The thread's first event found no subscriptions known: resolved against none, dropped.
    await vi.waitUntil(async () => (await outboxOf(tenant.id, id)).rows === 0, { timeout: 5_000 });
    for (const input of ["one", "two", "three"]) await turn(key)(id, input);
    expect(await outboxOf(tenant.id, id)).toEqual({ rows: 0, sequence: "1" });
    expect(sends).not.toHaveBeenCalled();
  });

  it("rows whose hand-off failed stay through the instance's end, and the alarm hands them off", async () => {
    const { key, tenant } = await tenantWithKey();
    const endpoint = await createEndpoint(key, { events: ["turn.completed"] });
    const received = receiver();
    const id = newThreadId();
    await thread(key)(id);
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    handOffsFail();
    const done = await turn(key)(id, "hello");
    await vi.waitUntil(() => warn.mock.calls.length > 0, { timeout: 5_000 });
    expect((await outboxOf(tenant.id, id)).rows).toBe(1);
    await runInDurableObject(await threadObjectOf(tenant.id, id), (_i, state) => {
      state.abort("the instance is lost");
    }).catch(() => undefined);
    vi.restoreAllMocks();
    const again = receiver(() => 200);
    await runDurableObjectAlarm(await threadObjectOf(tenant.id, id));
    const [delivery] = await until(key, endpoint.id, (d) => d[0]?.status === "delivered");
    expect(delivery).toMatchObject({ type: "turn.completed", turn_id: done.id });
    expect(again.map((r) => verified(endpoint.secret, r).data.turn_id)).toEqual([done.id]);
    expect(received).toEqual([]);
    expect((await outboxOf(tenant.id, id)).rows).toBe(0);
  });

  it("an endpoint created after a thread learned there were none gets its events from the thread's next push on", async () => {
    const { key, tenant } = await tenantWithKey();
    const id = newThreadId();
    await thread(key)(id);
    await turn(key)(id, "before");
    const endpoint = await createEndpoint(key, { events: ["turn.completed"] });
    const received = receiver();
    // The push that follows a turn answers with the tenant's subscriptions.
    await runDurableObjectAlarm(await threadObjectOf(tenant.id, id));
    const after = await turn(key)(id, "after");
    await until(key, endpoint.id, (d) => d[0]?.status === "delivered");
    expect(received.map((r) => verified(endpoint.secret, r).data.turn_id)).toEqual([after.id]);
  });
});
