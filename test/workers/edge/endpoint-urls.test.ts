/**
 * The outbound URL policy (`shared/outbound/`) where the service applies it: creating and
 * patching a webhook endpoint, and the queue consumer before each attempt. Production is the
 * worker called with `SPINDLE_ENV=production` (the suite itself runs as development). Every URL
 * here is only checked: any request this isolate sends outside loopback fails the test.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { DEV_ID_SECRET } from "../../../durable-objects/tenant/id-tags.ts";
import type { Env } from "../../../env.ts";
import type { WebhookMessage } from "../../../shared/api/index.ts";
import worker from "../../../worker/index.ts";
import { api, BASE, json } from "../helpers/api.ts";
import { RECEIVER_URL } from "../helpers/receiver.ts";
import { tenantWithKey } from "../helpers/tenancy.ts";
import { queueMessage } from "../helpers/webhooks.ts";

// The keys the suite makes (as development) carry tags under the development secret.
const PRODUCTION = {
  ...env,
  SPINDLE_ENV: "production",
  SPINDLE_ID_SECRET: DEV_ID_SECRET,
} as unknown as Env;

/** The forms a textual rule let through (issue 23), each with the words its refusal names. */
const REFUSED: readonly [string, string][] = [
  ["https://localhost./", "a loopback name"],
  ["https://foo.localhost./", "a loopback name"],
  ["https://[::127.0.0.1]/", "embeds 127.0.0.1"],
  ["https://[64:ff9b::a9fe:a9fe]/", "embeds 169.254.169.254 (NAT64), a link-local address"],
  ["https://[fec0::1]/", "a site-local address"],
  ["https://100.64.0.1/", "carrier-grade NAT"],
  ["https://metadata.google.internal/", "under .internal"],
];

/** A request to the worker as deployed: `SPINDLE_ENV=production`, a tenant's key. */
async function production(method: string, path: string, body: unknown, key: string) {
  const request = new Request(`${BASE}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const fetch = worker.fetch as (r: Request, e: Env, c: ExecutionContext) => Promise<Response>;
  return fetch(request, PRODUCTION, createExecutionContext());
}

interface Endpoint {
  id: string;
  url: string;
}

/** Public URLs the tests give as endpoints (no event ever goes to them). */
const PUBLIC = ["https://example.com/hook", "https://[2606:4700::1111]/hook"];

/** Requests this isolate sent to any URL of this file, which none of its tests may send. */
let sent: string[];

beforeEach(() => {
  sent = [];
  const tested = [...REFUSED.map(([url]) => url), ...PUBLIC, RECEIVER_URL];
  const realFetch = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation((input, init) => {
    const url = new Request(input, init).url;
    if (!tested.some((prefix) => url.startsWith(new URL(prefix).origin))) {
      return realFetch(input, init);
    }
    sent.push(url);
    return Promise.reject(new Error(`a request to ${url}`));
  });
});

afterEach(() => {
  vi.restoreAllMocks();
  expect(sent).toEqual([]);
});

describe("endpoint URLs in production", () => {
  it("creating an endpoint to a non-public host is 400 invalid_request naming why, and stores nothing", async () => {
    const { key } = await tenantWithKey();
    for (const [url, why] of REFUSED) {
      const res = await production(
        "POST",
        "/v1/webhook-endpoints",
        { url, events: ["turn.completed"] },
        key,
      );
      const problem = await json<{ code: string; detail: string; errors: unknown[] }>(res, 400);
      expect(problem).toMatchObject({
        code: "invalid_request",
        errors: [{ path: "/url", message: expect.stringContaining(why) }],
      });
      expect(problem.detail).toContain(why);
    }
    const list = await json<{ data: Endpoint[] }>(
      await api("GET", "/v1/webhook-endpoints", undefined, key),
    );
    expect(list.data).toEqual([]);
  });

  it("patching an endpoint's url to one is 400, and the endpoint keeps its url", async () => {
    const { key } = await tenantWithKey();
    // A local receiver, as development allows; production refuses it too (plain http).
    const created = await json<Endpoint>(
      await api(
        "POST",
        "/v1/webhook-endpoints",
        { url: RECEIVER_URL, events: ["turn.completed"] },
        key,
      ),
      201,
    );
    const plainHttp: [string, string] = [RECEIVER_URL, "is https"];
    for (const [url, why] of [...REFUSED, plainHttp]) {
      const res = await production("PATCH", `/v1/webhook-endpoints/${created.id}`, { url }, key);
      expect(await json(res, 400)).toMatchObject({
        code: "invalid_request",
        errors: [{ path: "/url", message: expect.stringContaining(why) }],
      });
    }
    const kept = await json<Endpoint>(
      await api("GET", `/v1/webhook-endpoints/${created.id}`, undefined, key),
    );
    expect(kept.url).toBe(RECEIVER_URL);
  });

  it("a public https URL is accepted, by name or by address", async () => {
    const { key } = await tenantWithKey();
    for (const url of PUBLIC) {
      const res = await production(
        "POST",
        "/v1/webhook-endpoints",
        { url, events: ["turn.completed"] },
        key,
      );
      const created = await json<Endpoint>(res, 201);
      expect(created.url).toBe(url);
      // Deleted at once: no event of this tenant ever goes to it.
      const deleted = await api("DELETE", `/v1/webhook-endpoints/${created.id}`, undefined, key);
      expect(deleted.status).toBe(204);
    }
  });

  it("the consumer checks again before an attempt: a stored URL now refused gets url_refused, no request", async () => {
    const { key, tenant } = await tenantWithKey();
    const endpoint = await json<Endpoint>(
      await api(
        "POST",
        "/v1/webhook-endpoints",
        { url: RECEIVER_URL, events: ["turn.completed"] },
        key,
      ),
      201,
    );
    const message = queueMessage(tenant.id, endpoint.id, "msg_refused");
    const batch = createMessageBatch<WebhookMessage>("spindle-webhooks", [
      { id: "m1", timestamp: new Date(), attempts: 1, body: message },
    ]);
    const ctx = createExecutionContext();
    await worker.queue(batch, PRODUCTION);
    expect(await getQueueResult(batch, ctx)).toMatchObject({ explicitAcks: ["m1"] });
    const deliveries = await json<{ data: { status: string; attempts: unknown[] }[] }>(
      await api("GET", `/v1/webhook-endpoints/${endpoint.id}/deliveries`, undefined, key),
    );
    expect(deliveries.data).toMatchObject([
      { status: "failed", attempts: [{ status_code: null, error: "url_refused" }] },
    ]);
  });
});

describe("endpoint URLs in development", () => {
  it("loopback is accepted over http; the other non-public forms are refused as in production", async () => {
    const { key } = await tenantWithKey();
    for (const url of [RECEIVER_URL, "http://localhost:9/hooks", "http://[::1]:9/hooks"]) {
      const res = await api(
        "POST",
        "/v1/webhook-endpoints",
        { url, events: ["turn.completed"] },
        key,
      );
      expect(res.status).toBe(201);
    }
    const notLoopback = REFUSED.filter(([url]) => !url.includes("localhost"));
    for (const [url, why] of notLoopback) {
      const res = await api(
        "POST",
        "/v1/webhook-endpoints",
        { url, events: ["turn.completed"] },
        key,
      );
      expect(await json(res, 400)).toMatchObject({
        errors: [{ path: "/url", message: expect.stringContaining(why) }],
      });
    }
  });
});
