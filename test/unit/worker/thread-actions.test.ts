import { describe, expect, it } from "vitest";
import type { ThreadEvent } from "../../../shared/api/index.ts";
import { ndjson, problemOf, setup, thread, turn, turnEvents } from "./fake-thread.ts";

const anyMessage = expect.any(String);

function invalid(where: string, errors: { path: string; message: unknown }[]) {
  return {
    type: "/problems/invalid_request",
    title: "The request is invalid",
    status: 400,
    detail: `The ${where} is invalid.`,
    code: "invalid_request",
    errors,
  };
}

const userInput = (text: string) => [
  { type: "message", role: "user", content: [{ type: "input_text", text }] },
];

/** A fake with thread t1 of tenant A, and the usual request helpers. */
function withThread() {
  const context = setup();
  context.fake.threads.set("A:t1", thread("t1"));
  return context;
}

describe("POST …/turns/{turn}/outputs", () => {
  const output = { type: "function_call_output", call_id: "call_1", output: "42" };

  it("passes the outputs to the DO and answers the turn after them", async () => {
    const { json, fake } = withThread();
    const items = [
      output,
      {
        type: "function_call_output",
        call_id: "call_2",
        output: [{ type: "input_image", image_url: "https://example.com/a.png" }],
      },
    ];
    const res = await json("/v1/threads/t1/turns/u1/outputs", { items });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(turn("u1", "t1", "completed"));
    expect(fake.calls).toEqual([
      { name: "A:t1", method: "submitOutputs", args: ["u1", { items }] },
    ]);
  });

  it("stream: true resumes the turn as server-sent events", async () => {
    const { json, fake } = withThread();
    const [, , , completed] = turnEvents("u1", "t1");
    fake.eventStream = () => ndjson([completed]);
    const res = await json("/v1/threads/t1/turns/u1/outputs", { items: [output], stream: true });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(await res.text()).toBe(
      `event: turn.completed\nid: 4\ndata: ${JSON.stringify(completed as ThreadEvent)}\n\n`,
    );
    expect(fake.calls).toEqual([
      { name: "A:t1", method: "streamOutputs", args: ["u1", { items: [output] }] },
    ]);
  });

  it("rejects an empty list, other item types, a repeated call_id and unknown fields", async () => {
    const { json, fake } = withThread();
    const approval = {
      type: "mcp_approval_response",
      approval_request_id: "mcpr_1",
      approve: true,
    };
    const cases: [unknown, { path: string; message: unknown }[]][] = [
      [{ items: [] }, [{ path: "/items", message: anyMessage }]],
      [{}, [{ path: "/items", message: anyMessage }]],
      [
        { items: [{ ...output, type: "custom_tool_call_output" }] },
        [{ path: "/items/0/type", message: anyMessage }],
      ],
      [
        { items: [output, { ...output, output: "again" }] },
        [
          {
            path: "/items/1/call_id",
            message: "This call_id already has an output in this request",
          },
        ],
      ],
      [{ items: [{ ...output, output: 42 }] }, [{ path: "/items/0/output", message: anyMessage }]],
      [
        { items: [{ ...output, extra: 1 }] },
        [{ path: "/items/0/extra", message: "Unknown field" }],
      ],
      [
        { items: [approval, { ...approval, approve: false }] },
        [
          {
            path: "/items/1/approval_request_id",
            message: "This approval_request_id already has an answer in this request",
          },
        ],
      ],
      [
        { items: [{ type: "mcp_approval_response", approval_request_id: "mcpr_1" }] },
        [{ path: "/items/0/approve", message: anyMessage }],
      ],
    ];
    for (const [body, errors] of cases) {
      const res = await json("/v1/threads/t1/turns/u1/outputs", body);
      expect(await problemOf(res)).toEqual(invalid("request body", errors));
    }
    expect(fake.calls).toEqual([]);
  });

  it("the DO's no_pending_calls and unknown_call_id reach the client with their paths", async () => {
    const { json, fake } = withThread();
    fake.failures.set("submitOutputs", { code: "no_pending_calls", detail: "Nothing pending." });
    expect(
      await problemOf(await json("/v1/threads/t1/turns/u1/outputs", { items: [output] })),
    ).toMatchObject({ status: 409, code: "no_pending_calls" });
    const errors = [{ path: "/items/0/call_id", message: "not pending" }];
    fake.failures.set("submitOutputs", { code: "unknown_call_id", detail: "No.", errors });
    expect(
      await problemOf(await json("/v1/threads/t1/turns/u1/outputs", { items: [output] })),
    ).toMatchObject({ status: 400, code: "unknown_call_id", errors });
  });
});

describe("POST …/turns/{turn}/steer and …/interrupt", () => {
  it("steer sends the input as its content and answers the running turn", async () => {
    const { json, fake } = withThread();
    const res = await json("/v1/threads/t1/turns/u1/steer", { input: "also this" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(turn("u1", "t1", "in_progress"));
    expect(fake.calls).toEqual([
      {
        name: "A:t1",
        method: "steer",
        args: ["u1", { content: [{ type: "input_text", text: "also this" }] }],
      },
    ]);
  });

  it("steer needs input, and its 409s come from the DO", async () => {
    const { json, fake } = withThread();
    expect(await problemOf(await json("/v1/threads/t1/turns/u1/steer", {}))).toEqual(
      invalid("request body", [{ path: "/input", message: anyMessage }]),
    );
    for (const code of ["turn_mismatch", "turn_not_steerable"] as const) {
      fake.failures.set("steer", { code, detail: code });
      const res = await json("/v1/threads/t1/turns/u1/steer", { input: "x" });
      expect(await problemOf(res)).toMatchObject({ status: 409, code });
    }
  });

  it("interrupt takes no body, or an empty object, and answers the ended turn", async () => {
    const { json, request, fake } = withThread();
    const bare = await request("/v1/threads/t1/turns/u1/interrupt", { method: "POST" });
    expect(await bare.json()).toEqual(turn("u1", "t1", "interrupted"));
    expect((await json("/v1/threads/t1/turns/u1/interrupt", {})).status).toBe(200);
    expect(
      await problemOf(await json("/v1/threads/t1/turns/u1/interrupt", { reason: "x" })),
    ).toEqual(invalid("request body", [{ path: "/reason", message: "Unknown field" }]));
    expect(fake.calls).toEqual([
      { name: "A:t1", method: "interrupt", args: ["u1"] },
      { name: "A:t1", method: "interrupt", args: ["u1"] },
    ]);
  });

  it("a malformed turn id is reported before the DO is called", async () => {
    const { json, fake } = withThread();
    const res = await json("/v1/threads/t1/turns/u.1/steer", { input: "x" });
    expect(await problemOf(res)).toEqual(
      invalid("path", [{ path: "turn", message: "turn ids are 1-64 characters of [A-Za-z0-9_-]" }]),
    );
    expect(fake.calls).toEqual([]);
  });
});

describe("GET /v1/threads/{id}/events", () => {
  it("Last-Event-ID is passed to the DO as `after`, and wins over ?after=", async () => {
    const { request, fake } = withThread();
    await request("/v1/threads/t1/events?after=3", { headers: { "last-event-id": "7" } });
    await request("/v1/threads/t1/events?after=3");
    await request("/v1/threads/t1/events", { headers: { "Last-Event-ID": "0" } });
    await request("/v1/threads/t1/events");
    expect(fake.calls.map((c) => [c.method, ...c.args])).toEqual([
      ["events", { after: 7 }],
      ["events", { after: 3 }],
      ["events", { after: 0 }],
      ["events", {}],
    ]);
  });

  it("replays then tails across turns as SSE, with no terminal cut-off", async () => {
    const { request, fake } = withThread();
    const events = [
      ...turnEvents("u1", "t1"),
      ...turnEvents("u2", "t1").map((e) => ({ ...e, seq: e.seq + 4 })),
    ];
    fake.eventStream = () => ndjson(events);
    const res = await request("/v1/threads/t1/events", { headers: { "last-event-id": "0" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const text = await res.text();
    expect(text.match(/^id: \d+$/gm)).toEqual(events.map((e) => `id: ${e.seq}`));
    expect(text).not.toContain("event: error");
  });

  it("a sequence number that is not decimal digits is a 400 naming its parameter", async () => {
    const { request, fake } = withThread();
    for (const bad of ["-1", "1e3", "0x10", "", "abc", "1234567890123456"]) {
      const header = await request("/v1/threads/t1/events", { headers: { "last-event-id": bad } });
      // An empty header counts as one; a client that has seen no event sends none.
      expect(await problemOf(header)).toEqual(
        invalid("headers", [{ path: "last-event-id", message: anyMessage }]),
      );
      const query = await request(`/v1/threads/t1/events?after=${bad}`);
      expect(await problemOf(query)).toEqual(
        invalid("query", [{ path: "after", message: anyMessage }]),
      );
    }
    expect(fake.calls).toEqual([]);
  });

  it("events the DO no longer retains are 410 event_expired", async () => {
    const { request, fake } = withThread();
    fake.failures.set("events", { code: "event_expired", detail: "Events up to 90 are gone." });
    const res = await request("/v1/threads/t1/events?after=2");
    expect(res.status).toBe(410);
    expect(await problemOf(res)).toEqual({
      type: "/problems/event_expired",
      title: "The requested events are no longer retained",
      status: 410,
      detail: "Events up to 90 are gone.",
      code: "event_expired",
    });
  });
});

describe("rollback, compact, inject", () => {
  it("rollback passes a whole number of turns, at least 1", async () => {
    const { json, fake } = withThread();
    const res = await json("/v1/threads/t1/rollback", { turns: 2 });
    expect(await res.json()).toEqual(thread("t1"));
    for (const turns of [0, -1, 1.5, "2", null]) {
      const bad = await json("/v1/threads/t1/rollback", { turns });
      expect(await problemOf(bad)).toEqual(
        invalid("request body", [{ path: "/turns", message: anyMessage }]),
      );
    }
    expect(await problemOf(await json("/v1/threads/t1/rollback", {}))).toEqual(
      invalid("request body", [{ path: "/turns", message: anyMessage }]),
    );
    expect(fake.calls).toEqual([{ name: "A:t1", method: "rollback", args: [{ turns: 2 }] }]);
  });

  it("rollback of a busy thread is 409 thread_busy", async () => {
    const { json, fake } = withThread();
    fake.failures.set("rollback", { code: "thread_busy", detail: "A turn is running." });
    expect(await problemOf(await json("/v1/threads/t1/rollback", { turns: 1 }))).toMatchObject({
      status: 409,
      code: "thread_busy",
    });
  });

  it("compact answers the compaction turn", async () => {
    const { request, fake } = withThread();
    const res = await request("/v1/threads/t1/compact", { method: "POST" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(turn("turn_c", "t1", "completed"));
    expect(fake.calls).toEqual([{ name: "A:t1", method: "compact", args: [{}] }]);
  });

  it("inject takes text as one user message, or user message items", async () => {
    const { json, fake } = withThread();
    const items = [
      ...userInput("first"),
      {
        type: "message",
        role: "user",
        content: [{ type: "input_image", image_url: "data:image/png;base64,AAAA" }],
      },
    ];
    expect((await json("/v1/threads/t1/inject", { text: "remember this" })).status).toBe(200);
    expect(await (await json("/v1/threads/t1/inject", { items })).json()).toEqual(thread("t1"));
    expect(fake.calls.map((c) => c.args)).toEqual([
      [{ items: userInput("remember this") }],
      [{ items }],
    ]);
  });

  it("inject needs exactly one of text and items, and only user messages", async () => {
    const { json, fake } = withThread();
    const exactlyOne = [{ path: "", message: "Send exactly one of `text` or `items`" }];
    expect(await problemOf(await json("/v1/threads/t1/inject", {}))).toEqual(
      invalid("request body", exactlyOne),
    );
    expect(
      await problemOf(await json("/v1/threads/t1/inject", { text: "a", items: userInput("b") })),
    ).toEqual(invalid("request body", exactlyOne));
    const assistant = [
      { type: "message", role: "assistant", content: [{ type: "input_text", text: "x" }] },
    ];
    expect(await problemOf(await json("/v1/threads/t1/inject", { items: assistant }))).toEqual(
      invalid("request body", [{ path: "/items/0/role", message: anyMessage }]),
    );
    expect(await problemOf(await json("/v1/threads/t1/inject", { text: "" }))).toEqual(
      invalid("request body", [{ path: "/text", message: anyMessage }]),
    );
    expect(fake.calls).toEqual([]);
  });
});
