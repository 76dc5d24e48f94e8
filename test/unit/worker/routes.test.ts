import { describe, expect, it, vi } from "vitest";
import type { ProblemCode, ThreadRpc } from "../../../shared/api/index.ts";
import { createApp } from "../../../worker/app.ts";
import { keyA, problemOf, setup, thread, turn, userMessage } from "./fake-thread.ts";

const defaultPermissions = {
  sandbox: "workspace-write",
  approval_policy: "on-request",
  writable_roots: [],
  network_access: false,
};

describe("POST /v1/threads", () => {
  it("creates the thread under the caller's tenant with the validated config", async () => {
    const { json, fake } = setup();
    const res = await json("/v1/threads", {
      id: "t1",
      model: "spindle-local-lite",
      permissions: { sandbox: "workspace-write", approval_policy: "on-request" },
      tools: [{ name: "lookup" }],
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe("/v1/threads/t1");
    expect(await res.json()).toEqual(thread("t1"));
    expect(fake.calls).toEqual([
      {
        name: "A:t1",
        method: "createThread",
        args: [
          {
            tenant: "A",
            threadId: "t1",
            config: {
              model: "spindle-local-lite",
              permissions: defaultPermissions,
              tools: [
                {
                  type: "function",
                  name: "lookup",
                  description: "",
                  parameters: { type: "object", properties: {} },
                },
              ],
            },
          },
        ],
      },
    ]);
  });

  it("an empty body creates a thread with a generated id and the defaults", async () => {
    const { request, fake } = setup();
    const res = await request("/v1/threads", { method: "POST" });
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe("/v1/threads/thr_generated");
    expect(fake.calls).toEqual([
      {
        name: "A:thr_generated",
        method: "createThread",
        args: [{ tenant: "A", threadId: "thr_generated", config: {} }],
      },
    ]);
  });

  it("with an Idempotency-Key and no id, the id derives from the key: its retry reaches the same thread", async () => {
    const { request, fake } = setup();
    const create = (key: string, body = "{}") =>
      request("/v1/threads", {
        method: "POST",
        headers: { "idempotency-key": key, "content-type": "application/json" },
        body,
      });
    const first = await create("k1");
    await create("k1");
    await create("k2");
    await create("k1", '{"id":"t9"}');
    const names = fake.calls.map((c) => c.name);
    expect(names[0]).toMatch(/^A:thr_[0-9a-f]{40}$/);
    expect(names[1]).toBe(names[0]);
    expect(names[2]).not.toBe(names[0]);
    expect(names[3]).toBe("A:t9");
    expect(first.headers.get("location")).toBe(`/v1/threads/${names[0]?.slice(2)}`);
    const keys = fake.calls.map(
      (c) => (c.args[0] as { idempotency?: { key: string } }).idempotency,
    );
    expect(keys.map((k) => k?.key)).toEqual(["k1", "k1", "k2", "k1"]);
  });

  it("by default a generated id is thr_ and a fresh uuid", async () => {
    const app = createApp();
    const { fake, env } = setup();
    const create = () =>
      app.request(
        "/v1/threads",
        { method: "POST", headers: { authorization: `Bearer ${keyA}` } },
        env,
      );
    await create();
    await create();
    const [first, second] = fake.names;
    expect(first).toMatch(/^A:thr_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(second).not.toBe(first);
  });

  it("creating a thread id that exists is 409 thread_exists", async () => {
    const { json } = setup();
    await json("/v1/threads", { id: "t1" });
    const res = await json("/v1/threads", { id: "t1" });
    expect(res.status).toBe(409);
    expect(await problemOf(res)).toEqual({
      type: "/problems/thread_exists",
      title: "A thread with this id already exists",
      status: 409,
      detail: "It exists.",
      code: "thread_exists",
    });
  });
});

describe("thread routes", () => {
  it("GET /v1/threads/{id} answers the DO's thread resource", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await request("/v1/threads/t1");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(thread("t1"));
  });

  it("DELETE /v1/threads/{id} answers 204 with no body, and the thread is gone", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await request("/v1/threads/t1", { method: "DELETE" });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect((await request("/v1/threads/t1")).status).toBe(404);
  });

  it("GET …/turns/{turn} asks the DO for that turn", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await request("/v1/threads/t1/turns/turn_7");
    expect(await res.json()).toEqual(turn("turn_7", "t1", "completed"));
    expect(fake.calls).toEqual([{ name: "A:t1", method: "getTurn", args: ["turn_7"] }]);
  });

  it("GET …/history defaults to 100 items and passes the cursor through", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const first = await request("/v1/threads/t1/history");
    expect(await first.json()).toEqual({
      object: "list",
      data: [userMessage("hi")],
      next_cursor: null,
    });
    await request("/v1/threads/t1/history?limit=1000&cursor=abc");
    await request("/v1/threads/t1/history?limit=1");
    expect(fake.calls.map((c) => c.args)).toEqual([
      [{ limit: 100 }],
      [{ limit: 1000, cursor: "abc" }],
      [{ limit: 1 }],
    ]);
  });

  it("GET …/turns defaults to 20 turns, passes the cursor through, and refuses a limit over 100", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const first = await request("/v1/threads/t1/turns");
    expect(await first.json()).toEqual({ object: "list", data: [], next_cursor: null });
    await request("/v1/threads/t1/turns?limit=100&cursor=abc");
    expect((await request("/v1/threads/t1/turns?limit=101")).status).toBe(400);
    expect(fake.calls.map((c) => [c.method, c.args])).toEqual([
      ["listTurns", [{ limit: 20 }]],
      ["listTurns", [{ limit: 100, cursor: "abc" }]],
    ]);
  });

  it("GET …/prompt answers the DO's prompt as is", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await request("/v1/threads/t1/prompt");
    expect(await res.json()).toEqual({
      instructions: "be brief",
      input: [],
      tools: [],
      parallel_tool_calls: true,
    });
  });

  it("POST …/restore answers the rebuilt thread", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await request("/v1/threads/t1/restore", { method: "POST" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(thread("t1"));
    expect(fake.calls).toEqual([{ name: "A:t1", method: "restore", args: [{}] }]);
  });

  it("the stub factory can be replaced and receives the tenant and thread id", async () => {
    const { env } = setup();
    const seen: [string, string][] = [];
    const stub = { getThread: async () => ({ ok: true, value: thread("t9") }) };
    const app = createApp({
      threadStub: (_env, { tenant }, threadId) => {
        seen.push([tenant, threadId]);
        return stub as unknown as ThreadRpc;
      },
    });
    const res = await app.request(
      "/v1/threads/t9",
      { headers: { authorization: `Bearer ${keyA}` } },
      env,
    );
    expect(await res.json()).toEqual(thread("t9"));
    expect(seen).toEqual([["A", "t9"]]);
  });
});

describe("POST /v1/threads/{id}/turns", () => {
  it("a string input reaches the DO as one text part of the turn's content, rejecting when busy by default", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await json("/v1/threads/t1/turns", { input: "hello" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(turn("turn_1", "t1", "completed"));
    expect(fake.calls).toEqual([
      {
        name: "A:t1",
        method: "startTurn",
        args: [
          {
            content: [{ type: "input_text", text: "hello" }],
            onBusy: "reject",
          },
        ],
      },
    ]);
  });

  it("an Idempotency-Key reaches the DO with a fingerprint of the route and the body", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const send = (path: string, body: unknown, key: string) =>
      json(path, body, { headers: { "idempotency-key": key } });
    await send("/v1/threads/t1/turns", { input: "hello" }, "k1");
    await send("/v1/threads/t1/turns", { input: "hello" }, "k1");
    await send("/v1/threads/t1/turns", { input: "hello!" }, "k1");
    await send("/v1/threads/t1/inject", { text: "hello" }, "k1");
    await send("/v1/threads/t1/compact", undefined, "k1");
    await json("/v1/threads/t1/turns", { input: "hello" });
    const keys = fake.calls.map(
      (c) => (c.args[0] as { idempotency?: { key: string; fingerprint: string } }).idempotency,
    );
    expect(fake.calls.map((c) => c.method)).toContain("compact");
    expect(keys.slice(0, 5).map((k) => k?.key)).toEqual(["k1", "k1", "k1", "k1", "k1"]);
    const prints = keys.slice(0, 5).map((k) => k?.fingerprint);
    expect(prints[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(prints[1]).toBe(prints[0]);
    expect(new Set(prints).size).toBe(4);
    expect(keys[5]).toBeUndefined();
  });

  it("input items, overrides and on_busy pass through validated", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const input = [
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "what is this?" },
          { type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "low" },
        ],
      },
    ];
    const res = await json("/v1/threads/t1/turns", {
      input,
      overrides: { model: "spindle-local-lite", cwd: "/repo" },
      on_busy: "queue",
      stream: false,
    });
    expect(res.status).toBe(200);
    expect(fake.calls[0]?.args).toEqual([
      {
        content: input[0]?.content,
        overrides: { model: "spindle-local-lite", cwd: "/repo" },
        onBusy: "queue",
      },
    ]);
  });

  it("a turn that has not run yet (queued) is 202 Accepted", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    fake.turnStatus = "in_progress";
    const res = await json("/v1/threads/t1/turns", { input: "later", on_busy: "queue" });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual(turn("turn_1", "t1", "in_progress"));
  });

  it("stream: false wins over Accept: text/event-stream", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await json(
      "/v1/threads/t1/turns",
      { input: "hi", stream: false },
      { headers: { accept: "text/event-stream" } },
    );
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(fake.calls.map((c) => c.method)).toEqual(["startTurn"]);
  });
});

describe("DO failures", () => {
  const cases: [ProblemCode, number][] = [
    ["not_found", 404],
    ["thread_busy", 409],
    ["turn_not_found", 404],
    ["turn_mismatch", 409],
    ["turn_not_steerable", 409],
    ["no_pending_calls", 409],
    ["unknown_call_id", 400],
    ["provider_error", 502],
    ["context_window_exceeded", 400],
    ["unknown_model", 400],
    ["invalid_request", 400],
    ["internal", 500],
  ];

  for (const [code, status] of cases) {
    it(`a ${code} result is answered ${status} with the DO's detail`, async () => {
      const { json, fake } = setup();
      fake.threads.set("A:t1", thread("t1"));
      fake.failures.set("startTurn", { code, detail: `because ${code}` });
      const log = vi.spyOn(console, "error").mockImplementation(() => {});
      try {
        const res = await json("/v1/threads/t1/turns", { input: "hi" });
        expect(res.status).toBe(status);
        expect(await problemOf(res)).toMatchObject({ status, code, detail: `because ${code}` });
      } finally {
        log.mockRestore();
      }
    });
  }

  it("field errors from the DO are passed on", async () => {
    const { json, fake } = setup();
    const errors = [{ path: "/model", message: "no such model" }];
    fake.failures.set("createThread", { code: "unknown_model", detail: "Unknown model.", errors });
    const res = await json("/v1/threads", { id: "t1", model: "gpt-nope" });
    expect(await problemOf(res)).toEqual({
      type: "/problems/unknown_model",
      title: "The model is not in the catalog",
      status: 400,
      detail: "Unknown model.",
      code: "unknown_model",
      errors,
    });
  });

  it("a code this worker does not know becomes internal", async () => {
    const { request, fake } = setup();
    fake.failures.set("getThread", { code: "brand_new" as ProblemCode, detail: "from the future" });
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const res = await request("/v1/threads/t1");
      expect(await problemOf(res)).toMatchObject({ status: 500, code: "internal" });
    } finally {
      log.mockRestore();
    }
  });

  it("a rejected RPC call is 500 internal, logged, and its message is not shown", async () => {
    const { request, fake } = setup();
    fake.failures.set("getThread", new Error("storage exploded at row 42"));
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const res = await request("/v1/threads/t1");
      expect(res.status).toBe(500);
      const body = await problemOf(res);
      expect(body).toEqual({
        type: "/problems/internal",
        title: "Internal error",
        status: 500,
        detail: "The server failed to handle the request.",
        code: "internal",
      });
      expect(JSON.stringify(body)).not.toContain("exploded");
      expect(log).toHaveBeenCalledOnce();
      expect(JSON.parse(String(log.mock.calls[0]?.[0]))).toMatchObject({
        level: "error",
        event: "request.failed",
        route: "getThread",
        thread: "t1",
        error: "Error: storage exploded at row 42",
      });
    } finally {
      log.mockRestore();
    }
  });
});

describe("routing errors", () => {
  it("an unknown route is a 404 not_found problem", async () => {
    const { request } = setup();
    for (const path of ["/nope", "/v1/nope", "/v1/threads/t1/turns/x/y/z"]) {
      const res = await request(path);
      expect(res.status).toBe(404);
      expect(await problemOf(res)).toEqual({
        type: "/problems/not_found",
        title: "The resource does not exist",
        status: 404,
        detail: `No route matches GET ${path}.`,
        code: "not_found",
      });
    }
  });

  it("an unauthenticated request to an unknown /v1 route is 401, revealing nothing", async () => {
    const { request } = setup();
    expect((await request("/v1/nope", { key: "" })).status).toBe(401);
  });

  it("a known path with the wrong method is 405 with Allow", async () => {
    const { request, fake } = setup();
    const cases: [string, string, string][] = [
      ["PUT", "/v1/threads", "POST, GET"],
      ["PUT", "/v1/threads/t1", "GET, PATCH, DELETE"],
      ["PUT", "/v1/threads/t1/turns", "POST, GET"],
      ["DELETE", "/v1/threads/t1/turns/u1", "GET"],
      ["POST", "/v1/threads/t1/history", "GET"],
      ["POST", "/v1/threads/t1/prompt", "GET"],
      ["GET", "/v1/threads/t1/restore", "POST"],
      ["GET", "/v1/threads/t1/turns/u1/outputs", "POST"],
      ["GET", "/v1/threads/t1/turns/u1/steer", "POST"],
      ["GET", "/v1/threads/t1/turns/u1/interrupt", "POST"],
      ["POST", "/v1/threads/t1/events", "GET"],
      ["GET", "/v1/threads/t1/rollback", "POST"],
      ["GET", "/v1/threads/t1/fork", "POST"],
      ["GET", "/v1/threads/t1/compact", "POST"],
      ["GET", "/v1/threads/t1/inject", "POST"],
      ["POST", "/v1/threads/t1/rollout", "GET"],
      ["POST", "/openapi.json", "GET"],
      // `import` is also a valid thread id, so both routes answer there.
      ["PUT", "/v1/threads/import", "POST, GET, PATCH, DELETE"],
    ];
    for (const [method, path, allow] of cases) {
      const res = await request(path, { method });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe(allow);
      expect(await problemOf(res)).toMatchObject({ code: "method_not_allowed" });
    }
    expect(fake.calls).toEqual([]);
  });
});
