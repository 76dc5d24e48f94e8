/**
 * An incremental `text/event-stream` parser (WHATWG HTML, "Server-sent events", §9.2.6
 * "Interpreting an event stream"). Bytes may arrive split anywhere: inside a UTF-8 sequence,
 * inside a line, or between the `\r` and `\n` of a CRLF.
 */

/** One dispatched event. `event` is `message` when the stream named none. */
export interface SseEvent {
  event: string;
  data: string;
  /** The last event id seen so far, when the stream set one. */
  id?: string;
}

const LF = 0x0a;
const CR = 0x0d;

export class SseParser {
  readonly #decoder = new TextDecoder("utf-8");
  /** Text of the line being read (no terminator yet). */
  #line = "";
  /** The previous chunk ended in `\r`: a `\n` opening the next chunk belongs to that CRLF. */
  #afterCr = false;
  #sawFirstLine = false;
  #eventType = "";
  #data: string[] = [];
  #lastEventId: string | undefined;

  /** Feeds bytes (or already decoded text); returns the events they completed, in order. */
  push(chunk: Uint8Array | string): SseEvent[] {
    const text = typeof chunk === "string" ? chunk : this.#decoder.decode(chunk, { stream: true });
    return this.#consume(text);
  }

  /**
   * Ends the stream. A trailing event that no blank line terminated is discarded, as the spec
   * requires, so a connection cut in the middle of an event never yields half of it.
   */
  end(): SseEvent[] {
    const rest = this.#decoder.decode();
    const events = rest ? this.#consume(rest) : [];
    this.#line = "";
    this.#eventType = "";
    this.#data = [];
    return events;
  }

  #consume(text: string): SseEvent[] {
    const events: SseEvent[] = [];
    // A chunk that decodes to nothing (half a UTF-8 sequence) must not forget a pending `\r`.
    if (text === "") return events;
    let start = 0;
    if (this.#afterCr && text.charCodeAt(0) === LF) start = 1;
    this.#afterCr = false;
    for (let i = start; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code !== LF && code !== CR) continue;
      this.#line += text.slice(start, i);
      this.#endLine(events);
      if (code === CR) {
        if (i + 1 === text.length) this.#afterCr = true;
        else if (text.charCodeAt(i + 1) === LF) i += 1;
      }
      start = i + 1;
    }
    this.#line += text.slice(start);
    return events;
  }

  #endLine(events: SseEvent[]): void {
    let line = this.#line;
    this.#line = "";
    if (!this.#sawFirstLine) {
      this.#sawFirstLine = true;
      // A leading byte order mark is not part of the first field name.
      if (line.charCodeAt(0) === 0xfeff) line = line.slice(1);
    }
    if (line === "") {
      this.#dispatch(events);
      return;
    }
    if (line.startsWith(":")) return; // comment, e.g. a keep-alive
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        this.#eventType = value;
        break;
      case "data":
        this.#data.push(value);
        break;
      case "id":
        if (!value.includes("\0")) this.#lastEventId = value;
        break;
      default:
        // `retry` only matters to reconnecting clients; unknown fields are ignored by spec.
        break;
    }
  }

  #dispatch(events: SseEvent[]): void {
    const type = this.#eventType;
    const data = this.#data;
    this.#eventType = "";
    this.#data = [];
    // An event without data lines is not dispatched (spec: "If the data buffer is empty…").
    if (data.length === 0) return;
    const event: SseEvent = { event: type || "message", data: data.join("\n") };
    if (this.#lastEventId !== undefined) event.id = this.#lastEventId;
    events.push(event);
  }
}
