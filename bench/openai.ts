/**
 * `npm run bench:openai`: what a turn costs through the OpenAI-compatible surface (design §17)
 * against the same turn through Spindle's own route, over a loopback socket to the worker as
 * `npm start` runs it. Numbers are printed (and written to bench/results-openai.md), never
 * asserted. BENCH_OPENAI_TURNS (100) warm turns each, interleaved, each chain on a thread that
 * grows by one turn per sample, so both threads stay the same size:
 *
 * 1. JSON: `POST /v1/threads/{id}/turns` against `POST /v1/responses` with
 *    `previous_response_id` (the chain's last response), total time.
 * 2. Streamed (`stream: true`): the time to the first SSE event and to the stream's end.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startLocalWorker } from "../test/e2e/local-worker.ts";
import { REQUEST_TIMEOUT_MS, timedFetch } from "./harness.ts";
import { median, ms, percentile, positiveInt, ratio, table } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const TURNS = positiveInt(process.env.BENCH_OPENAI_TURNS, 100);
const WARMUP = 20;
const GOAL = 1.1;
const HEADERS = { authorization: "Bearer sk-local-dev", "content-type": "application/json" };
const MODEL = "spindle-local";

/** One request timed: to its first SSE event (streamed only) and to its end. */
interface Timing {
  first: number;
  total: number;
  body: string;
}

async function post(url: URL, body: unknown, stream: boolean): Promise<Timing> {
  const init = { method: "POST", headers: HEADERS, body: JSON.stringify(body) };
  if (!stream) {
    const { ms: total, body: text } = await timedFetch(url, init);
    return { first: total, total, body: text };
  }
  const start = performance.now();
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  if (res.status !== 200 || res.body === null) {
    throw new Error(`POST ${url.pathname}: ${res.status} ${await res.text()}`);
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let first = Number.NaN;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (Number.isNaN(first) && text.includes("event:")) first = performance.now() - start;
  }
  return { first, total: performance.now() - start, body: text };
}

/** The last response id of a streamed answer: the `response.completed` event's. */
function completedId(sse: string): string {
  const line = sse
    .split("\n")
    .filter((l) => l.startsWith("data: {") && l.includes('"response.completed"'))
    .at(-1);
  if (!line) throw new Error("the stream had no response.completed");
  return (JSON.parse(line.slice(6)) as { response: { id: string } }).response.id;
}

/** Two chains, each on its own thread: Spindle's route and the OpenAI surface. */
async function chains(base: URL) {
  const thread = `bench_${crypto.randomUUID().replaceAll("-", "")}`;
  await timedFetch(
    new URL("/v1/threads", base),
    { method: "POST", headers: HEADERS, body: JSON.stringify({ id: thread }) },
    201,
  );
  const first = await post(new URL("/v1/responses", base), { model: MODEL, input: "start" }, false);
  let previous = (JSON.parse(first.body) as { id: string }).id;
  await post(new URL(`/v1/threads/${thread}/turns`, base), { input: "start" }, false);
  return {
    spindle: (input: string, stream: boolean) =>
      post(new URL(`/v1/threads/${thread}/turns`, base), { input, stream }, stream),
    openai: async (input: string, stream: boolean) => {
      const timing = await post(
        new URL("/v1/responses", base),
        { model: MODEL, input, previous_response_id: previous, stream },
        stream,
      );
      previous = stream ? completedId(timing.body) : (JSON.parse(timing.body) as { id: string }).id;
      return timing;
    },
  };
}

interface Sample {
  spindle: Timing[];
  openai: Timing[];
}

async function measure(base: URL, stream: boolean): Promise<Sample> {
  const chain = await chains(base);
  const sample: Sample = { spindle: [], openai: [] };
  for (let i = 0; i < WARMUP + TURNS; i++) {
    // Interleaved, the order alternating, so drift and warm-up hit both alike.
    const order = i % 2 === 0 ? (["spindle", "openai"] as const) : (["openai", "spindle"] as const);
    for (const route of order) {
      const timing = await chain[route](`turn ${i}`, stream);
      if (i >= WARMUP) sample[route].push(timing);
    }
  }
  return sample;
}

const persist = mkdtempSync(join(tmpdir(), "spindle-bench-openai-"));
const worker = await startLocalWorker(persist);
try {
  const json = await measure(worker.url, false);
  const streamed = await measure(worker.url, true);
  const row = (what: string, s: Sample, pick: (t: Timing) => number) => {
    const a = s.spindle.map(pick);
    const b = s.openai.map(pick);
    const r = median(b) / median(a);
    return [
      what,
      ms(median(a)),
      ms(median(b)),
      ratio(median(b), median(a)),
      ms(percentile(a, 90)),
      ms(percentile(b, 90)),
      r <= GOAL ? "met" : "not met",
    ];
  };
  const report = [
    "# The OpenAI-compatible surface: benchmark results",
    "",
    `\`npm run bench:openai\` on ${cpus().length} cores (load ${loadavg()[0]?.toFixed(2)}), worker as \`npm start\` runs it, the local model.`,
    "",
    `${TURNS} warm turns through each route, interleaved (after ${WARMUP} of warm-up), each chain on a thread that grows by one turn per sample: \`POST /v1/threads/{id}/turns\` against \`POST /v1/responses\` continuing with \`previous_response_id\`. Goal: the surface ≤ ${GOAL}× Spindle's route.`,
    "",
    table(
      [
        "measure",
        "turns route p50",
        "responses p50",
        "ratio p50",
        "turns route p90",
        "responses p90",
        `≤ ${GOAL}×`,
      ],
      [
        row("JSON, whole answer", json, (t) => t.total),
        row("streamed, first event", streamed, (t) => t.first),
        row("streamed, whole stream", streamed, (t) => t.total),
      ],
    ),
    "",
    "A continuation through `/v1/responses` reads the thread once (`getThread`: is the named",
    "response the newest?) before the same turn RPC Spindle's route makes, and maps the Turn (or",
    "each event) to OpenAI's shapes in the worker.",
    "",
  ].join("\n");
  console.log(report);
  writeFileSync(`${ROOT}bench/results-openai.md`, report);
} finally {
  await worker.dispose();
  rmSync(persist, { recursive: true, force: true });
}
