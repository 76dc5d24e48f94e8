import { describe, expect, it } from "vitest";
import {
  readServerSentEvents,
  readThreadEvents,
  SpindleStreamError,
  type SseMessage,
  type ThreadEvent,
} from "../../../shared/client/index.ts";

/** A body delivered in exactly these pieces (strings, or raw bytes to split a character). */
function body(...chunks: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) {
        controller.enqueue(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
      }
      controller.close();
    },
  });
}

async function all<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const value of iterable) out.push(value);
  return out;
}

const messages = (...chunks: (string | Uint8Array)[]) =>
  all<SseMessage>(readServerSentEvents(body(...chunks)));

describe("readServerSentEvents (WHATWG HTML §9.2.6)", () => {
  it("reads event, id and data, with the default type `message`", async () => {
    expect(await messages("event: turn.started\nid: 1\ndata: {}\n\ndata: x\n\n")).toEqual([
      { event: "turn.started", data: "{}", lastEventId: "1" },
      // The last event id persists across events.
      { event: "message", data: "x", lastEventId: "1" },
    ]);
  });

  it("puts frames together across chunks, wherever they are cut", async () => {
    const text = "event: a\nid: 7\ndata: hello\n\nevent: b\ndata: world\n\n";
    const expected = [
      { event: "a", data: "hello", lastEventId: "7" },
      { event: "b", data: "world", lastEventId: "7" },
    ];
    for (let cut = 1; cut < text.length; cut++) {
      expect(await messages(text.slice(0, cut), text.slice(cut)), `cut at ${cut}`).toEqual(
        expected,
      );
    }
    expect(await messages(...text.split(""))).toEqual(expected);
  });

  it("a multi-byte character split between chunks is decoded whole", async () => {
    const bytes = new TextEncoder().encode("data: é€\n\n");
    expect(await messages(bytes.slice(0, 7), bytes.slice(7))).toEqual([
      { event: "message", data: "é€", lastEventId: "" },
    ]);
  });

  it("accepts CRLF, CR and LF line ends, a CRLF split between chunks too", async () => {
    expect(await messages("data: a\r\n\r\ndata: b\r\rdata: c\n\n")).toEqual([
      { event: "message", data: "a", lastEventId: "" },
      { event: "message", data: "b", lastEventId: "" },
      { event: "message", data: "c", lastEventId: "" },
    ]);
    // The LF after a chunk's last CR is the same line end, not an empty line.
    expect(await messages("data: a\r", "\ndata: b\r\n", "\r\n")).toEqual([
      { event: "message", data: "a\nb", lastEventId: "" },
    ]);
  });

  it("joins multi-line data with LF and takes one space after the colon", async () => {
    expect(await messages("data: one\ndata:two\ndata:  three\ndata\n\n")).toEqual([
      { event: "message", data: "one\ntwo\n three\n", lastEventId: "" },
    ]);
  });

  it("ignores comments, unknown fields, empty events and an unfinished last event", async () => {
    expect(
      await messages(
        ": keep-alive\n\n",
        ":\n",
        "foo: bar\ndata: x\n\n",
        "event: y\n\n",
        "data: cut",
      ),
    ).toEqual([{ event: "message", data: "x", lastEventId: "" }]);
  });

  it("keeps retry as the stream's reconnection time, and ignores an id with NUL", async () => {
    expect(await messages("retry: 3000\nid: 5\ndata: a\n\nretry: x\nid: 6\0\ndata: b\n\n")).toEqual(
      [
        { event: "message", data: "a", lastEventId: "5", retry: 3000 },
        { event: "message", data: "b", lastEventId: "5", retry: 3000 },
      ],
    );
  });

  it("leaving early cancels the body", async () => {
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.enqueue(new TextEncoder().encode("data: tick\n\n"));
      },
      cancel() {
        cancelled = true;
      },
    });
    for await (const message of readServerSentEvents(stream)) {
      expect(message.data).toBe("tick");
      break;
    }
    expect(cancelled).toBe(true);
  });
});

describe("readThreadEvents", () => {
  const started = { seq: 1, type: "turn.started", turn_id: "t1", data: {} };
  const delta = { seq: 2, type: "item.delta", turn_id: "t1", data: { item_id: "i", delta: "hi" } };

  it("yields the ThreadEvents of the data lines, skipping keep-alives", async () => {
    const events = await all<ThreadEvent>(
      readThreadEvents(
        body(
          `event: turn.started\nid: 1\ndata: ${JSON.stringify(started)}\n\n`,
          ": keep-alive\n\n",
          `event: item.delta\r\nid: 2\r\ndata: ${JSON.stringify(delta)}\r\n\r\n`,
        ),
      ),
    );
    expect(events).toEqual([started, delta]);
  });

  it("an error event throws its problem document, with the last event id to resume from", async () => {
    const problem = {
      type: "https://spindle.dev/problems/internal",
      title: "Internal error",
      status: 500,
      detail: "The event stream broke off.",
      code: "internal",
    };
    const seen: ThreadEvent[] = [];
    const failure = await (async () => {
      try {
        for await (const event of readThreadEvents(
          body(
            `event: turn.started\nid: 1\ndata: ${JSON.stringify(started)}\n\n`,
            `event: error\ndata: ${JSON.stringify(problem)}\n\n`,
          ),
        )) {
          seen.push(event);
        }
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(seen).toEqual([started]);
    expect(failure).toBeInstanceOf(SpindleStreamError);
    expect((failure as SpindleStreamError).problem).toEqual(problem);
    expect((failure as SpindleStreamError).lastEventId).toBe("1");
    expect((failure as SpindleStreamError).message).toBe("The event stream broke off.");
  });
});
