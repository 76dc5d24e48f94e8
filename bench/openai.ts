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
 * 3. Where the difference goes, interleaved on fresh threads (BENCH_OPENAI_SPLIT_ROUNDS, 3 × the
 *    turns): Spindle's route with and without the overrides a continuation through
 *    `/v1/responses` passes to its turn, the continuation itself, and `GET /v1/threads/{id}`
 *    against `GET /v1/models` (the same authenticated request without a Durable Object call):
 *    what one more thread RPC would cost a continuation.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseResponseId } from "../shared/openai/ids.ts";
import { startLocalWorker } from "../test/e2e/local-worker.ts";
import { REQUEST_TIMEOUT_MS, timedFetch } from "./harness.ts";
import { median, ms, percentile, positiveInt, ratio, table } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const TURNS = positiveInt(process.env.BENCH_OPENAI_TURNS, 100);
/** Rounds of step 3: its differences are about a millisecond, so more samples than a turn's. */
const SPLIT_ROUNDS = positiveInt(process.env.BENCH_OPENAI_SPLIT_ROUNDS, 3 * TURNS);
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
      post(
        new URL(`/v1/threads/${thread}/turns`, base),
        stream ? { input, stream } : { input },
        stream,
      ),
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

/**
 * What a continuation through `/v1/responses` passes to its turn beside the input (`overridesOf`
 * in worker/openai.ts for a body with only `model` and `input`).
 */
const RESPONSES_OVERRIDES = {
  model: MODEL,
  tools: [],
  context_sections: { instructions: null },
  reasoning: null,
};

/** Step 3's samples, each kind on its own thread (the GET reads the continuation's). */
interface Split {
  plain: number[];
  overrides: number[];
  responses: number[];
  getThread: number[];
  models: number[];
}

/** The thread a response id names (`resp_{thread}.{turn}.{start}.{inputs}`). */
function threadOf(responseId: string): string {
  const ref = parseResponseId(responseId);
  if (!ref) throw new Error(`not a response id: ${responseId}`);
  return ref.threadId;
}

async function split(base: URL): Promise<Split> {
  const withOverrides = `bench_${crypto.randomUUID().replaceAll("-", "")}`;
  await timedFetch(
    new URL("/v1/threads", base),
    { method: "POST", headers: HEADERS, body: JSON.stringify({ id: withOverrides }) },
    201,
  );
  await post(new URL(`/v1/threads/${withOverrides}/turns`, base), { input: "start" }, false);
  const chain = await chains(base);
  let continued = "";
  const get = (path: string) =>
    timedFetch(new URL(path, base), { method: "GET", headers: HEADERS }).then((r) => r.ms);
  const steps: Record<keyof Split, (i: number) => Promise<number>> = {
    plain: async (i) => (await chain.spindle(`turn ${i}`, false)).total,
    overrides: async (i) =>
      (
        await post(
          new URL(`/v1/threads/${withOverrides}/turns`, base),
          { input: `turn ${i}`, overrides: RESPONSES_OVERRIDES },
          false,
        )
      ).total,
    responses: async (i) => {
      const timing = await chain.openai(`turn ${i}`, false);
      continued = (JSON.parse(timing.body) as { id: string }).id;
      return timing.total;
    },
    getThread: async () => get(`/v1/threads/${threadOf(continued)}`),
    models: async () => get("/v1/models"),
  };
  const kinds = Object.keys(steps) as (keyof Split)[];
  const out: Split = { plain: [], overrides: [], responses: [], getThread: [], models: [] };
  for (let i = 0; i < WARMUP + SPLIT_ROUNDS; i++) {
    // Each kind first as often as every other: the order rotates.
    for (let k = 0; k < kinds.length; k++) {
      const kind = kinds[(i + k) % kinds.length] as keyof Split;
      if (kind === "getThread" && continued === "") continue;
      const took = await steps[kind](i);
      if (i >= WARMUP) out[kind].push(took);
    }
  }
  return out;
}

const persist = mkdtempSync(join(tmpdir(), "spindle-bench-openai-"));
const worker = await startLocalWorker(persist);
try {
  const json = await measure(worker.url, false);
  const streamed = await measure(worker.url, true);
  const parts = await split(worker.url);
  const row = (what: string, s: Sample, pick: (t: Timing) => number) => {
    const a = s.spindle.map(pick);
    const b = s.openai.map(pick);
    return [
      what,
      ms(median(a)),
      ms(median(b)),
      ratio(median(b), median(a)),
      ms(percentile(a, 90)),
      ms(percentile(b, 90)),
      ratio(percentile(b, 90), percentile(a, 90)),
      median(b) / median(a) <= GOAL ? "met" : "not met",
    ];
  };
  const p50 = (k: keyof Split) => median(parts[k]);
  const added = p50("responses") - p50("plain");
  const byOverrides = p50("overrides") - p50("plain");
  const byGetThread = p50("getThread") - p50("models");
  const splitRow = (what: string, k: keyof Split, over?: keyof Split) => [
    what,
    ms(p50(k)),
    ms(percentile(parts[k], 90)),
    over === undefined ? "" : ms(p50(k) - p50(over)),
  ];
  const report = [
    "# The OpenAI-compatible surface: benchmark results",
    "",
    `\`npm run bench:openai\` on ${cpus().length} cores (load ${loadavg()[0]?.toFixed(2)}), worker as \`npm start\` runs it, the local model.`,
    "",
    `${TURNS} warm turns through each route, interleaved (after ${WARMUP} of warm-up), each chain on a thread that grows by one turn per sample: \`POST /v1/threads/{id}/turns\` (\`{input}\`) against \`POST /v1/responses\` (\`{model, input, previous_response_id}\`, the chain's last response). Streamed: the same with \`stream: true\`, to the first \`event:\` frame and to the stream's end. Goal: the surface ≤ ${GOAL}× Spindle's route (judged at p50).`,
    "",
    table(
      [
        "measure",
        "turns route p50",
        "responses p50",
        "ratio p50",
        "turns route p90",
        "responses p90",
        "ratio p90",
        `≤ ${GOAL}×`,
      ],
      [
        row("JSON, whole answer", json, (t) => t.total),
        row("streamed, first event", streamed, (t) => t.first),
        row("streamed, whole stream", streamed, (t) => t.total),
      ],
    ),
    "",
    "## Where the difference goes (JSON)",
    "",
    `${SPLIT_ROUNDS} of each, interleaved in rotating order on fresh threads (after ${WARMUP} of warm-up). A continuation makes the same one \`startTurn\` RPC as Spindle's route, with \`overrides\` (\`model\`, \`tools: []\`, \`context_sections.instructions: null\`, \`reasoning: null\`) and \`afterTurn\` (the turn checks that the named response is still the thread's newest), and maps the Turn to a Response in the worker. \`GET /v1/threads/{id}\` over \`GET /v1/models\` is what one more thread RPC costs (a continuation that names no \`model\` makes it, to echo the thread's).`,
    "",
    table(
      ["request", "p50", "p90", "over the row it names, p50"],
      [
        splitRow("turns route, `{input}`", "plain"),
        splitRow("turns route, `{input, overrides}` (over `{input}`)", "overrides", "plain"),
        splitRow("`/v1/responses` continuation (over `{input}`)", "responses", "plain"),
        splitRow("`GET /v1/models` (no Durable Object call)", "models"),
        splitRow("`GET /v1/threads/{id}` (over `GET /v1/models`)", "getThread", "models"),
      ],
    ),
    "",
    `Differences of medians: the continuation adds ${ms(added)}, of which the overrides account for ${ms(byOverrides)}; the rest (${ms(added - byOverrides)}) is validation and mapping in the worker and noise. One more thread RPC would add about ${ms(byGetThread)}.`,
    "",
  ].join("\n");
  console.log(report);
  writeFileSync(`${ROOT}bench/results-openai.md`, report);
} finally {
  await worker.dispose();
  rmSync(persist, { recursive: true, force: true });
}
