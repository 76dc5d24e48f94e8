/**
 * `npm run bench:forks`: forking a long thread (design §14), copy against shared storage, over a
 * loopback socket to the worker as `npm start` runs it (local Durable Objects and R2 on disk).
 * Numbers are printed (and written to bench/results-forks.md), never asserted.
 *
 * One thread gets BENCH_FORK_TURNS (5,000) turns on the local model and is flushed to R2. It is
 * then forked BENCH_FORK_SAMPLES (3) times with the default (forks borrow the source's segments)
 * and as many times with `SPINDLE_FORKS=copy` (the same persisted state, the worker restarted).
 * For each fork: the fork request's time; the time until its storage stops changing (its own R2
 * flush and checkpoint, polled every 25 ms, quiet for 1.5 s); the bytes R2 and the Durable
 * Objects' SQLite files grew by; and that its rollout reads back line for line as its source's.
 */
import { type Dirent, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type LocalWorker, startLocalWorker } from "../test/e2e/local-worker.ts";
import { sleep, timedFetch } from "./harness.ts";
import { bytes, count, median, ms, positiveInt, ratio, table } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const TURNS = positiveInt(process.env.BENCH_FORK_TURNS, 5_000);
const SAMPLES = positiveInt(process.env.BENCH_FORK_SAMPLES, 3);
const HEADERS = { authorization: "Bearer sk-local-dev", "content-type": "application/json" };
const POLL_MS = 25;
const QUIET_MS = 1_500;
const SETTLE_MAX_MS = 120_000;

/** Bytes of every file under `dir` (0 when it does not exist yet). */
function treeBytes(dir: string): number {
  let total = 0;
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? treeBytes(path) : statSync(path).size;
  }
  return total;
}

const persist = mkdtempSync(join(tmpdir(), "spindle-bench-forks-"));
const storage = () => ({
  r2: treeBytes(join(persist, "v3", "r2")),
  sqlite: treeBytes(join(persist, "v3", "do")),
});

/**
 * Waits until the local storage has not changed for `QUIET_MS`; answers when it last changed,
 * in ms after `since`.
 */
async function settled(since: number): Promise<number> {
  let last = storage();
  let changedAt = performance.now();
  while (performance.now() - changedAt < QUIET_MS) {
    if (performance.now() - since > SETTLE_MAX_MS) throw new Error("storage never settled");
    await sleep(POLL_MS);
    const now = storage();
    if (now.r2 !== last.r2 || now.sqlite !== last.sqlite) {
      last = now;
      changedAt = performance.now();
    }
  }
  return changedAt - since;
}

interface ForkSample {
  requestMs: number;
  settledMs: number;
  r2Bytes: number;
  sqliteBytes: number;
  sameLines: boolean;
}

function client(worker: LocalWorker) {
  return (method: string, path: string, body?: unknown, status = 200) =>
    timedFetch(
      new URL(path, worker.url),
      { method, headers: HEADERS, ...(body === undefined ? {} : { body: JSON.stringify(body) }) },
      status,
    );
}

/** The rollout after its first line (the thread's own `session_meta`). */
async function linesAfterFirst(api: ReturnType<typeof client>, id: string): Promise<string[]> {
  const { body } = await api("GET", `/v1/threads/${id}/rollout`);
  return body
    .split("\n")
    .filter((l) => l !== "")
    .slice(1);
}

async function forkSamples(
  mode: "share" | "copy",
  source: string,
  sourceLines: string[],
): Promise<ForkSample[]> {
  const worker = await startLocalWorker(persist, mode === "copy" ? { SPINDLE_FORKS: "copy" } : {});
  const api = client(worker);
  const samples: ForkSample[] = [];
  try {
    // The source is loaded before anything is timed: every sample starts from a warm source.
    await api("GET", `/v1/threads/${source}`);
    await settled(performance.now());
    for (let i = 0; i < SAMPLES; i++) {
      const id = `t_bench_fork_${mode}_${i}`;
      const before = storage();
      const start = performance.now();
      const { ms: requestMs } = await api("POST", `/v1/threads/${source}/fork`, { id }, 201);
      const settledMs = await settled(start);
      const after = storage();
      const lines = await linesAfterFirst(api, id);
      samples.push({
        requestMs,
        settledMs,
        r2Bytes: after.r2 - before.r2,
        sqliteBytes: after.sqlite - before.sqlite,
        sameLines:
          lines.length === sourceLines.length && lines.every((l, j) => l === sourceLines[j]),
      });
    }
  } finally {
    await worker.dispose();
  }
  return samples;
}

const started = Date.now();
try {
  const source = "t_bench_fork_source";
  let sourceLines: string[];
  let seedMs: number;
  {
    const worker = await startLocalWorker(persist);
    const api = client(worker);
    try {
      await api("POST", "/v1/threads", { id: source, cwd: "/repo" }, 201);
      const seedStart = performance.now();
      for (let turn = 1; turn <= TURNS; turn++) {
        await api("POST", `/v1/threads/${source}/turns`, { input: `turn ${turn}: go on` });
      }
      seedMs = performance.now() - seedStart;
      await settled(performance.now());
      sourceLines = await linesAfterFirst(api, source);
    } finally {
      await worker.dispose();
    }
  }
  const sourceBytes = sourceLines.reduce((sum, l) => sum + Buffer.byteLength(l) + 1, 0);
  const shared = await forkSamples("share", source, sourceLines);
  const copied = await forkSamples("copy", source, sourceLines);

  const of = (samples: ForkSample[], pick: (s: ForkSample) => number) => median(samples.map(pick));
  const row = (what: string, pick: (s: ForkSample) => number, show: (n: number) => string) => [
    what,
    show(of(copied, pick)),
    show(of(shared, pick)),
    ratio(of(shared, pick), of(copied, pick)),
  ];
  const report = [
    "# Forks: copy against shared segments",
    "",
    `Generated by \`npm run bench:forks\` on ${new Date().toISOString().slice(0, 10)}: ` +
      `${cpus().length} cores, load ${loadavg()[0]?.toFixed(2)}, ` +
      `${((Date.now() - started) / 1000).toFixed(0)} s in all. ` +
      "The worker as `npm start` runs it (local Durable Objects and R2 on disk), over loopback.",
    "",
    `The source: ${count(TURNS)} turns on the local model (seeded in ${(seedMs / 1000).toFixed(0)} s), ` +
      `${count(sourceLines.length + 1)} rollout lines, ${bytes(sourceBytes)} of JSONL, flushed to R2 ` +
      `before the forks. Medians of ${SAMPLES} forks each; "settled" is when the local storage ` +
      `last changed (polled every ${POLL_MS} ms, then quiet for ${QUIET_MS / 1000} s): the fork's ` +
      "flush and checkpoint included. Bytes are what the files on disk grew by.",
    "",
    table(
      ["per fork", "copy (`SPINDLE_FORKS=copy`)", "shared (default)", "shared ÷ copy"],
      [
        row("`POST …/fork` answered", (s) => s.requestMs, ms),
        row("storage settled", (s) => s.settledMs, ms),
        row("R2 bytes written", (s) => s.r2Bytes, bytes),
        row("SQLite bytes written", (s) => s.sqliteBytes, bytes),
      ],
    ),
    "",
    `Every fork's rollout read back line for line as its source's: ` +
      `${[...shared, ...copied].every((s) => s.sameLines) ? "yes" : "NO"}.`,
    "",
  ].join("\n");
  writeFileSync(join(ROOT, "bench", "results-forks.md"), report);
  console.log(report);
} finally {
  rmSync(persist, { recursive: true, force: true });
}
