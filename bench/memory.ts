/**
 * `npm run bench:memory`: where the workerd process's memory goes while one thread grows. workerd
 * runs with V8's garbage-collection trace (`--trace-gc-nvp`, through Miniflare's
 * MINIFLARE_WORKERD_V8_FLAGS; its stdout is captured by a wrapper named in
 * MINIFLARE_WORKERD_PATH), and every collection of every isolate in the process is read back. The
 * worker's own isolate is the one the inspector asks for a collection at the start. Numbers are
 * printed, never asserted.
 *
 * Knobs (environment): MEMORY_TURNS (thread size, 5000), MEMORY_STEP (turns between rows, 500).
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { findWorkerd, memoryOf, timedFetch } from "./harness.ts";
import { Inspector, startInspectedWorker } from "./inspector.ts";
import { bytes, count, positiveInt, table } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const TURNS = positiveInt(process.env.MEMORY_TURNS, 5_000);
const STEP = positiveInt(process.env.MEMORY_STEP, 500);
const THREAD = "measured";
const HEADERS = { authorization: "Bearer sk-local-dev", "content-type": "application/json" };

function log(message: string): void {
  process.stderr.write(`[memory] ${message}\n`);
}

/** One collection as `--trace-gc-nvp` prints it (the fields read here). */
interface Collection {
  process: number;
  isolate: string;
  gc: string;
  reason: string;
  start_memory_size: number;
  end_memory_size: number;
  end_object_size: number;
  new_space_capacity?: number;
  old_gen_allocation_limit?: number;
  new_space_survived?: number;
  allocated?: number;
}

/** The reason V8 gives for the collection the inspector asks for (`HeapProfiler.collectGarbage`). */
const MARK_REASON = "low memory notification";

const TRACE_LINE = /^\[(\d+):(0x[0-9a-f]+):\d+\]\s+[\d.]+ ms: GC: (\{.*\})$/;

function collections(trace: string): Collection[] {
  const out: Collection[] = [];
  for (const line of trace.split("\n")) {
    const match = TRACE_LINE.exec(line);
    if (!match?.[3]) continue;
    try {
      const fields = JSON.parse(match[3]) as Omit<Collection, "process" | "isolate">;
      if (fields.end_memory_size === undefined) continue;
      out.push({ ...fields, process: Number(match[1]), isolate: match[2] ?? "" });
    } catch {
      // A line another thread's output cut in two.
    }
  }
  return out;
}

/** A wrapper for the workerd binary that appends its stdout (where V8 traces) to `tracePath`. */
function tracingWorkerd(dir: string, tracePath: string): string {
  const wranglerRequire = createRequire(join(ROOT, "node_modules", "wrangler", "package.json"));
  const miniflareRequire = createRequire(wranglerRequire.resolve("miniflare"));
  const binary = miniflareRequire("workerd").default as string;
  const wrapper = join(dir, "workerd");
  // Line-buffered, so the trace on disk is current whenever it is read.
  writeFileSync(wrapper, `#!/bin/sh\nexec stdbuf -oL '${binary}' "$@" >> '${tracePath}'\n`);
  chmodSync(wrapper, 0o755);
  return wrapper;
}

interface Row {
  turns: number;
  rss: number;
  committed: number;
  used: number;
  /** Collections of the worker's isolate since the previous row. */
  since: Collection[];
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "spindle-memory-"));
  const tracePath = join(dir, "gc-trace.txt");
  process.env.MINIFLARE_WORKERD_PATH = tracingWorkerd(dir, tracePath);
  process.env.MINIFLARE_WORKERD_V8_FLAGS = "--trace-gc --trace-gc-nvp";
  const { worker, inspectorPort } = await startInspectedWorker(join(dir, "state"));
  let cdp: Inspector | undefined;
  try {
    await worker.ready;
    const url = await worker.url;
    const post = (path: string, body: unknown, status = 200) =>
      timedFetch(
        new URL(path, url),
        { method: "POST", headers: HEADERS, body: JSON.stringify(body) },
        status,
      );
    await post("/v1/threads", { id: THREAD, cwd: "/repo" }, 201);
    const pid = await findWorkerd("/do/spindle-Thread");
    cdp = await Inspector.connect(inspectorPort);
    // Marks the worker's isolate in the trace: the first one collected for a low-memory notice.
    await cdp.send("HeapProfiler.collectGarbage");

    type HeapUsage = { usedSize: number; totalSize: number };
    const rows: Row[] = [];
    let seen = 0;
    const ours = () => {
      const all = collections(readFileSync(tracePath, "utf8"));
      const marked = all.find((c) => c.reason === MARK_REASON);
      if (!marked) throw new Error("the trace holds no collection of the worker's isolate");
      const same = (c: Collection) => c.process === marked.process && c.isolate === marked.isolate;
      return { all, mine: all.filter(same), marked, same };
    };
    for (let turn = 1; turn <= TURNS; turn++) {
      await post(`/v1/threads/${THREAD}/turns`, { input: `Measured question ${turn}, please.` });
      if (turn % STEP !== 0 && turn !== TURNS) continue;
      const heap = await cdp.send<HeapUsage>("Runtime.getHeapUsage");
      const { mine } = ours();
      rows.push({
        turns: turn,
        rss: memoryOf(pid).rssBytes,
        committed: heap.totalSize,
        used: heap.usedSize,
        since: mine.slice(seen),
      });
      seen = mine.length;
      log(`${count(turn)} turns`);
    }
    const peakRss = memoryOf(pid).peakBytes;
    const { all, mine, marked, same } = ours();

    const mib = (n: number) => bytes(n);
    console.log(
      `# Where the memory goes (local run, ${new Date().toISOString()})\n\n` +
        `One thread grown by ${count(TURNS)} HTTP turns with the local model, in one workerd ` +
        `process (VmHWM ${mib(peakRss)}). "The isolate" is the worker's (the Thread Durable ` +
        `Object and the edge share it); the other isolates are the runtime's own (Miniflare's entry ` +
        `worker, the local R2 bucket, ...).\n`,
    );
    console.log(
      table(
        [
          "turns",
          "process VmRSS",
          "isolate committed",
          "isolate used",
          "new-space capacity",
          "old-gen limit",
          "scavenges",
          "mark-compacts",
          "survived ÷ turn",
          "allocated ÷ turn",
        ],
        rows.map((row, i) => {
          const last = row.since.at(-1);
          const turns = row.turns - (rows[i - 1]?.turns ?? 0);
          const sum = (f: (c: Collection) => number | undefined) =>
            row.since.reduce((total, c) => total + (f(c) ?? 0), 0);
          return [
            count(row.turns),
            mib(row.rss),
            mib(row.committed),
            mib(row.used),
            last?.new_space_capacity === undefined ? "–" : mib(last.new_space_capacity),
            last?.old_gen_allocation_limit === undefined ? "–" : mib(last.old_gen_allocation_limit),
            String(row.since.filter((c) => c.gc === "s").length),
            String(row.since.filter((c) => c.gc === "mc").length),
            bytes(sum((c) => c.new_space_survived) / turns),
            bytes(sum((c) => c.allocated) / turns),
          ];
        }),
      ),
    );
    console.log(
      `\nNew-space capacity is V8's young generation (semi-space) size: V8 doubles it each time ` +
        `the bytes surviving its scavenges add up to the capacity, up to its maximum, and keeps ` +
        `it while the isolate allocates quickly. The old generation grows until its limit, where ` +
        `the first mark-compact runs.\n`,
    );
    const peaks = new Map<string, { peak: number; collections: number }>();
    for (const c of all.filter((c) => c.process === marked.process)) {
      const key = same(c) ? "the worker's isolate" : `isolate ${c.isolate}`;
      const entry = peaks.get(key) ?? { peak: 0, collections: 0 };
      entry.peak = Math.max(entry.peak, c.start_memory_size, c.end_memory_size);
      entry.collections += 1;
      peaks.set(key, entry);
    }
    console.log(
      table(
        ["isolate (this process)", "peak heap", "collections"],
        [...peaks]
          .sort((a, b) => b[1].peak - a[1].peak)
          .map(([key, p]) => [key, mib(p.peak), String(p.collections)]),
      ),
    );
    console.log(`\n${mine.length} collections of the worker's isolate read from the trace.`);
  } finally {
    cdp?.close();
    await worker.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
