/**
 * The OpenAI surface is Spindle's service: tenancy, scopes, quotas and webhooks apply to its
 * requests as to Spindle's own routes (design §17).
 */
import { exports } from "cloudflare:workers";
import OpenAI from "openai";
import { afterEach, describe, expect, it, vi } from "vitest";
import { parseResponseId } from "../../../shared/openai/index.ts";
import { api, BASE } from "../helpers/api.ts";
import { receiver } from "../helpers/receiver.ts";
import { createKey, tenantWithKey } from "../helpers/tenancy.ts";
import { createEndpoint, until } from "../helpers/webhooks.ts";

const MODEL = "spindle-local";

const clientFor = (key: string) =>
  new OpenAI({
    apiKey: key,
    baseURL: `${BASE}/v1`,
    maxRetries: 0,
    fetch: (url, init) => exports.default.fetch(url as string, init as RequestInit),
  });

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the OpenAI surface as part of the service", () => {
  it("keeps each tenant's responses and conversations to itself", async () => {
    const a = await tenantWithKey();
    const b = await tenantWithKey();
    const response = await clientFor(a.key).responses.create({ model: MODEL, input: "a's" });
    const conversation = await clientFor(a.key).conversations.create({});
    const stranger = clientFor(b.key);
    await expect(stranger.responses.retrieve(response.id)).rejects.toBeInstanceOf(
      OpenAI.NotFoundError,
    );
    await expect(
      stranger.responses.create({ model: MODEL, previous_response_id: response.id, input: "x" }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(stranger.conversations.retrieve(conversation.id)).rejects.toBeInstanceOf(
      OpenAI.NotFoundError,
    );
    // The thread is in a's tenant, reachable by a's key through Spindle's routes.
    const thread = parseResponseId(response.id)?.threadId;
    expect((await api("GET", `/v1/threads/${thread}`, undefined, a.key)).status).toBe(200);
    expect((await api("GET", `/v1/threads/${thread}`, undefined, b.key)).status).toBe(404);
  });

  it("needs the threads scope: another key is a PermissionDeniedError", async () => {
    const { tenant } = await tenantWithKey();
    const { key } = await createKey(tenant.id, { scopes: ["usage"] });
    const error = await clientFor(key)
      .responses.create({ model: MODEL, input: "x" })
      .catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(error.code).toBe("forbidden");
  });

  it("answers a quota with a RateLimitError the SDK is told not to retry", async () => {
    const { key } = await tenantWithKey({ quotas: { max_threads: 1 } });
    const client = clientFor(key);
    await client.responses.create({ model: MODEL, input: "the one thread" });
    const res = await api("POST", "/v1/responses", { model: MODEL, input: "one more" }, key);
    expect(res.status).toBe(429);
    expect(res.headers.get("x-should-retry")).toBe("false");
    const error = await client.responses
      .create({ model: MODEL, input: "one more" })
      .catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect(error.code).toBe("quota_exceeded");
  });

  it("sends the tenant's webhooks for a response's turn", async () => {
    const { key } = await tenantWithKey();
    const endpoint = await createEndpoint(key, { events: ["turn.completed"] });
    const received = receiver();
    const response = await clientFor(key).responses.create({ model: MODEL, input: "tell them" });
    const ref = parseResponseId(response.id);
    const [delivery] = await until(key, endpoint.id, (d) => d[0]?.status === "delivered");
    expect(delivery).toMatchObject({
      type: "turn.completed",
      thread_id: ref?.threadId,
      turn_id: ref?.turnId,
    });
    expect(received.length).toBeGreaterThan(0);
  });
});
