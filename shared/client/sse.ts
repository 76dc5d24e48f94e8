/**
 * A reader of `text/event-stream` bodies by the WHATWG HTML rules (§9.2.6 "Interpreting an event
 * stream"), for runtimes without `EventSource` and for requests `EventSource` cannot make (a POST
 * with a body, an `Authorization` header). It knows nothing of Spindle: `events.ts` gives the
 * messages their types.
 */

/** One dispatched event. */
export interface SseMessage {
  /** `event:`; `message` when the event named none. */
  event: string;
  /** The `data:` lines joined by `\n`. */
  data: string;
  /**
   * The last event id seen so far (`id:` persists across events, as the spec says), `""` when
   * none: what a reconnecting client sends as `Last-Event-ID`.
   */
  lastEventId: string;
  /** The reconnection time (ms) the stream's last `retry:` set, if any (it persists too). */
  retry?: number;
}

/**
 * The events of an SSE body, in order. An event is dispatched at its blank line; one the stream
 * ends in the middle of is dropped (the spec's rule: it may be cut short). Cancelling the
 * iteration (`break`, `return`) cancels the body.
 */
export async function* readServerSentEvents(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<SseMessage, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8"); // strips one leading BOM, as the spec asks
  const parser = new SseParser();
  let done = false;
  try {
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      yield* parser.push(decoder.decode(chunk.value, { stream: true }));
    }
    yield* parser.push(decoder.decode());
    done = true;
  } finally {
    // Left early (or failed): the server may stop writing; done, there is nothing to cancel.
    if (!done) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

/**
 * The line and field rules, fed text in pieces of any size: a line may end in CRLF, LF or CR,
 * and a CRLF may be split between two pieces.
 */
export class SseParser {
  #buffer = "";
  /** The last piece ended in CR: a LF starting the next one belongs to that line end. */
  #afterCr = false;
  #data: string[] = [];
  #event = "";
  #lastEventId = "";
  #retry: number | undefined;

  /** The events completed by `text`. */
  *push(text: string): Generator<SseMessage, void, undefined> {
    let piece = text;
    if (this.#afterCr && piece.startsWith("\n")) piece = piece.slice(1);
    this.#afterCr = false;
    this.#buffer += piece;
    for (;;) {
      const end = this.#buffer.search(/[\r\n]/);
      if (end < 0) return;
      const line = this.#buffer.slice(0, end);
      let rest = end + 1;
      if (this.#buffer[end] === "\r") {
        if (rest === this.#buffer.length) this.#afterCr = true;
        else if (this.#buffer[rest] === "\n") rest += 1;
      }
      this.#buffer = this.#buffer.slice(rest);
      const message = this.#line(line);
      if (message !== undefined) yield message;
    }
  }

  #line(line: string): SseMessage | undefined {
    if (line === "") return this.#dispatch();
    if (line.startsWith(":")) return undefined; // a comment, e.g. `: keep-alive`
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.#event = value;
    else if (field === "data") this.#data.push(value);
    // An id with NUL is ignored (it could not be sent back in a header).
    else if (field === "id" && !value.includes("\0")) this.#lastEventId = value;
    else if (field === "retry" && /^[0-9]+$/.test(value)) this.#retry = Number(value);
    // Any other field is ignored.
    return undefined;
  }

  #dispatch(): SseMessage | undefined {
    const data = this.#data;
    const event = this.#event;
    this.#data = [];
    this.#event = "";
    // No data: nothing is dispatched (the id, set or not, still counts from here on).
    if (data.length === 0) return undefined;
    const message: SseMessage = {
      event: event === "" ? "message" : event,
      data: data.join("\n"),
      lastEventId: this.#lastEventId,
    };
    if (this.#retry !== undefined) message.retry = this.#retry;
    return message;
  }
}
