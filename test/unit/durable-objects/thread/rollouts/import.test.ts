import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type ImportResult,
  readRolloutStream,
} from "../../../../../durable-objects/thread/rollouts/import.ts";
import { rolloutLineMaxBytes } from "../../../../../shared/api/index.ts";
import { decodeRolloutJsonl } from "../../../../../shared/rollout/index.ts";
import { breakingStream } from "../../../../helpers/streams.ts";

const AT = "2026-03-01T10:00:00.000Z";
const META = JSON.stringify({ timestamp: AT, type: "session_meta", payload: { id: "src" } });
const userLine = (text: string) =>
  JSON.stringify({
    timestamp: AT,
    type: "response_item",
    payload: { type: "message", role: "user", content: [{ type: "input_text", text }] },
  });

/** `bytes` as a stream of the given chunks, counting how many were pulled. */
function chunked(bytes: Uint8Array, cuts: readonly number[]) {
  const bounds = [...new Set([0, ...cuts.filter((c) => c > 0 && c < bytes.length), bytes.length])];
  bounds.sort((a, b) => a - b);
  let next = 0;
  const pulled = { chunks: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      const start = bounds[next];
      const end = bounds[next + 1];
      if (start === undefined || end === undefined) return controller.close();
      next += 1;
      pulled.chunks += 1;
      controller.enqueue(bytes.slice(start, end));
    },
    cancel() {
      pulled.cancelled = true;
    },
  });
  return { stream, pulled };
}

/** `bytes` in chunks of `size`. */
function inChunksOf(bytes: Uint8Array, size: number) {
  const cuts: number[] = [];
  for (let at = size; at < bytes.length; at += size) cuts.push(at);
  return chunked(bytes, cuts);
}

const encode = (text: string) => new TextEncoder().encode(text);
const texts = (read: ImportResult) => (read.ok ? read.lines.map((l) => l.text) : read);

describe("readRolloutStream", () => {
  it("reads the same lines wherever the chunks are cut, multi-byte characters included", async () => {
    const body = `\uFEFF${META}\r\n\n${userLine("héllo 😀 wörld")}\n  \n${userLine("ß\u2028")}`;
    const expected = decodeRolloutJsonl(body).lines;
    const bytes = encode(body);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat({ max: bytes.length }), { maxLength: 12 }), async (cuts) => {
        const read = await readRolloutStream(chunked(bytes, cuts).stream);
        expect(read.ok && read.lines.map((l) => l.line)).toEqual(expected);
      }),
    );
  });

  it("keeps each line's text as it came, without its line end, and counts blank lines", async () => {
    const read = await readRolloutStream(chunked(encode(`${META}\r\n\n\n{"x"`), []).stream);
    expect(read).toEqual({
      ok: false,
      code: "invalid_request",
      lineNumber: 4,
      reason: expect.stringMatching(/^invalid JSON/),
    });
    const whole = await readRolloutStream(
      chunked(encode(`${META}\r\n${userLine("a")}`), []).stream,
    );
    expect(texts(whole)).toEqual([META, userLine("a")]);
  });

  it("drops a byte-order mark only at the start of the stream", async () => {
    const read = await readRolloutStream(
      chunked(encode(`${META}\n\uFEFF${userLine("a")}`), []).stream,
    );
    expect(read).toMatchObject({ ok: false, code: "invalid_request", lineNumber: 2 });
  });

  it("takes a line of exactly the limit, and refuses one byte more as soon as it arrives", async () => {
    const max = 1024;
    const line = (bytes: number) => userLine("x".repeat(bytes - userLine("").length));
    const exact = encode(`${META}\n${line(max)}\n`);
    expect(texts(await readRolloutStream(inChunksOf(exact, 100).stream, max))).toEqual([
      META,
      line(max),
    ]);
    // A line that never ends: reading stops at the limit, long before the body's end.
    const endless = encode(`${META}\n${"x".repeat(100 * max)}`);
    const { stream, pulled } = inChunksOf(endless, 100);
    expect(await readRolloutStream(stream, max)).toEqual({
      ok: false,
      code: "payload_too_large",
      lineNumber: 2,
      reason: "the line is longer than 1024 bytes",
    });
    expect(pulled).toEqual({ chunks: 12, cancelled: true });
  });

  it("refuses an over-long line whose end arrives in the same chunk", async () => {
    const body = encode(`${META}\n${userLine("y".repeat(2000))}\n`);
    expect(await readRolloutStream(chunked(body, []).stream, 1024)).toMatchObject({
      ok: false,
      code: "payload_too_large",
      lineNumber: 2,
    });
  });

  it("reports a body that breaks off at the line being read", async () => {
    expect(await readRolloutStream(breakingStream(`${META}\n{"timest`))).toEqual({
      ok: false,
      code: "invalid_request",
      lineNumber: 2,
      reason: "the body could not be read (Network connection lost.)",
    });
  });

  it("reads one 16 MB line in 64 KiB chunks in linear time (time printed, not asserted)", async () => {
    const text = "z".repeat(16_000_000);
    const body = encode(`${META}\n${userLine(text)}\n`);
    const started = performance.now();
    const read = await readRolloutStream(inChunksOf(body, 64 * 1024).stream);
    const ms = performance.now() - started;
    console.log(`readRolloutStream: a 16 MB line in 64 KiB chunks took ${ms.toFixed(0)} ms`);
    const [, line] = read.ok ? read.lines : [];
    expect(line?.line).toMatchObject({
      type: "response_item",
      payload: { content: [{ type: "input_text", text }] },
    });
    expect(rolloutLineMaxBytes).toBe(32 * 1024 * 1024);
  });
});
