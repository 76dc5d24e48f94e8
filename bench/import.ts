/**
 * `npm run bench:import`: how fast an uploaded rollout is read (`readRolloutStream`: splitting,
 * decoding and checking each line), for bodies of the same size made of lines of very different
 * lengths, arriving in 64 KiB chunks as a network upload does. Runs in Node, no runtime. Numbers
 * are printed, never asserted.
 *
 * Knobs (environment): BENCH_IMPORT_MB (the body size, default 32), BENCH_IMPORT_REPEATS (3).
 */
import { readRolloutStream } from "../durable-objects/thread/rollouts/import.ts";
import { median, ms, positiveInt, table } from "./stats.ts";

const BODY_BYTES = positiveInt(process.env.BENCH_IMPORT_MB, 32) * 1_000_000;
const REPEATS = positiveInt(process.env.BENCH_IMPORT_REPEATS, 3);
const CHUNK_BYTES = 64 * 1024;
const LINE_BYTES = [200, 64 * 1024, 1_000_000, 16_000_000, BODY_BYTES - 200];

const META = JSON.stringify({
  timestamp: "2026-03-01T10:00:00.000Z",
  type: "session_meta",
  payload: { id: "bench" },
});

/** A user message line of about `bytes` bytes. */
function userLine(bytes: number): string {
  const frame = JSON.stringify({
    timestamp: "2026-03-01T10:00:01.000Z",
    type: "response_item",
    payload: { type: "message", role: "user", content: [{ type: "input_text", text: "" }] },
  });
  return frame.replace('"text":""', `"text":"${"a".repeat(Math.max(0, bytes - frame.length))}"`);
}

/** A body of about BODY_BYTES in lines of `lineBytes`, as bytes. */
function body(lineBytes: number): Uint8Array {
  const line = userLine(lineBytes);
  const lines = Math.max(1, Math.floor(BODY_BYTES / (line.length + 1)));
  return new TextEncoder().encode(`${META}\n${`${line}\n`.repeat(lines)}`);
}

function chunked(bytes: Uint8Array): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(bytes.subarray(offset, offset + CHUNK_BYTES));
      offset += CHUNK_BYTES;
    },
  });
}

const rows: string[][] = [];
for (const lineBytes of LINE_BYTES) {
  const bytes = body(lineBytes);
  const times: number[] = [];
  let lines = 0;
  for (let i = 0; i < REPEATS; i++) {
    const started = performance.now();
    const read = await readRolloutStream(chunked(bytes));
    times.push(performance.now() - started);
    if (!read.ok) throw new Error(`line ${read.lineNumber}: ${read.reason}`);
    lines = read.lines.length;
  }
  const mbPerS = bytes.length / 1_000_000 / (median(times) / 1000);
  rows.push([
    lineBytes.toLocaleString("en-US"),
    lines.toLocaleString("en-US"),
    (bytes.length / 1_000_000).toFixed(1),
    ms(median(times)),
    mbPerS.toFixed(0),
  ]);
}

console.log(
  `readRolloutStream, ${CHUNK_BYTES / 1024} KiB chunks, median of ${REPEATS} (Node ${process.version})`,
);
console.log(table(["line bytes", "lines", "body MB", "read time", "MB/s"], rows));
