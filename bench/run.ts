/**
 * `npm run bench`: Spindle against a bare Durable Object, both under wrangler's test harness, over
 * a loopback socket, in bounded loops. Prints a table (no assertions) and writes it to
 * bench/results.md. See bench/README.md for what each number means.
 *
 * Knobs (environment): BENCH_TURNS (sizes, default 10,1000,5000,10000), BENCH_TIMED_TURNS (50),
 * BENCH_COLD_REPEATS (5), BENCH_BUILD_BUDGET_S (seconds allowed for seeding turns, 480).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import {
  type Memory,
  memoryOf,
  openSqliteBytes,
  type Runtime,
  sleep,
  startRuntime,
  timedFetch,
} from "./harness.ts";
import { bytes, count, median, ms, percentile, positiveInt, ratio, table } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

function intList(raw: string | undefined, fallback: number[]): number[] {
  if (!raw) return fallback;
  const values = raw.split(",").map((v) => Number.parseInt(v.trim(), 10));
  if (values.some((v) => !Number.isInteger(v) || v < 1)) throw new Error(`bad list: ${raw}`);
  return [...new Set(values)].sort((a, b) => a - b);
}

const SIZES = intList(process.env.BENCH_TURNS, [10, 1_000, 5_000, 10_000]);
const TIMED_TURNS = positiveInt(process.env.BENCH_TIMED_TURNS, 50);
const WARMUP_TURNS = 10;
const COLD_REPEATS = positiveInt(process.env.BENCH_COLD_REPEATS, 5);
const BUILD_BUDGET_MS = positiveInt(process.env.BENCH_BUILD_BUDGET_S, 480) * 1000;
/** Requests (bare) or turns (Spindle, on a throwaway thread) that warm the isolate's code first. */
const JIT_WARMUP_REQUESTS = 200;
/** Timed bare POSTs per size (after 20 untimed ones), run right before Spindle's timed turns. */
const BARE_TIMED = 100;
const BARE_WARMUP = 20;
/** The size whose memory is compared with the bare DO's (brief: "peak RSS at 5,000 turns"). */
const MEMORY_SIZE = 5_000;
/**
 * Bound on waiting for the flush alarm (due 1 s after a turn) and the checkpoint after it. When it
 * runs out the bench goes on and the report counts the waits that timed out.
 */
const SETTLE_TIMEOUT_MS = 10_000;
/**
 * Mirrors CHECKPOINT_EVERY_LINES in durable-objects/thread/live-thread.ts (not importable under
 * strip-only Node): while this many lines wait past the checkpoint, one is still due.
 */
const CHECKPOINT_EVERY_LINES = 250;

const DEV_HEADERS = { authorization: "Bearer sk-local-dev", "content-type": "application/json" };
const THREAD_ID = "bench";
const JIT_THREAD_ID = "jit_warmup";
const notes: string[] = [];
/** Per thread: the turn counts at which the flush had not finished within the bound. */
const unsettled = new Map<string, number[]>();

/** A checkpoint's tables (created on its first save). */
const CHECKPOINT_TABLES = [
  "spindle_checkpoint",
  "spindle_checkpoint_items",
  "spindle_checkpoint_runs",
] as const;

/** A fixed-shape user message (~40 bytes), like a short chat input. */
const userInput = (n: number) => `Benchmark question number ${n}, please answer.`;

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

// --- Bare DO control ----------------------------------------------------------------------------

/**
 * The control: its own harness and workerd process, alive next to Spindle's. Each of its samples
 * is taken right before the matching Spindle samples, so both see the same machine load, and its
 * memory is read after as many requests as Spindle had served: local workerd's resident set grows
 * with requests served whatever the worker does.
 */

class BareDriver {
  readonly #rt: Runtime;
  readonly #body = JSON.stringify({ input: userInput(0) });
  requests = 0;

  constructor(runtime: Runtime) {
    this.#rt = runtime;
  }

  static async start(): Promise<BareDriver> {
    let warmUpRequests = 0;
    const body = JSON.stringify({ input: userInput(0) });
    const runtime = await startRuntime({
      configPath: `${ROOT}bench/bare/wrangler.toml`,
      doDir: "spindle-bench-bare-BareRows",
      warmUp: async (url) => {
        warmUpRequests += 1;
        await timedFetch(new URL("/rows/bench", url), { method: "POST", body });
      },
    });
    const driver = new BareDriver(runtime);
    driver.requests = warmUpRequests;
    return driver;
  }

  async post(): Promise<number> {
    this.requests += 1;
    const url = new URL("/rows/bench", this.#rt.url);
    return (await timedFetch(url, { method: "POST", body: this.#body })).ms;
  }

  async warm(): Promise<number[]> {
    for (let i = 0; i < BARE_WARMUP; i++) await this.post();
    const samples: number[] = [];
    for (let i = 0; i < BARE_TIMED; i++) samples.push(await this.post());
    return samples;
  }

  async cold(): Promise<number[]> {
    const samples: number[] = [];
    for (let i = 0; i < COLD_REPEATS; i++) {
      // Workerd evicts idle objects on its own; eviction needs a running one.
      await this.post();
      await this.#rt.worker.evictDurableObject("ROWS", { name: "bench" });
      samples.push(await this.post());
    }
    return samples;
  }

  /** Memory after POSTing until this process has served `requests` requests. */
  async memoryAfter(requests: number): Promise<Memory> {
    while (this.requests < requests) await this.post();
    return memoryOf(this.#rt.pid);
  }

  close(): Promise<void> {
    return this.#rt.close();
  }
}

// --- Spindle ------------------------------------------------------------------------------------

interface Storage {
  turns: number;
  rawBytes: number;
  rawLines: number;
  tailBytes: number;
  tailLines: number;
  checkpointBytes: number;
  checkpointChunks: number;
  turnRowBytes: number;
  metaBytes: number;
  sqliteFileBytes: number | undefined;
  r2Objects: number;
  r2Bytes: number;
  /** Rollout lines the R2 segments hold (all of them once the flush has run). */
  r2Lines: number;
  /** `compacted` lines in the rollout: how often the history was summarized. */
  compactions: number;
}

interface Shape {
  promptItems: number;
  promptBytes: number;
  compactions: number;
}

interface SizeResult {
  size: number;
  shape: Shape;
  coldPrior: [number, number];
  cold: number[];
  /** First `GET` of the thread after an eviction. */
  coldRead: number[];
  warmPrior: [number, number];
  warm: number[];
  storage: Storage;
  memory: Memory;
  /** HTTP requests the Spindle runtime had served when `memory` was read. */
  requests: number;
  bare: { warm: number[]; cold: number[]; memory: Memory };
}

interface BuildStep {
  from: number;
  to: number;
  seconds: number;
  lastHundredMs: number;
}

/** Drives one thread of the Spindle runtime; every HTTP request is counted on `counter`. */
class ThreadDriver {
  readonly #rt: Runtime;
  readonly #counter: { requests: number };
  readonly id: string;
  readonly doName: string;
  turns = 0;

  constructor(runtime: Runtime, id: string, counter: { requests: number }) {
    this.#rt = runtime;
    this.id = id;
    this.doName = `local:${id}`;
    this.#counter = counter;
  }

  async #call(method: string, path: string, body?: unknown, status = 200) {
    this.#counter.requests += 1;
    return timedFetch(
      new URL(path, this.#rt.url),
      {
        method,
        headers: DEV_HEADERS,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      },
      status,
    );
  }

  async create(): Promise<void> {
    await this.#call("POST", "/v1/threads", { id: this.id, cwd: "/repo" }, 201);
  }

  /** One turn; returns its latency in ms. */
  async turn(): Promise<number> {
    const input = userInput(this.turns + 1);
    const { ms: took, body } = await this.#call("POST", `/v1/threads/${this.id}/turns`, { input });
    const status = (JSON.parse(body) as { status?: string }).status;
    if (status !== "completed") throw new Error(`turn ${this.turns + 1} ended ${status}`);
    this.turns += 1;
    return took;
  }

  async turnCount(): Promise<number> {
    const { body } = await this.#call("GET", `/v1/threads/${this.id}`);
    return (JSON.parse(body) as { turn_count: number }).turn_count;
  }

  async evict(): Promise<void> {
    await this.#rt.worker.evictDurableObject("THREAD", { name: this.doName });
  }

  #sql() {
    return this.#rt.worker.getDurableObjectStorage("THREAD", { name: this.doName });
  }

  /**
   * `SELECT COALESCE(SUM(expr), 0) FROM table` over each of `tables` the object has created (a
   * thread creates its checkpoint and turn-group tables on first use), as one SQL expression.
   */
  async #sums(expr: string, tables: readonly string[]): Promise<string> {
    const sql = await this.#sql();
    const rows = (await sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'")) as {
      name: string;
    }[];
    const existing = new Set(rows.map((r) => r.name));
    const sums = tables
      .filter((t) => existing.has(t))
      .map((t) => `(SELECT COALESCE(SUM(${expr}), 0) FROM ${t})`);
    return sums.length > 0 ? sums.join(" + ") : "0";
  }

  /** Waits until the flush alarm has put every line in R2 and any due checkpoint is written. */
  async settle(): Promise<void> {
    const sql = await this.#sql();
    const deadline = performance.now() + SETTLE_TIMEOUT_MS;
    let previous = "";
    while (performance.now() < deadline) {
      const [row] = await sql.exec(`SELECT
        (SELECT COALESCE(MAX(seq), 0) FROM spindle_rollout) AS tail,
        (SELECT COALESCE(MIN(seq), 0) FROM spindle_rollout) AS head,
        (SELECT COUNT(*) FROM spindle_rollout) AS lines,
        (SELECT COALESCE(MAX(last_seq), 0) FROM spindle_segments WHERE state = 'done') AS flushed,
        (SELECT COUNT(*) FROM spindle_segments WHERE state = 'pending') AS pending,
        ${await this.#sums("length(data)", CHECKPOINT_TABLES)} AS checkpoint`);
      const r = row as Record<string, number>;
      const flushed = (r.flushed ?? 0) >= (r.tail ?? 0) && r.pending === 0;
      // Lines leave SQLite only at a checkpoint, so `head - 1` is the newest checkpoint's seq.
      const checkpointDue =
        (r.lines ?? 0) > 0 && (r.flushed ?? 0) - ((r.head ?? 1) - 1) >= CHECKPOINT_EVERY_LINES;
      const key = JSON.stringify(row);
      if (flushed && !checkpointDue && key === previous) return;
      previous = flushed && !checkpointDue ? key : "";
      await sleep(250);
    }
    unsettled.set(this.id, [...(unsettled.get(this.id) ?? []), this.turns]);
  }

  async storage(): Promise<Storage> {
    const sql = await this.#sql();
    const [row] = await sql.exec(`SELECT
      (SELECT COUNT(*) FROM spindle_rollout) AS tail_lines,
      (SELECT COALESCE(SUM(length(CAST(line AS BLOB))), 0) FROM spindle_rollout) AS tail_bytes,
      ${await this.#sums("1", CHECKPOINT_TABLES)} AS checkpoint_chunks,
      ${await this.#sums("length(data)", CHECKPOINT_TABLES)} AS checkpoint_bytes,
      (SELECT COALESCE(SUM(length(turn_id) + length(CAST(body AS BLOB)) + 8), 0) FROM spindle_turns)
        + ${await this.#sums("length(hashes) + length(data) + 8", ["spindle_turn_groups"])} AS turn_bytes,
      (SELECT COALESCE(SUM(length(key) + length(CAST(value AS BLOB))), 0) FROM spindle_meta) AS meta_bytes,
      (SELECT COALESCE(SUM(length(r2_key) + length(sha256) + 32), 0) FROM spindle_segments) AS manifest_bytes`);
    const r = row as Record<string, number>;
    const bucket = (await this.#rt.worker.getEnv()).ROLLOUT as R2Bucket;
    let r2Objects = 0;
    let r2Bytes = 0;
    let rawBytes = 0;
    let rawLines = 0;
    let lastR2Seq = 0;
    let compactions = 0;
    let cursor: string | undefined;
    do {
      const page = await bucket.list({
        prefix: `threads/local/${this.id}/`,
        include: ["customMetadata"],
        ...(cursor ? { cursor } : {}),
      });
      for (const object of page.objects) {
        r2Objects += 1;
        r2Bytes += object.size;
        if (!object.key.includes("/segments/")) continue;
        const body = await bucket.get(object.key);
        if (body === null) throw new Error(`${object.key} vanished`);
        const text = gunzipSync(new Uint8Array(await body.arrayBuffer()));
        rawBytes += text.length;
        for (const line of text.toString("utf8").split("\n")) {
          if (line === "") continue;
          rawLines += 1;
          if ((JSON.parse(line) as { type?: string }).type === "compacted") compactions += 1;
        }
        lastR2Seq = Math.max(lastR2Seq, Number(object.customMetadata?.last_seq ?? 0));
      }
      cursor = page.truncated ? page.cursor : undefined;
    } while (cursor !== undefined);
    // Lines not yet in R2 (none after settle(), unless it timed out).
    const [unflushed] = await sql.exec(
      "SELECT COUNT(*) AS n, COALESCE(SUM(length(CAST(line AS BLOB)) + 1), 0) AS b FROM spindle_rollout WHERE seq > ?",
      lastR2Seq,
    );
    const r2Lines = rawLines;
    rawBytes += Number(unflushed?.b ?? 0);
    rawLines += Number(unflushed?.n ?? 0);
    return {
      turns: this.turns,
      rawBytes,
      rawLines,
      tailBytes: r.tail_bytes ?? 0,
      tailLines: r.tail_lines ?? 0,
      checkpointBytes: r.checkpoint_bytes ?? 0,
      checkpointChunks: r.checkpoint_chunks ?? 0,
      turnRowBytes: r.turn_bytes ?? 0,
      metaBytes: (r.meta_bytes ?? 0) + (r.manifest_bytes ?? 0),
      sqliteFileBytes: await this.#sqliteFileBytes(),
      r2Objects,
      r2Bytes,
      r2Lines,
      compactions,
    };
  }

  /** Size of the next model request (`GET …/prompt`): input items and JSON bytes. */
  async prompt(): Promise<{ items: number; bytes: number }> {
    const { body } = await this.#call("GET", `/v1/threads/${this.id}/prompt`);
    const prompt = JSON.parse(body) as { input: unknown[] };
    return { items: prompt.input.length, bytes: Buffer.byteLength(body) };
  }

  /** The DO's database + WAL file sizes in local workerd (files are named by the object id). */
  async #sqliteFileBytes(): Promise<number | undefined> {
    try {
      const namespace = (await this.#rt.worker.getEnv()).THREAD as DurableObjectNamespace;
      const objectId = String(namespace.idFromName(this.doName).toString());
      return openSqliteBytes(this.#rt.pid, "/do/spindle-Thread/", objectId);
    } catch (err) {
      notes.push(`The SQLite file size could not be read: ${String(err)}`);
      return undefined;
    }
  }

  /** First turn after the DO instance is evicted (storage kept), `repeats` times. */
  async coldTurns(repeats: number): Promise<number[]> {
    return this.#cold(repeats, () => this.turn());
  }

  /** First `GET /v1/threads/{id}` after the DO instance is evicted, `repeats` times. */
  async coldReads(repeats: number): Promise<number[]> {
    return this.#cold(repeats, async () => (await this.#call("GET", `/v1/threads/${this.id}`)).ms);
  }

  async #cold(repeats: number, request: () => Promise<number>): Promise<number[]> {
    const samples: number[] = [];
    for (let i = 0; i < repeats; i++) {
      await this.settle(); // no alarm may wake the object between eviction and the timed request
      await this.evict();
      samples.push(await request());
    }
    await this.settle();
    return samples;
  }

  async warmTurns(): Promise<number[]> {
    for (let i = 0; i < WARMUP_TURNS; i++) await this.turn();
    const samples: number[] = [];
    for (let i = 0; i < TIMED_TURNS; i++) samples.push(await this.turn());
    return samples;
  }
}

/** Seeds turns up to `target` as fast as the thread takes them, within the seeding budget. */
class Seeder {
  #spentMs = 0;
  readonly steps: BuildStep[] = [];

  async growTo(thread: ThreadDriver, target: number): Promise<boolean> {
    const from = thread.turns;
    const start = performance.now();
    const recent: number[] = [];
    while (thread.turns < target) {
      if (this.#spentMs + (performance.now() - start) > BUILD_BUDGET_MS) break;
      recent.push(await thread.turn());
      if (recent.length > 100) recent.shift();
      if (thread.turns % 1000 === 0) {
        log(`built ${count(thread.turns)} turns (last 100: ${ms(median(recent))} median)`);
      }
    }
    const elapsed = performance.now() - start;
    this.#spentMs += elapsed;
    if (thread.turns > from) {
      this.steps.push({
        from,
        to: thread.turns,
        seconds: elapsed / 1000,
        lastHundredMs: recent.reduce((a, b) => a + b, 0) / recent.length,
      });
    }
    return thread.turns >= target;
  }
}

interface SpindleResult {
  sizes: SizeResult[];
  builds: BuildStep[];
}

async function runBench(): Promise<SpindleResult> {
  const counter = { requests: 0 };
  const runtime = await startRuntime({
    configPath: `${ROOT}wrangler.toml`,
    vars: { SPINDLE_ENV: "development" },
    doDir: "spindle-Thread",
    warmUp: async (url) => {
      counter.requests += 1;
      const body = JSON.stringify({ id: JIT_THREAD_ID, cwd: "/repo" });
      await timedFetch(
        new URL("/v1/threads", url),
        { method: "POST", headers: DEV_HEADERS, body },
        201,
      );
    },
  });
  let bare: BareDriver | undefined;
  try {
    bare = await BareDriver.start();
    // Warm the isolates' code (Spindle: turn and load paths, on a throwaway thread that is then
    // evicted) so the first sizes do not measure V8 compiling.
    const warmup = new ThreadDriver(runtime, JIT_THREAD_ID, counter);
    for (let i = 0; i < JIT_WARMUP_REQUESTS; i++) await warmup.turn();
    await warmup.coldTurns(3);
    await warmup.evict();
    for (let i = 0; i < JIT_WARMUP_REQUESTS; i++) await bare.post();
    log(`isolates warmed up (Spindle: ${warmup.turns} turns on a throwaway thread, evicted)`);

    const thread = new ThreadDriver(runtime, THREAD_ID, counter);
    await thread.create();
    const seeder = new Seeder();
    const sizes: SizeResult[] = [];
    for (const size of SIZES) {
      const reached = await seeder.growTo(thread, size);
      if (!reached) {
        notes.push(
          `Seeding stopped at ${count(thread.turns)} turns (budget ${BUILD_BUDGET_MS / 1000} s); the ${count(size)}-turn row is measured there instead.`,
        );
      }
      const at = thread.turns;
      await thread.settle();
      const storage = await thread.storage();
      const prompt = await thread.prompt();
      log(`${count(at)} turns: cold starts…`);
      const bareCold = await bare.cold();
      const coldFrom = thread.turns;
      const cold = await thread.coldTurns(COLD_REPEATS);
      const coldRead = await thread.coldReads(COLD_REPEATS);
      log(`${count(at)} turns: warm turns…`);
      const bareWarm = await bare.warm();
      const warmFrom = thread.turns + WARMUP_TURNS;
      const warm = await thread.warmTurns();
      const memory = memoryOf(runtime.pid);
      const bareMemory = await bare.memoryAfter(counter.requests);
      sizes.push({
        size: at,
        shape: {
          promptItems: prompt.items,
          promptBytes: prompt.bytes,
          compactions: storage.compactions,
        },
        coldPrior: [coldFrom, coldFrom + COLD_REPEATS - 1],
        cold,
        coldRead,
        warmPrior: [warmFrom, warmFrom + TIMED_TURNS - 1],
        warm,
        storage,
        memory,
        requests: counter.requests,
        bare: { warm: bareWarm, cold: bareCold, memory: bareMemory },
      });
      log(
        `${count(at)} turns: warm p50 ${ms(median(warm))} (bare ${ms(median(bareWarm))}), cold median ${ms(median(cold))} (bare ${ms(median(bareCold))}), cold GET ${ms(median(coldRead))}, RSS ${bytes(memory.rssBytes)} (bare ${bytes(bareMemory.rssBytes)})`,
      );
      if (!reached) break;
    }
    const reported = await thread.turnCount();
    if (reported !== thread.turns) {
      notes.push(`The thread reports turn_count ${reported}; the bench counted ${thread.turns}.`);
    }
    return { sizes, builds: seeder.steps };
  } finally {
    await bare?.close();
    await runtime.close();
  }
}

// --- Report -------------------------------------------------------------------------------------

function version(path: string): string {
  try {
    return (
      JSON.parse(readFileSync(`${ROOT}node_modules/${path}/package.json`, "utf8")) as {
        version: string;
      }
    ).version;
  } catch {
    return "?";
  }
}

function allNotes(): string[] {
  const waits = [...unsettled].map(
    ([thread, at]) =>
      `Thread \`${thread}\`: ${at.length} wait(s) for the flush alarm ran out after ${SETTLE_TIMEOUT_MS / 1000} s (at ${at.map(count).join(", ")} turns): the rollout tail was not in R2 yet, so those storage rows show unflushed lines and those cold starts were not preceded by a flush.`,
  );
  return [...waits, ...notes];
}

const range = ([a, b]: [number, number]) => (a === b ? count(a) : `${count(a)}–${count(b)}`);
const spread = (samples: number[]) => `${ms(Math.min(...samples))}–${ms(Math.max(...samples))}`;

function report(
  result: SpindleResult,
  run: { startedAt: Date; seconds: number; loadBefore: number[]; loadAfter: number[] },
): string {
  const cpu = cpus();
  const load = (l: number[]) => l.map((v) => v.toFixed(2)).join(" ");
  const machine = [
    `Local run, wrangler ${version("wrangler")}/miniflare ${version("miniflare")}`,
    `(workerd ${version("wrangler/node_modules/@cloudflare/workerd-linux-64")}),`,
    `${cpu.length} cores (${cpu[0]?.model.trim() ?? "unknown CPU"}), Node ${process.version},`,
    `${run.startedAt.toISOString()}, ${Math.round(run.seconds)} s in all,`,
    `load average ${load(run.loadBefore)} before and ${load(run.loadAfter)} after.`,
    "Simulator numbers for comparing runs and spotting growth, not production latencies.",
  ].join(" ");
  const { sizes } = result;
  const first = sizes[0];
  const firstCold = first ? median(first.cold) : Number.NaN;
  const firstLabel = first ? `÷ ${count(first.size)}-turn cold` : "÷ first";

  const shape = table(
    ["thread", "rollout lines", "compactions", "next prompt: input items", "next prompt: JSON"],
    sizes.map((s) => [
      `${count(s.size)} turns`,
      count(s.storage.rawLines),
      count(s.shape.compactions),
      count(s.shape.promptItems),
      bytes(s.shape.promptBytes),
    ]),
  );

  const warm = table(
    [
      "thread",
      "prior turns",
      "turn p50",
      "turn p99",
      "bare p50",
      "bare p99",
      "p50 ÷ bare",
      "p99 ÷ bare",
    ],
    sizes.map((s) => {
      const [p50, p99] = [median(s.warm), percentile(s.warm, 99)];
      const [b50, b99] = [median(s.bare.warm), percentile(s.bare.warm, 99)];
      return [
        `${count(s.size)} turns`,
        range(s.warmPrior),
        ms(p50),
        ms(p99),
        ms(b50),
        ms(b99),
        ratio(p50, b50),
        ratio(p99, b99),
      ];
    }),
  );

  const cold = table(
    [
      "thread",
      "prior turns",
      "first turn: median",
      "min–max",
      "bare: median",
      "÷ bare",
      firstLabel,
      "first GET: median",
      "GET ÷ bare",
    ],
    sizes.map((s) => [
      `${count(s.size)} turns`,
      range(s.coldPrior),
      ms(median(s.cold)),
      spread(s.cold),
      ms(median(s.bare.cold)),
      ratio(median(s.cold), median(s.bare.cold)),
      ratio(median(s.cold), firstCold),
      ms(median(s.coldRead)),
      ratio(median(s.coldRead), median(s.bare.cold)),
    ]),
  );

  const sqliteTotal = (st: Storage) =>
    st.tailBytes + st.checkpointBytes + st.turnRowBytes + st.metaBytes;
  const sqlite = table(
    [
      "turns (messages)",
      "raw rollout JSONL",
      "rollout tail",
      "checkpoint (gzip)",
      "turn rows",
      "meta + manifest",
      "SQLite total",
      "÷ message",
      "÷ raw",
      "file + WAL on disk",
    ],
    sizes.map(({ storage: st }) => [
      `${count(st.turns)} (${count(2 * st.turns)})`,
      bytes(st.rawBytes),
      `${bytes(st.tailBytes)} (${count(st.tailLines)} lines)`,
      `${bytes(st.checkpointBytes)} (${st.checkpointChunks} rows)`,
      bytes(st.turnRowBytes),
      bytes(st.metaBytes),
      bytes(sqliteTotal(st)),
      bytes(sqliteTotal(st) / (2 * st.turns)),
      ratio(sqliteTotal(st), st.rawBytes),
      bytes(st.sqliteFileBytes),
    ]),
  );

  const r2 = table(
    [
      "turns (messages)",
      "raw ÷ message",
      "lines in R2",
      "R2 objects",
      "R2 bytes (gzip)",
      "÷ message",
      "÷ raw",
    ],
    sizes.map(({ storage: st }) => [
      `${count(st.turns)} (${count(2 * st.turns)})`,
      bytes(st.rawBytes / (2 * st.turns)),
      `${count(st.r2Lines)} of ${count(st.rawLines)}`,
      count(st.r2Objects),
      bytes(st.r2Bytes),
      bytes(st.r2Bytes / (2 * st.turns)),
      ratio(st.r2Bytes, st.rawBytes),
    ]),
  );

  const memory = table(
    [
      "after the measurements at",
      "HTTP requests served",
      "Spindle VmRSS",
      "Spindle VmHWM",
      "bare VmRSS",
      "bare VmHWM",
      "RSS ÷ bare",
      "peak ÷ bare",
    ],
    sizes.map((s) => {
      const label = `${count(s.size)} turns`;
      return [
        s.size === MEMORY_SIZE ? `**${label}**` : label,
        count(s.requests),
        bytes(s.memory.rssBytes),
        bytes(s.memory.peakBytes),
        bytes(s.bare.memory.rssBytes),
        bytes(s.bare.memory.peakBytes),
        ratio(s.memory.rssBytes, s.bare.memory.rssBytes),
        ratio(s.memory.peakBytes, s.bare.memory.peakBytes),
      ];
    }),
  );

  const builds = table(
    ["seeded turns", "seconds", "mean ms/turn", "mean of the last 100"],
    result.builds.map((b) => [
      `${count(b.from)} → ${count(b.to)}`,
      b.seconds.toFixed(1),
      ((b.seconds * 1000) / (b.to - b.from)).toFixed(1),
      ms(b.lastHundredMs),
    ]),
  );

  return [
    "# Spindle benchmark",
    "",
    machine,
    "",
    "Every request is an HTTP exchange over 127.0.0.1 with wrangler's test harness (its proxy → the worker → the Durable Object), timed from send to the last body byte. Spindle and the bare DO control each run in their own harness and workerd process, both up for the whole run; the bare samples of a row are taken right before Spindle's. Both isolates are warmed first (Spindle: 200 turns and 3 reloads on a throwaway thread, then evicted; bare: 200 POSTs). One thread is grown by sequential HTTP turns with the local model (`spindle-local`); each size continues it.",
    "",
    "## The thread at each size",
    "",
    shape,
    "",
    "## Warm turn latency (bare DO: POST = one SQLite insert)",
    "",
    warm,
    "",
    `${TIMED_TURNS} timed turns after ${WARMUP_TURNS} untimed ones; bare: ${BARE_TIMED} timed POSTs after ${BARE_WARMUP}. p99 is nearest-rank (with ${TIMED_TURNS} samples, the slowest). Timed turns include whatever the flush alarm (1 s after a turn) and checkpoints do meanwhile.`,
    "",
    "## Cold start: first request after `evictDurableObject` (storage kept, isolate kept)",
    "",
    cold,
    "",
    `Median of ${COLD_REPEATS} evictions per size; before each, the bench waited for the flush alarm and any due checkpoint (see the notes when that wait ran out). "First GET" is \`GET /v1/threads/{id}\` as the first request after an eviction (${COLD_REPEATS} more evictions), which needs the thread's state but not its history.`,
    "",
    "## Storage in the DO's SQLite (after waiting for the flush alarm and checkpoint; a turn = 2 messages)",
    "",
    sqlite,
    "",
    "Bytes of stored values (rollout lines, gzip checkpoint chunks, turn rows, meta and segment-manifest rows), not pages. The file column is the DO's database + WAL on disk in local workerd (pages, free space and an unchecked WAL included).",
    "",
    "## Storage in R2 (gzip JSONL segments under `threads/`)",
    "",
    r2,
    "",
    "`raw` = the uncompressed JSONL of the whole rollout (every segment gunzipped, plus any line not yet flushed).",
    "",
    "## Memory of the workerd process running the worker",
    "",
    memory,
    "",
    `The bare DO's process is read after the same number of HTTP requests, because local workerd's resident set grows with requests served whatever the worker does. VmHWM is the peak since the process started (seeding included). The ${count(MEMORY_SIZE)}-turn row is the headline.`,
    "",
    "## Seeding",
    "",
    builds,
    ...(allNotes().length > 0 ? ["", "## Notes", "", ...allNotes().map((n) => `- ${n}`)] : []),
    "",
  ].join("\n");
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const loadBefore = loadavg();
  const t0 = performance.now();
  log(
    `sizes ${SIZES.join(", ")}; ${TIMED_TURNS} timed turns; ${COLD_REPEATS} cold starts per size`,
  );
  const result = await runBench();
  const text = report(result, {
    startedAt,
    seconds: (performance.now() - t0) / 1000,
    loadBefore,
    loadAfter: loadavg(),
  });
  process.stdout.write(`${text}\n`);
  writeFileSync(`${ROOT}bench/results.md`, text);
  log("wrote bench/results.md");
}

await main();
