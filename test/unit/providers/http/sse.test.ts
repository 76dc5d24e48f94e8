import { describe, expect, it } from "vitest";
import { type SseEvent, SseParser } from "../../../../shared/providers/http/sse.ts";

// Covers every framing rule the Responses stream (or a proxy in front of it) may use: a BOM,
// CRLF / LF / lone CR line ends, comments, multi-line data, `field:value` without a space,
// fields without a value, an `id`, an event that has no data, a multi-byte UTF-8 payload, and a
// trailing event that no blank line ends.
const FIXTURE =
  "\uFEFF: keep-alive\r\n" +
  "event: response.output_text.delta\r\n" +
  'data: {"delta":"h\u00e9llo \u2713 \u{1F600}"}\r\n' +
  "\r\n" +
  "data: first line\n" +
  "data:second line\n" +
  "data\n" +
  "\n" +
  "id: 7\r" +
  "event: named\r" +
  "data: after lone CRs\r" +
  "\r" +
  "event: no-data\n" +
  "retry: 1000\n" +
  "\n" +
  ":comment without space\n" +
  "unknown: field\n" +
  "data:  two spaces\n" +
  "\n" +
  "data: cut before its blank line";

const EXPECTED: SseEvent[] = [
  { event: "response.output_text.delta", data: '{"delta":"h\u00e9llo \u2713 \u{1F600}"}' },
  { event: "message", data: "first line\nsecond line\n" },
  { event: "named", data: "after lone CRs", id: "7" },
  { event: "message", data: " two spaces", id: "7" },
];

const BYTES = new TextEncoder().encode(FIXTURE);

function parseChunks(chunks: Uint8Array[]): SseEvent[] {
  const parser = new SseParser();
  const events: SseEvent[] = [];
  for (const chunk of chunks) events.push(...parser.push(chunk));
  events.push(...parser.end());
  return events;
}

describe("SseParser", () => {
  it("parses a whole stream into its events and drops the unterminated last one", () => {
    expect(parseChunks([BYTES])).toEqual(EXPECTED);
  });

  it("gives the same events when the bytes are split in two at every position", () => {
    for (let i = 0; i <= BYTES.length; i++) {
      const events = parseChunks([BYTES.subarray(0, i), BYTES.subarray(i)]);
      expect(events, `split at byte ${i}`).toEqual(EXPECTED);
    }
  });

  it("gives the same events when the bytes are split in three at every pair of positions", () => {
    for (let i = 0; i <= BYTES.length; i++) {
      for (let j = i; j <= BYTES.length; j++) {
        const events = parseChunks([BYTES.subarray(0, i), BYTES.subarray(i, j), BYTES.subarray(j)]);
        if (JSON.stringify(events) !== JSON.stringify(EXPECTED)) {
          expect(events, `split at bytes ${i} and ${j}`).toEqual(EXPECTED);
        }
      }
    }
  });

  it("gives the same events when fed one byte at a time", () => {
    const chunks = Array.from(BYTES, (_, i) => BYTES.subarray(i, i + 1));
    expect(parseChunks(chunks)).toEqual(EXPECTED);
  });

  it("emits an event as soon as its blank line arrives, before the stream ends", () => {
    const parser = new SseParser();
    expect(parser.push("data: a\n")).toEqual([]);
    expect(parser.push("\n")).toEqual([{ event: "message", data: "a" }]);
    expect(parser.push("data: b\r")).toEqual([]);
    // The CR already ended the line; the LF that follows in the next chunk is the same line end,
    // so only the second CR below is the blank line.
    expect(parser.push("\n")).toEqual([]);
    expect(parser.push("\r")).toEqual([{ event: "message", data: "b" }]);
  });

  it("keeps a pending CR across an empty chunk, so CR LF stays one line end", () => {
    const parser = new SseParser();
    expect(parser.push("data: x\r")).toEqual([]);
    expect(parser.push(new Uint8Array(0))).toEqual([]);
    // Were the CR forgotten, this LF would read as a blank line and dispatch "x" on its own.
    expect(parser.push("\ndata: y\n\n")).toEqual([{ event: "message", data: "x\ny" }]);
  });
});
