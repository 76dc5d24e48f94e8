import { afterEach, describe, expect, it, vi } from "vitest";
import type { ThreadEvent } from "../../../shared/api/index.ts";
import { acceptsEventStream } from "../../../worker/app.ts";
import { frameEvent, serverSentEvents } from "../../../worker/sse.ts";
import {
  controlledStream,
  ndjson,
  problemOf,
  setup,
  textStream,
  thread,
  turn,
  turnEvents,
} from "./fake-thread.ts";

/** The SSE frame WHATWG clients parse into `{type, lastEventId, data}` for this event. */
const frame = (event: ThreadEvent) =>
  `event: ${event.type}\nid: ${event.seq}\ndata: ${JSON.stringify(event)}\n\n`;

const sseHeaders = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no",
  "content-encoding": "identity",
};

function headersOf(res: Response, names: string[]): Record<string, string | null> {
  return Object.fromEntries(names.map((name) => [name, res.headers.get(name)]));
}

/** Reads chunks in the background, so a test can look at what has arrived so far. */
function collect(stream: ReadableStream<Uint8Array>) {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  const chunks: string[] = [];
  const done = (async () => {
    for (;;) {
      const { done: end, value } = await reader.read();
      if (end) return;
      chunks.push(decoder.decode(value));
    }
  })();
  return { chunks, text: () => chunks.join(""), done, reader };
}

/** The `error` event that ends a broken stream, with the problem it carries. */
function errorFrame(detail: string) {
  const problem = {
    type: "/problems/internal",
    title: "Internal error",
    status: 500,
    detail,
    code: "internal",
  };
  return `event: error\ndata: ${JSON.stringify(problem)}\n\n`;
}
const brokeOff =
  "The event stream broke off. Resume with GET /v1/threads/{id}/events and Last-Event-ID.";
const unreadable = "The thread sent an event this server cannot read.";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("POST /v1/threads/{id}/turns as server-sent events", () => {
  it("stream: true answers each event as an SSE frame: event is the type, id the seq, data the JSON", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await json("/v1/threads/t1/turns", { input: "hi", stream: true });
    expect(res.status).toBe(200);
    expect(headersOf(res, Object.keys(sseHeaders))).toEqual(sseHeaders);
    expect(await res.text()).toBe(turnEvents("turn_1", "t1").map(frame).join(""));
    expect(fake.calls).toEqual([
      {
        name: "A:t1",
        method: "streamTurn",
        args: [
          {
            content: [{ type: "input_text", text: "hi" }],
            onBusy: "reject",
          },
        ],
      },
    ]);
  });

  it("Accept: text/event-stream asks for the stream without stream: true", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await json(
      "/v1/threads/t1/turns",
      { input: "hi", on_busy: "queue" },
      { headers: { accept: "application/json;q=0.5, text/event-stream" } },
    );
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(fake.calls[0]?.args).toEqual([
      { content: [{ type: "input_text", text: "hi" }], onBusy: "queue" } satisfies Record<
        string,
        unknown
      >,
    ]);
    expect(fake.calls.map((c) => c.method)).toEqual(["streamTurn"]);
  });

  it("a failure before the first event is a problem document, not a stream", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    fake.failures.set("streamTurn", { code: "thread_busy", detail: "Turn u0 is running." });
    const res = await json("/v1/threads/t1/turns", { input: "hi", stream: true });
    expect(res.status).toBe(409);
    expect(await problemOf(res)).toMatchObject({
      code: "thread_busy",
      detail: "Turn u0 is running.",
    });
  });

  it("the stream runs to the end of the DO's, which ends after the turn's own terminal event", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const upstream = controlledStream();
    fake.eventStream = () => upstream.stream;
    // An automatic compaction ran first, as a turn of its own with its own terminal event.
    const [compactionStarted, , , compacted] = turnEvents("c1", "t1");
    const [started, , , completed] = turnEvents("u1", "t1").map((e) => ({ ...e, seq: e.seq + 4 }));
    const sent = [compactionStarted, compacted, started, completed];
    for (const event of sent) upstream.push(event);
    upstream.close();
    const res = await json("/v1/threads/t1/turns", { input: "hi", stream: true });
    expect(await res.text()).toBe(sent.map((e) => frame(e as ThreadEvent)).join(""));
    expect(fake.calls.map((c) => c.method)).toEqual(["streamTurn"]);
  });

  it("a client that disconnects cancels the read and calls nothing that stops the turn", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const upstream = controlledStream();
    fake.eventStream = () => upstream.stream;
    const [started] = turnEvents("u1", "t1");
    upstream.push(started);
    const res = await json("/v1/threads/t1/turns", { input: "hi", stream: true });
    const reader = res.body?.getReader();
    const first = await reader?.read();
    expect(new TextDecoder().decode(first?.value)).toBe(frame(started as ThreadEvent));
    // The next read is pending on the DO when the client goes away.
    await reader?.cancel("client left");
    expect(upstream.state).toEqual({ cancelled: true, cancelReason: "client left" });
    expect(fake.calls.map((c) => c.method)).toEqual(["streamTurn"]);
  });

  it("a turn stream that ends before its terminal event ends with an error event without id", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const [started] = turnEvents("u1", "t1");
    fake.eventStream = () => ndjson([started]);
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    const res = await json("/v1/threads/t1/turns", { input: "hi", stream: true });
    expect(await res.text()).toBe(frame(started as ThreadEvent) + errorFrame(brokeOff));
    expect(log).toHaveBeenCalledOnce();
  });

  it("a DO stream that errors mid-turn ends with an error event that hides the cause", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const upstream = controlledStream();
    fake.eventStream = () => upstream.stream;
    const [started] = turnEvents("u1", "t1");
    upstream.push(started);
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    const res = await json("/v1/threads/t1/turns", { input: "hi", stream: true });
    const out = collect(res.body as ReadableStream<Uint8Array>);
    await vi.waitFor(() => expect(out.chunks).toHaveLength(1));
    upstream.error(new Error("socket reset by peer 10.0.0.7"));
    await out.done;
    const text = out.text();
    expect(text).toBe(frame(started as ThreadEvent) + errorFrame(brokeOff));
    expect(text).not.toContain("10.0.0.7");
    expect(JSON.parse(String(log.mock.calls[0]?.[0]))).toMatchObject({
      event: "stream.failed",
      error: "Error: socket reset by peer 10.0.0.7",
    });
  });

  it("a line that is not a thread event ends the stream with an error event", async () => {
    for (const line of ["{not json", '{"seq":"1","type":"turn.started"}', '{"seq":1,"type":"x"}']) {
      const { json, fake } = setup();
      fake.threads.set("A:t1", thread("t1"));
      fake.eventStream = () => textStream(`${line}\n`);
      vi.spyOn(console, "error").mockImplementation(() => {});
      const res = await json("/v1/threads/t1/turns", { input: "hi", stream: true });
      expect(await res.text()).toBe(errorFrame(unreadable));
    }
  });
});

describe("serverSentEvents", () => {
  const [started, item, delta, completed] = turnEvents("u1", "t1") as [
    ThreadEvent,
    ThreadEvent,
    ThreadEvent,
    ThreadEvent,
  ];

  it("sends a keep-alive comment after 15 s of silence, counted from the last frame", async () => {
    vi.useFakeTimers();
    const upstream = controlledStream();
    const out = collect(serverSentEvents(upstream.stream, { endAfterTerminal: true }));
    await vi.advanceTimersByTimeAsync(14_999);
    expect(out.chunks).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(out.chunks).toEqual([": keep-alive\n\n"]);
    await vi.advanceTimersByTimeAsync(5_000);
    upstream.push(started);
    await vi.advanceTimersByTimeAsync(14_999);
    expect(out.chunks).toEqual([": keep-alive\n\n", frame(started)]);
    await vi.advanceTimersByTimeAsync(1);
    await vi.advanceTimersByTimeAsync(15_000);
    expect(out.chunks).toEqual([
      ": keep-alive\n\n",
      frame(started),
      ": keep-alive\n\n",
      ": keep-alive\n\n",
    ]);
    upstream.push(completed);
    upstream.close();
    await out.done;
    expect(out.chunks.at(-1)).toBe(frame(completed));
    // Closed: no timer is left behind.
    expect(vi.getTimerCount()).toBe(0);
  });

  it("stops the keep-alive timer when the client leaves", async () => {
    vi.useFakeTimers();
    const upstream = controlledStream();
    const out = collect(serverSentEvents(upstream.stream, { endAfterTerminal: false }));
    await vi.advanceTimersByTimeAsync(15_000);
    await out.reader.cancel();
    expect(vi.getTimerCount()).toBe(0);
    expect(upstream.state.cancelled).toBe(true);
  });

  it("the thread's tail passes terminal events on and closes when the DO's stream ends", async () => {
    const events = [
      ...turnEvents("u1", "t1"),
      ...turnEvents("u2", "t1").map((e, i) => ({ ...e, seq: 10 + i })),
    ];
    const out = collect(serverSentEvents(ndjson(events), { endAfterTerminal: false }));
    await out.done;
    expect(out.text()).toBe(events.map((e) => frame(e as ThreadEvent)).join(""));
  });

  it("frames lines split across chunks, inside a UTF-8 character, with CRLF endings", async () => {
    const upstream = controlledStream();
    const event = { ...delta, data: { delta: "é€😀" } } as ThreadEvent;
    const bytes = new TextEncoder().encode(
      `\r\n${JSON.stringify(item)}\r\n${JSON.stringify(event)}\n`,
    );
    const out = collect(serverSentEvents(upstream.stream, { endAfterTerminal: false }));
    // Cut every two bytes, so multi-byte characters and the CRLF are split.
    for (let i = 0; i < bytes.length; i += 2) upstream.pushBytes(bytes.slice(i, i + 2));
    upstream.close();
    await out.done;
    expect(out.text()).toBe(frame(item) + frame(event));
  });

  it("a last line without a newline is still an event", async () => {
    const out = collect(
      serverSentEvents(textStream(JSON.stringify(completed)), { endAfterTerminal: true }),
    );
    await out.done;
    expect(out.text()).toBe(frame(completed));
  });

  it("an event line with a bare CR (JSON whitespace) is sent on one data line", () => {
    const line = `{"seq":3,\r"type":"item.delta","turn_id":"u1","data":{"delta":"a\\rb"}}`;
    expect(frameEvent(line)).toEqual({
      frame: `event: item.delta\nid: 3\ndata: {"seq":3,"type":"item.delta","turn_id":"u1","data":{"delta":"a\\rb"}}\n\n`,
      terminal: false,
    });
  });

  it("every turn.* event but turn.started is terminal", () => {
    const types = turnEvents("u1", "t1").map((e) => e.type);
    const terminal = (type: string) =>
      frameEvent(
        JSON.stringify({ seq: 1, type, turn_id: "u1", data: turn("u1", "t1", "completed") }),
      ).terminal;
    expect(types.filter(terminal)).toEqual(["turn.completed"]);
    expect(
      ["turn.requires_action", "turn.interrupted", "turn.failed", "token_count"].map(terminal),
    ).toEqual([true, true, true, false]);
  });
});

describe("acceptsEventStream", () => {
  it("is true only when Accept names text/event-stream with a non-zero weight", () => {
    const cases: [string | undefined, boolean][] = [
      [undefined, false],
      ["application/json", false],
      ["*/*", false],
      ["text/*", false],
      ["text/event-stream", true],
      ["Text/Event-Stream", true],
      ["application/json, text/event-stream;q=0.1", true],
      ["text/event-stream;q=0", false],
      ["text/event-stream; q=0.0", false],
    ];
    expect(cases.map(([accept]) => acceptsEventStream(accept))).toEqual(
      cases.map(([, want]) => want),
    );
  });
});
