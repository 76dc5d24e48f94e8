/**
 * What an operator reads, through the running service: every console line is one JSON object;
 * every answer names its request (`x-request-id`, the client's when valid); the id reaches the
 * thread's object, so a turn's line in the object names the request that started it (also a
 * queued turn's, a hook delivery's, and the webhook attempts its end causes); and no line holds
 * a key, a prompt or an endpoint's URL (`worker/observability.ts`, `shared/observability/`).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, DEV_KEY, json, newThreadId, untilRunning } from "../helpers/api.ts";
import { createHook, deliver, signedHeaders } from "../helpers/hooks.ts";
import { answerEvents, responsesStream } from "../helpers/openai.ts";
import { receiver } from "../helpers/receiver.ts";
import { tenantWithKey } from "../helpers/tenancy.ts";
import { createEndpoint, until } from "../helpers/webhooks.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

type Line = Record<string, unknown>;

/** Captures every console line from here on (the edge's and the objects': one isolate). */
function captureConsole() {
  const raw: string[] = [];
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      raw.push(args.map(String).join(" "));
    });
  }
  const lines = (): Line[] => raw.map((text) => JSON.parse(text) as Line);
  return {
    raw,
    lines,
    /** The lines of `event` for `requestId`. */
    of: (event: string, requestId: string) =>
      lines().filter((l) => l.event === event && l.request_id === requestId),
  };
}

const turnOf = (id: string, input: unknown, requestId: string, key = DEV_KEY) =>
  api("POST", `/v1/threads/${id}/turns`, { input }, key, { "x-request-id": requestId });

const GENERATED_ID = /^req_[0-9a-f]{32}$/;

describe("log lines and the request id", () => {
  it("a turn's lines, the edge's and the object's, name one request; none holds the key or the prompt", async () => {
    const logs = captureConsole();
    const id = newThreadId();
    const created = await api("POST", "/v1/threads", { id }, DEV_KEY, {
      "x-request-id": "trace-create-1",
    });
    expect(created.status).toBe(201);
    expect(created.headers.get("x-request-id")).toBe("trace-create-1");
    const res = await turnOf(id, "the launch code is XYZZY-42", "trace-turn-1");
    expect(res.headers.get("x-request-id")).toBe("trace-turn-1");
    const done = await json<{ id: string }>(res);

    await vi.waitFor(() => expect(logs.of("turn.ended", "trace-turn-1")).toHaveLength(1));
    const [ended] = logs.of("turn.ended", "trace-turn-1");
    expect(ended).toMatchObject({
      level: "info",
      tenant: "local",
      thread: id,
      turn: done.id,
      kind: "turn",
      status: "completed",
      error_code: null,
      provider: "local",
      provider_status: null,
    });
    expect(ended?.duration_ms).toEqual(expect.any(Number));
    expect(ended?.input_tokens).toBeGreaterThan(0);
    expect(logs.of("request", "trace-turn-1")).toEqual([
      expect.objectContaining({
        level: "info",
        method: "POST",
        route: "startTurn",
        tenant: "local",
        thread: id,
        http_status: 200,
        duration_ms: expect.any(Number),
      }),
    ]);
    expect(logs.of("request", "trace-create-1")).toEqual([
      expect.objectContaining({ route: "createThread", http_status: 201 }),
    ]);
    // One JSON object per line, each with its level, event and time.
    for (const line of logs.lines()) {
      expect(line).toEqual(
        expect.objectContaining({
          level: expect.any(String),
          event: expect.any(String),
          at: expect.any(String),
        }),
      );
    }
    const all = logs.raw.join("\n");
    expect(all).not.toContain("XYZZY");
    expect(all).not.toContain(DEV_KEY);
    expect(all).not.toContain("Bearer");
  });

  it("an invalid incoming id is replaced by a generated one, which the object's line carries", async () => {
    const logs = captureConsole();
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id }), 201);
    for (const sent of ["has spaces", "x".repeat(129), 'quote"d', ""]) {
      const res = await turnOf(id, "hello", sent);
      const requestId = res.headers.get("x-request-id") ?? "";
      expect(requestId).toMatch(GENERATED_ID);
      const done = await json<{ id: string }>(res);
      await vi.waitFor(() =>
        expect(logs.of("turn.ended", requestId)).toEqual([
          expect.objectContaining({ turn: done.id, thread: id }),
        ]),
      );
    }
    // Without a header too: each request gets an id of its own.
    const a = (await api("GET", `/v1/threads/${id}`)).headers.get("x-request-id");
    const b = (await api("GET", `/v1/threads/${id}`)).headers.get("x-request-id");
    expect(a).toMatch(GENERATED_ID);
    expect(b).toMatch(GENERATED_ID);
    expect(a).not.toBe(b);
  });

  it("a streamed turn answers with its id, and a queued turn's line names the request that queued it", async () => {
    const logs = captureConsole();
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id }), 201);
    const slow = turnOf(id, "/slow 400 take your time", "trace-slow");
    await untilRunning(id);
    const queued = await api(
      "POST",
      `/v1/threads/${id}/turns`,
      { input: "after that", on_busy: "queue" },
      DEV_KEY,
      { "x-request-id": "trace-queued" },
    );
    expect(queued.headers.get("x-request-id")).toBe("trace-queued");
    const later = await json<{ id: string }>(queued, 202);
    const first = await json<{ id: string }>(await slow);
    await vi.waitFor(() =>
      expect(logs.of("turn.ended", "trace-queued")).toEqual([
        expect.objectContaining({ turn: later.id, status: "completed" }),
      ]),
    );
    expect(logs.of("turn.ended", "trace-slow")).toEqual([
      expect.objectContaining({ turn: first.id, status: "completed" }),
    ]);
    const streamed = await api(
      "POST",
      `/v1/threads/${id}/turns`,
      { input: "stream this", stream: true },
      DEV_KEY,
      { "x-request-id": "trace-stream" },
    );
    expect(streamed.headers.get("content-type")).toBe("text/event-stream");
    expect(streamed.headers.get("x-request-id")).toBe("trace-stream");
    await streamed.text();
    await vi.waitFor(() => expect(logs.of("turn.ended", "trace-stream")).toHaveLength(1));
  });

  it("a provider's turn names the provider and its HTTP status, never its key", async () => {
    const logs = captureConsole();
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id, model: "gpt-test" }), 201);
    let status = 200;
    vi.spyOn(globalThis, "fetch").mockImplementation(async () =>
      status === 200
        ? new Response(responsesStream(answerEvents("fine")), {
            headers: { "content-type": "text/event-stream" },
          })
        : new Response(JSON.stringify({ error: { message: "bad input" } }), { status }),
    );
    await json(await turnOf(id, "hi", "trace-openai-ok"));
    status = 400;
    const failed = await json<{ status: string }>(await turnOf(id, "again", "trace-openai-400"));
    expect(failed.status).toBe("failed");
    await vi.waitFor(() => expect(logs.of("turn.ended", "trace-openai-400")).toHaveLength(1));
    expect(logs.of("turn.ended", "trace-openai-ok")).toEqual([
      expect.objectContaining({
        level: "info",
        status: "completed",
        provider: "openai",
        provider_status: 200,
        input_tokens: 50,
        output_tokens: 3,
      }),
    ]);
    expect(logs.of("turn.ended", "trace-openai-400")).toEqual([
      expect.objectContaining({
        level: "warn",
        status: "failed",
        error_code: "provider_error",
        provider: "openai",
        provider_status: 400,
      }),
    ]);
    expect(logs.raw.join("\n")).not.toContain("sk-test-openai");
  });

  it("the webhook attempts a turn's end causes name the turn's request, never the endpoint's URL", async () => {
    const { key } = await tenantWithKey();
    const endpoint = await createEndpoint(key, { events: ["turn.completed"] });
    receiver();
    const logs = captureConsole();
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id }, key), 201);
    const done = await json<{ id: string }>(await turnOf(id, "hello", "trace-webhook", key));
    await until(key, endpoint.id, (d) => d[0]?.status === "delivered");
    await vi.waitFor(() => expect(logs.of("webhook.attempt", "trace-webhook")).toHaveLength(1));
    expect(logs.of("webhook.attempt", "trace-webhook")[0]).toMatchObject({
      level: "info",
      thread: id,
      turn: done.id,
      endpoint: endpoint.id,
      event_type: "turn.completed",
      status: "delivered",
      status_code: 200,
      error_code: null,
      attempt: 1,
    });
    const all = logs.raw.join("\n");
    expect(all).not.toContain(endpoint.url);
    expect(all).not.toContain(endpoint.secret);
    expect(all).not.toContain(key);
  });

  it("a hook delivery's turn names the delivery's request", async () => {
    const { key } = await tenantWithKey();
    const hook = await createHook("standard", { input: "{{body.text}}" }, key);
    const logs = captureConsole();
    const body = JSON.stringify({ thread: "obs", text: "the delivery says PLUGH" });
    const res = await deliver(hook.url, body, {
      ...signedHeaders("standard", hook.secret, body),
      "x-request-id": "trace-hook",
    });
    expect(res.status).toBe(202);
    expect(res.headers.get("x-request-id")).toBe("trace-hook");
    const delivery = await json<{ turn_id: string; thread_id: string }>(res, 202);
    await vi.waitFor(() =>
      expect(logs.of("turn.ended", "trace-hook")).toEqual([
        expect.objectContaining({
          turn: delivery.turn_id,
          thread: delivery.thread_id,
          status: "completed",
        }),
      ]),
    );
    expect(logs.of("request", "trace-hook")).toEqual([
      expect.objectContaining({ route: "deliverHook", hook: hook.id, http_status: 202 }),
    ]);
    const all = logs.raw.join("\n");
    expect(all).not.toContain("PLUGH");
    expect(all).not.toContain(hook.secret);
    expect(all).not.toContain(hook.url);
  });

  it("the events an interrupt, a deletion and an endpoint test cause name those requests", async () => {
    const { key } = await tenantWithKey();
    const events = ["turn.interrupted", "thread.deleted"];
    const endpoint = await createEndpoint(key, { events });
    receiver();
    const logs = captureConsole();
    const id = newThreadId();
    const tools = [{ name: "lookup", parameters: { type: "object" } }];
    await json(await api("POST", "/v1/threads", { id, tools }, key), 201);
    // A turn paused on a client tool, then interrupted: no task runs it when it ends.
    const paused = await json<{ id: string; status: string }>(
      await turnOf(id, "/call lookup {}", "trace-pause", key),
    );
    expect(paused.status).toBe("requires_action");
    const path = `/v1/threads/${id}/turns/${paused.id}/interrupt`;
    const interrupted = await api("POST", path, {}, key, { "x-request-id": "trace-interrupt" });
    expect(interrupted.status).toBe(200);
    const deleted = await api("DELETE", `/v1/threads/${id}`, undefined, key, {
      "x-request-id": "trace-delete",
    });
    expect(deleted.status).toBe(204);
    const tested = await api("POST", `/v1/webhook-endpoints/${endpoint.id}/test`, {}, key, {
      "x-request-id": "trace-test",
    });
    expect(tested.status).toBe(202);
    await vi.waitFor(() => {
      expect(logs.of("webhook.attempt", "trace-interrupt")).toEqual([
        expect.objectContaining({ event_type: "turn.interrupted", turn: paused.id }),
      ]);
      expect(logs.of("webhook.attempt", "trace-delete")).toEqual([
        expect.objectContaining({ event_type: "thread.deleted", thread: id }),
      ]);
      expect(logs.of("webhook.attempt", "trace-test")).toEqual([
        expect.objectContaining({ event_type: "webhook.test", endpoint: endpoint.id }),
      ]);
    });
  });
});
