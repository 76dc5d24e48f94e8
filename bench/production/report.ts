/** The report of `bench:production`: markdown tables with ratios, and the run's header. */
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { fileURLToPath } from "node:url";
import type { Memory } from "../harness.ts";
import { bytes, count, kib, median, ms, percentile, ratio, spread, table } from "../stats.ts";
import type { Bundle } from "./bundle.ts";
import { LOCAL_MODEL } from "./clients.ts";
import type { FilePages } from "./pages.ts";
import type { HeapUsage } from "./runtime.ts";
import type { StorageReport } from "./worker.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** One turn: its latency and the stand-in's own time for the requests it made. */
export interface Measured {
  total: number;
  standIn: number;
  requests: number;
}

export interface StorageAt {
  turns: number;
  report: StorageReport;
  fileBytes: number | undefined;
  /** Undefined without the `sqlite3` command. */
  pages: FilePages | undefined;
  r2: { objects: number; bytes: number };
  bareTurns: number;
  bareDatabaseSize: number;
}

export interface SizeResult {
  size: number;
  warmPrior: [number, number];
  request: Record<"spindle" | "bare", { bytes: number; items: number }>;
  warm: Record<"spindle" | "bare", Measured[]>;
  cold: Record<"spindle" | "bare", Measured[]>;
  restart: { spindle: Measured[]; bare: Measured[]; spindleStart: number[]; bareStart: number[] };
  storage: StorageAt;
  heap: {
    spindleLive: HeapUsage;
    bareLive: HeapUsage;
    spindlePeak: number;
    barePeak: number;
    spindlePolled: number;
    barePolled: number;
    polledSamples: number;
    spindleRss: Memory;
    bareRss: Memory;
  };
}

export interface ReportInput {
  run: { startedAt: Date; seconds: number; loadBefore: number[]; loadAfter: number[] };
  knobs: { timed: number; warmup: number; cold: number; restarts: number; probes: number };
  /** The model the thread was grown on, and the `openai` model's context window. */
  seed: { model: string; openaiWindow: number };
  bundles: Record<"spindle" | "bare", Bundle>;
  evaluations: Record<"spindle" | "bare", number[]>;
  fresh: StorageAt;
  sizes: SizeResult[];
  seeding: { from: number; to: number; seconds: number }[];
  notes: string[];
}

/** The version in the first of `paths` (under node_modules) that has a package.json. */
function installed(...paths: string[]): string {
  for (const path of paths) {
    try {
      const pkg = readFileSync(`${ROOT}node_modules/${path}/package.json`, "utf8");
      return (JSON.parse(pkg) as { version: string }).version;
    } catch {
      // Not installed there; try the next place.
    }
  }
  return "?";
}

const totals = (samples: Measured[]) => samples.map((m) => m.total);
const own = (samples: Measured[]) => samples.map((m) => m.total - m.standIn);
const each = (values: number[]) => values.map((v) => v.toFixed(1)).join(", ");
const turnsLabel = (n: number) => `${count(n)} ${n === 1 ? "turn" : "turns"}`;
const mib = (n: number | undefined) => bytes(n);

/** The run's machine line: tool versions, cores, Node, start, duration and load. */
export function runHeader(run: ReportInput["run"]): string {
  const cpu = cpus();
  const load = (l: number[]) => l.map((v) => v.toFixed(2)).join(" ");
  return [
    `Local run, wrangler ${installed("wrangler")}/miniflare ${installed("wrangler/node_modules/miniflare", "miniflare")}`,
    `(workerd ${installed("wrangler/node_modules/@cloudflare/workerd-linux-64", "@cloudflare/workerd-linux-64")}),`,
    `${cpu.length} cores (${cpu[0]?.model.trim() ?? "unknown CPU"}), Node ${process.version},`,
    `${run.startedAt.toISOString()}, ${Math.round(run.seconds)} s in all,`,
    `load average ${load(run.loadBefore)} before and ${load(run.loadAfter)} after.`,
    "Simulator numbers for comparing runs and spotting growth, not production latencies.",
  ].join(" ");
}

function requestsTable(sizes: SizeResult[]): string {
  return table(
    ["thread", "Spindle → provider", "input items", "bare → provider", "input items", "÷ bare"],
    sizes.map((s) => [
      turnsLabel(s.size),
      bytes(s.request.spindle.bytes),
      count(s.request.spindle.items),
      bytes(s.request.bare.bytes),
      count(s.request.bare.items),
      ratio(s.request.spindle.bytes, s.request.bare.bytes),
    ]),
  );
}

function warmTable(sizes: SizeResult[]): string {
  return table(
    [
      "thread",
      "prior turns",
      "Spindle p50",
      "p99",
      "stand-in p50",
      "Spindle's part p50",
      "bare p50",
      "p99",
      "bare's part p50",
      "p50 ÷ bare",
      "p99 ÷ bare",
      "part ÷ bare's part",
      "p50 ÷ previous size",
    ],
    sizes.map((s, i) => {
      const [p50, p99] = [median(totals(s.warm.spindle)), percentile(totals(s.warm.spindle), 99)];
      const [b50, b99] = [median(totals(s.warm.bare)), percentile(totals(s.warm.bare), 99)];
      const previous = sizes[i - 1];
      return [
        turnsLabel(s.size),
        `${count(s.warmPrior[0])}–${count(s.warmPrior[1])}`,
        ms(p50),
        ms(p99),
        ms(median(s.warm.spindle.map((m) => m.standIn))),
        ms(median(own(s.warm.spindle))),
        ms(b50),
        ms(b99),
        ms(median(own(s.warm.bare))),
        ratio(p50, b50),
        ratio(p99, b99),
        ratio(median(own(s.warm.spindle)), median(own(s.warm.bare))),
        previous ? ratio(p50, median(totals(previous.warm.spindle))) : "–",
      ];
    }),
  );
}

function coldTable(sizes: SizeResult[]): string {
  return table(
    [
      "thread",
      "Spindle: median",
      "min–max",
      "stand-in median",
      "bare: median",
      "min–max",
      "÷ bare",
      "÷ Spindle warm p50",
    ],
    sizes.map((s) => {
      const c = median(totals(s.cold.spindle));
      return [
        turnsLabel(s.size),
        ms(c),
        spread(totals(s.cold.spindle)),
        ms(median(s.cold.spindle.map((m) => m.standIn))),
        ms(median(totals(s.cold.bare))),
        spread(totals(s.cold.bare)),
        ratio(c, median(totals(s.cold.bare))),
        ratio(c, median(totals(s.warm.spindle))),
      ];
    }),
  );
}

function restartTable(sizes: SizeResult[]): string {
  return table(
    [
      "thread",
      "Spindle first turn, ms",
      "stand-in, ms",
      "bare first turn, ms",
      "median ÷ bare",
      "Spindle start → ready, ms",
      "bare start → ready, ms",
    ],
    sizes.map((s) => [
      turnsLabel(s.size),
      each(totals(s.restart.spindle)),
      each(s.restart.spindle.map((m) => m.standIn)),
      each(totals(s.restart.bare)),
      ratio(median(totals(s.restart.spindle)), median(totals(s.restart.bare))),
      each(s.restart.spindleStart),
      each(s.restart.bareStart),
    ]),
  );
}

function bundleTable(input: ReportInput): string {
  const bare = median(input.evaluations.bare);
  return table(
    [
      "worker",
      "wrangler: Total Upload",
      "gzip",
      "modules written",
      "their gzip",
      "global scope: median",
      "min–max",
      "÷ bare",
    ],
    (["spindle", "bare"] as const).map((side) => {
      const b = input.bundles[side];
      const e = input.evaluations[side];
      return [
        side === "spindle" ? "Spindle (`wrangler.toml`)" : "bare (`bench/bare/wrangler.toml`)",
        kib(b.uploadKiB),
        kib(b.uploadGzipKiB),
        bytes(b.bytes),
        bytes(b.gzipBytes),
        ms(median(e)),
        spread(e),
        ratio(median(e), bare),
      ];
    }),
  );
}

function bytesTable(fresh: StorageAt, sizes: SizeResult[]): string {
  const row = (label: string, st: StorageAt) => {
    const messages = 2 * st.turns;
    const bareMessages = 2 * st.bareTurns;
    const spindlePer = (st.report.databaseSize + st.r2.bytes) / messages;
    const barePer = st.bareDatabaseSize / bareMessages;
    return [
      label,
      count(messages),
      bytes(st.report.databaseSize),
      bytes(st.fileBytes),
      `${bytes(st.r2.bytes)} (${count(st.r2.objects)})`,
      bytes(spindlePer),
      bytes(st.bareDatabaseSize),
      bytes(barePer),
      ratio(spindlePer, barePer),
    ];
  };
  return table(
    [
      "thread",
      "messages",
      "Spindle databaseSize",
      "file + WAL on disk",
      "R2 (objects)",
      "(SQLite + R2) ÷ message",
      "bare databaseSize",
      "bare ÷ message",
      "÷ bare",
    ],
    [
      row(`new thread, ${turnsLabel(fresh.turns)}`, fresh),
      ...sizes.map((s) => row(turnsLabel(s.storage.turns), s.storage)),
    ],
  );
}

function tablesTable(fresh: StorageAt, sizes: SizeResult[]): string {
  const columns = [fresh, ...sizes.map((s) => s.storage)];
  const names = [...new Set(columns.flatMap((c) => c.report.tables.map((t) => t.table)))];
  return table(
    ["table: rows, value bytes", ...columns.map((c) => turnsLabel(c.turns))],
    names.map((name) => [
      `\`${name}\``,
      ...columns.map((c) => {
        const t = c.report.tables.find((x) => x.table === name);
        return t ? `${count(t.rows)}, ${bytes(t.bytes)}` : "–";
      }),
    ]),
  );
}

function pagesSection(fresh: StorageAt, sizes: SizeResult[]): string[] {
  const pages = pagesTable(fresh, sizes);
  if (pages === undefined) return [];
  return [
    "### Spindle's SQLite pages (from the database file)",
    "",
    pages,
    "",
    "Read with the `sqlite3` command (`dbstat`, `PRAGMA freelist_count`) from a copy of the object's file and write-ahead log. A table with a rowid and a TEXT or composite key has a second b-tree, its `sqlite_autoindex_…`; `sqlite_schema` is page 1; `_cf_METADATA` is the runtime's and `__miniflare_do_name` local Miniflare's. Free pages are what deleted rows left (the rollout tail after a checkpoint, dropped events); inserts reuse them, and they are not in databaseSize.",
    "",
  ];
}

/** Pages by table and index at each size, then the free pages and the pages in use. */
function pagesTable(fresh: StorageAt, sizes: SizeResult[]): string | undefined {
  const columns = [fresh, ...sizes.map((s) => s.storage)];
  const pages = columns.map((c) => c.pages);
  if (pages.some((p) => p === undefined)) return undefined;
  const known = pages as FilePages[];
  const names = [...new Set(known.flatMap((p) => p.byName.map((b) => b.name)))].sort();
  const inUse = (p: FilePages) => p.pageCount - p.freePages;
  return table(
    ["b-tree: pages", ...columns.map((c) => turnsLabel(c.turns))],
    [
      ...names.map((name) => [
        `\`${name}\``,
        ...known.map((p) => {
          const n = p.byName.find((b) => b.name === name)?.pages;
          return n === undefined ? "–" : count(n);
        }),
      ]),
      ["free pages (freelist)", ...known.map((p) => count(p.freePages))],
      [
        "pages in use × page size",
        ...known.map((p) => `${count(inUse(p))} × ${p.pageSize} = ${bytes(inUse(p) * p.pageSize)}`),
      ],
    ],
  );
}

function heapTable(sizes: SizeResult[]): string {
  return table(
    [
      "thread",
      "Spindle live after GC",
      "committed",
      "peak after a turn",
      "peak during a turn",
      "array buffers",
      "bare live after GC",
      "bare peak",
      "live ÷ bare",
      "Spindle VmRSS",
      "VmHWM",
      "bare VmRSS",
      "VmHWM",
    ],
    sizes.map(({ size, heap: h }) => [
      turnsLabel(size),
      mib(h.spindleLive.usedSize),
      mib(h.spindleLive.totalSize),
      mib(h.spindlePeak),
      mib(h.spindlePolled),
      mib(h.spindleLive.backingStorageSize),
      mib(h.bareLive.usedSize),
      mib(Math.max(h.barePeak, h.barePolled)),
      ratio(h.spindleLive.usedSize, h.bareLive.usedSize),
      mib(h.spindleRss.rssBytes),
      mib(h.spindleRss.peakBytes),
      mib(h.bareRss.rssBytes),
      mib(h.bareRss.peakBytes),
    ]),
  );
}

export function productionReport(input: ReportInput): string {
  const { knobs, sizes, fresh, seed } = input;
  const grown =
    seed.model === LOCAL_MODEL
      ? "with the local model (`spindle-local`) and switched to the `openai` model for every measured turn"
      : `on the \`openai\` model (a ${count(seed.openaiWindow)}-token window), every seeding turn a request to the stand-in, as every measured turn is`;
  const seeding = table(
    [`seeded turns (\`${seed.model}\`)`, "seconds", "mean ms/turn"],
    input.seeding.map((b) => [
      `${count(b.from)} → ${count(b.to)}`,
      b.seconds.toFixed(1),
      ((b.seconds * 1000) / (b.to - b.from)).toFixed(1),
    ]),
  );
  return [
    "# Spindle on the production path",
    "",
    runHeader(input.run),
    "",
    "Spindle runs its production worker (with a `Thread` subclass that only adds a storage read, `bench/production/worker.ts`) with the `openai` provider pointed at a Responses stand-in in the bench process on 127.0.0.1, which answers every request at once. The control is a bare chat Durable Object (`bench/bare/chat.ts`) that keeps its messages in SQLite and memory and sends all of them to the same stand-in on every turn. Each runs in its own `unstable_startWorker` runtime and workerd process with the inspector connected; every request is an HTTP exchange timed from send to the last body byte. One Spindle thread is grown " +
      grown +
      "; the bare object is seeded to the same number of turns. After each runtime start both isolates are warmed on a throwaway thread.",
    "",
    "## The provider request at each size (the last warm turn's)",
    "",
    requestsTable(sizes),
    "",
    "## Warm turn on the `openai` provider",
    "",
    warmTable(sizes),
    "",
    `${knobs.timed} timed turns after ${knobs.warmup} untimed ones on each side, the bare DO's first. *Stand-in* is the stand-in's own time per request (first request byte in to last answer byte out); *part* is each turn's latency minus its stand-in time. p99 is nearest-rank (with ${knobs.timed} samples, the slowest). Spindle's timed turns include whatever its flush alarm (1 s after a turn) and checkpoints do meanwhile.`,
    "",
    "## Cold start after eviction (first turn; storage and isolate kept)",
    "",
    coldTable(sizes),
    "",
    `${knobs.cold} evictions per size, alternating: the bare DO, then Spindle after its flush alarm ran (so no alarm loads the thread first). The bare DO reads all its messages back from SQLite on its first turn.`,
    "",
    "## Cold start after a runtime restart (first turn on persisted state)",
    "",
    restartTable(sizes),
    "",
    `${knobs.restarts} restarts per size: the runtime is stopped and a new one (a new workerd process) started on the same persist directory, the inspector connected, then the first turn is timed. *Start → ready* (bundling with esbuild, starting workerd, evaluating the worker's global scope) is not part of the first turn.`,
    "",
    "## Deploy bundle and global-scope evaluation",
    "",
    bundleTable(input),
    "",
    `Sizes: what \`wrangler deploy --dry-run --outdir\` reports and writes (source maps excluded). Global scope: ${input.evaluations.spindle.length} fresh Node ${process.version} processes per bundle, each timing \`import()\` of the bundle (read, compile, evaluate the top level) with \`cloudflare:*\` modules mapped to stubs; Node's V8, not workerd's, so compare the two rows rather than read either as workerd's time.`,
    "",
    "## Bytes per message (after the flush alarm ran; a turn = 2 messages)",
    "",
    bytesTable(fresh, sizes),
    "",
    "*databaseSize* is `ctx.storage.sql.databaseSize`, what the object reads of its own size: its pages in use (the file's pages less those on the freelist, as the page table below shows); Cloudflare bills SQLite stored data in GB-months on its own storage layer, and this is the closest figure an object can read. *file + WAL on disk* is local workerd's database file plus its write-ahead log, which an unchecked WAL makes larger. R2 is the sum of object sizes under the thread's prefix.",
    "",
    "### Spindle's SQLite tables (stored value bytes, not pages)",
    "",
    tablesTable(fresh, sizes),
    "",
    ...pagesSection(fresh, sizes),
    "## Isolate heap (V8, over the inspector)",
    "",
    heapTable(sizes),
    "",
    `*Live after GC*: \`Runtime.getHeapUsage\` after \`HeapProfiler.collectGarbage\`, at the end of each size's measurements; *committed* is the heap's total size then. *Peak after a turn*: the largest \`usedSize\` read right after each of the size's turns (seeding included; garbage not yet collected counts). *Peak during a turn*: the largest read while ${knobs.probes} more turns ran, asking again as soon as the isolate answered (${count(sizes.reduce((n, s) => n + s.heap.polledSamples, 0))} reads in all); the isolate answers between its own tasks, not inside synchronous code. *Array buffers*: backing stores outside the V8 heap. The worker and its Durable Object share one isolate. VmRSS/VmHWM: the workerd process (the runtime's own isolates included), printed beside, not a goal.`,
    "",
    "## Seeding",
    "",
    seeding,
    ...(input.notes.length > 0 ? ["", "## Notes", "", ...input.notes.map((n) => `- ${n}`)] : []),
    "",
  ].join("\n");
}
