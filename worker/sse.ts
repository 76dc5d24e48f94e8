/**
 * Server-sent events (WHATWG HTML §9.2) from the Thread DO's NDJSON event streams, in the order
 * style §8 asks for: the Response goes out at once and events are framed as they are read; a
 * comment keeps an idle connection open; a turn's stream ends with its terminal event, or with an
 * explicit `error` event when the stream breaks; a client that leaves only stops the reading.
 */

import { isTerminalEventType, ThreadEventEnvelopeSchema } from "../shared/api/index.ts";
import { ApiError, toApiError } from "./errors.ts";

/**
 * Headers of every SSE response. `no-transform` and `X-Accel-Buffering: no` keep proxies from
 * compressing or buffering the stream; `wrangler dev` buffers a streamed body unless its
 * `Content-Encoding` is `identity`.
 */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache, no-transform",
  "X-Accel-Buffering": "no",
  "Content-Encoding": "identity",
};

/** Silence longer than this gets a comment line, so proxies and clients keep the connection. */
export const keepAliveIntervalMs = 15_000;

/** An SSE comment: clients ignore it (WHATWG HTML §9.2.6, lines starting with `:`). */
export const KEEP_ALIVE_FRAME = ": keep-alive\n\n";

export interface ServerSentEventsOptions {
  /**
   * A turn's stream. The Thread DO ends it after the addressed turn's terminal event (an automatic
   * compaction before the turn streams first, with a terminal event of its own), so an upstream
   * end right after any other event is a failure. Otherwise (the thread's tail) run until the
   * upstream ends or the client leaves.
   */
  endAfterTerminal: boolean;
  keepAliveMs?: number;
  /** Told about a failure after the response started; the client gets it as an `error` event. */
  onError?: (error: ApiError) => void;
  /**
   * The frames of one NDJSON line, and whether it ended the turn; defaults to `frameEvent`. The
   * OpenAI surface translates thread events into Responses events here.
   */
  frame?: (line: string) => { frame: string; terminal: boolean };
  /** The `error` event's frame; defaults to a problem document. */
  errorFrame?: (error: ApiError) => string;
  /** Called once when the stream is done: ended, failed or left by the client. */
  onFinish?: () => void;
}

/**
 * Frames an NDJSON `ThreadEvent` stream as SSE: `event:` is the event's `type`, `id:` its `seq`
 * and `data:` the event's JSON (one line). A failure after the start (the upstream breaks, a line
 * that is not an event, a turn's stream that ends early) is sent as `event: error` whose data is
 * a problem document, with no `id:` so `Last-Event-ID` stays on the last real event, and the
 * stream closes. Cancelling the result (the client disconnected) cancels the upstream read only:
 * per the RPC contract that detaches the reader and never stops the turn.
 */
export function serverSentEvents(
  upstream: ReadableStream<Uint8Array>,
  options: ServerSentEventsOptions,
): ReadableStream<Uint8Array> {
  const keepAliveMs = options.keepAliveMs ?? keepAliveIntervalMs;
  const encoder = new TextEncoder();
  const reader = upstream.getReader();
  const lines = ndjsonLines(reader);
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let finished = false;
  let lastWasTerminal = false;

  const write = (frame: string) => {
    controller.enqueue(encoder.encode(frame));
    armKeepAlive();
  };
  function armKeepAlive() {
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (!finished) write(KEEP_ALIVE_FRAME);
    }, keepAliveMs);
  }
  // Done reading: stop the timer and let go of the upstream (a no-op once it has ended).
  const frameLine = options.frame ?? frameEvent;
  const errorFrame =
    options.errorFrame ??
    ((error: ApiError) => `event: error\ndata: ${JSON.stringify(error.toProblem())}\n\n`);
  const stop = (reason?: unknown) => {
    if (!finished) options.onFinish?.();
    finished = true;
    clearTimeout(timer);
    return reader.cancel(reason).catch(() => {});
  };
  const finish = () => {
    void stop();
    controller.close();
  };
  const fail = (thrown: unknown) => {
    const error = toApiError(thrown);
    options.onError?.(error);
    write(errorFrame(error));
    finish();
  };

  return new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
      armKeepAlive();
    },
    // Reads until a line makes a frame: a pull that enqueues nothing is not called again.
    async pull() {
      for (;;) {
        let next: IteratorResult<string>;
        try {
          next = await lines.next();
        } catch (cause) {
          if (!finished) fail(new ApiError("internal", BROKEN_STREAM_DETAIL, { cause }));
          return;
        }
        // The client left while the read was pending.
        if (finished) return;
        if (next.done) {
          if (options.endAfterTerminal && !lastWasTerminal) {
            fail(new ApiError("internal", BROKEN_STREAM_DETAIL));
          } else finish();
          return;
        }
        let event: { frame: string; terminal: boolean };
        try {
          event = frameLine(next.value);
        } catch (thrown) {
          fail(thrown);
          return;
        }
        lastWasTerminal = event.terminal;
        if (event.frame !== "") {
          write(event.frame);
          return;
        }
      }
    },
    cancel(reason) {
      return stop(reason);
    },
  });
}

const BROKEN_STREAM_DETAIL =
  "The event stream broke off. Resume with GET /v1/threads/{id}/events and Last-Event-ID.";

/** One NDJSON line as an SSE frame; throws `internal` for a line that is not a thread event. */
export function frameEvent(line: string): { frame: string; terminal: boolean } {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (cause) {
    throw new ApiError("internal", UNREADABLE_EVENT_DETAIL, { cause });
  }
  const envelope = ThreadEventEnvelopeSchema.safeParse(value);
  if (!envelope.success) {
    throw new ApiError("internal", UNREADABLE_EVENT_DETAIL, { cause: envelope.error });
  }
  const { type, seq } = envelope.data;
  // A bare CR is JSON whitespace but ends an SSE line; such a line is re-serialized.
  const data = line.includes("\r") ? JSON.stringify(value) : line;
  return {
    frame: `event: ${type}\nid: ${seq}\ndata: ${data}\n\n`,
    terminal: isTerminalEventType(type),
  };
}

const UNREADABLE_EVENT_DETAIL = "The thread sent an event this server cannot read.";

/**
 * The non-blank lines of a UTF-8 NDJSON stream, without their `\n` or `\r\n`. A line longer than
 * a chunk (a multi-megabyte event) is kept as chunks and joined once it ends, so reading it stays
 * linear in its length.
 */
export async function* ndjsonLines(reader: ReadableStreamDefaultReader<Uint8Array>) {
  const decoder = new TextDecoder();
  /** The start of the current line: text received since its last `\n`. */
  let partial: string[] = [];
  const lineOf = (text: string) => text.replace(/\r$/, "");
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const text = decoder.decode(value, { stream: true });
    let start = 0;
    for (let end = text.indexOf("\n"); end !== -1; end = text.indexOf("\n", start)) {
      partial.push(text.slice(start, end));
      const line = lineOf(partial.join(""));
      partial = [];
      start = end + 1;
      if (line.trim() !== "") yield line;
    }
    if (start < text.length) partial.push(text.slice(start));
  }
  partial.push(decoder.decode());
  const last = lineOf(partial.join(""));
  if (last.trim() !== "") yield last;
}
