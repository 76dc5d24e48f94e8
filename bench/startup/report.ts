/** The report of `bench:startup`: the goals, then one table per measure. */
import type { Bundle } from "../production/bundle.ts";
import { runHeader } from "../production/report.ts";
import { bytes, kib, median, ms, ratio, spread, table } from "../stats.ts";
import type { Evaluation } from "./new-isolate.ts";

export type Side = "spindle" | "bare";

export interface FirstRequests {
  healthz: Record<Side, number[]>;
  turn: Record<Side, number[]>;
  /** Start → ready of every fresh runtime. */
  ready: Record<Side, number[]>;
}

export interface StartupInput {
  run: { startedAt: Date; seconds: number; loadBefore: number[]; loadAfter: number[] };
  runs: number;
  priorTurns: number;
  bundles: Record<Side, Bundle>;
  node: Record<Side, number[]>;
  workerd: Record<Side, Evaluation[]>;
  /** A new isolate's first `GET /healthz`: the import and the request. */
  isolateHealthz: Record<Side, Evaluation[]>;
  /** Self time of workerd evaluating Spindle's bundle, ms by source file. */
  profile: Map<string, number>;
  first: FirstRequests;
  profileOut?: string;
}

/** The issue's goals: a fresh runtime's first request, the global scope, the bundle. */
const GOALS = { firstRatio: 1.5, globalScopeMs: 5, bundleKiB: 400 };
/** Rows of the "what takes it" tables. */
const TOP = 15;

/**
 * What a source file is counted under: a package (zod by its layer: `zod/v4/core`,
 * `zod/v4/classic`, …), or the repository's folder (`shared/api`, `worker`, …).
 */
export function groupOf(path: string): string {
  const inPackage = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)(?:\/([^/]+)\/([^/]+))?/.exec(path);
  if (inPackage?.[1]) {
    return inPackage[1] === "zod" && inPackage[2] && inPackage[3]
      ? `zod/${inPackage[2]}/${inPackage[3]}`
      : inPackage[1];
  }
  const parts = path.split("/");
  if (parts[0] === "shared" && parts.length > 2) return `${parts[0]}/${parts[1]}`;
  return parts.length > 1 ? (parts[0] ?? path) : path;
}

function grouped(values: Map<string, number>): [string, number][] {
  const out = new Map<string, number>();
  for (const [path, value] of values) {
    const group = groupOf(path);
    out.set(group, (out.get(group) ?? 0) + value);
  }
  return [...out].sort((a, b) => b[1] - a[1]);
}

const met = (ok: boolean) => (ok ? "yes" : "no");
const share = (part: number, total: number) => `${((100 * part) / total).toFixed(1)} %`;

function goalsTable(input: StartupInput): string {
  const first = (kind: "healthz" | "turn") => {
    const s = median(input.first[kind].spindle);
    const b = median(input.first[kind].bare);
    return [
      ms(s),
      ms(b),
      ratio(s, b),
      `≤ ${GOALS.firstRatio}× bare`,
      met(s <= GOALS.firstRatio * b),
    ];
  };
  const node = median(input.node.spindle);
  const upload = input.bundles.spindle.uploadKiB ?? Number.NaN;
  const isolate = (side: Side) => median(input.isolateHealthz[side].map((e) => e.ms));
  return table(
    ["goal", "Spindle", "bare", "÷ bare", "goal", "met"],
    [
      [
        "new isolate: import and first `GET /healthz`",
        ms(isolate("spindle")),
        ms(isolate("bare")),
        ratio(isolate("spindle"), isolate("bare")),
        `≤ ${GOALS.firstRatio}× bare`,
        met(isolate("spindle") <= GOALS.firstRatio * isolate("bare")),
      ],
      ["fresh runtime: first `GET /healthz`", ...first("healthz")],
      ["fresh runtime: first turn on an existing thread", ...first("turn")],
      [
        "global scope (Node, median)",
        ms(node),
        ms(median(input.node.bare)),
        ratio(node, median(input.node.bare)),
        `≤ ${GOALS.globalScopeMs} ms`,
        met(node <= GOALS.globalScopeMs),
      ],
      [
        "deploy bundle (wrangler's Total Upload)",
        kib(upload),
        kib(input.bundles.bare.uploadKiB),
        ratio(upload, input.bundles.bare.uploadKiB ?? Number.NaN),
        `≤ ${GOALS.bundleKiB} KiB`,
        met(upload <= GOALS.bundleKiB),
      ],
    ],
  );
}

function firstTable(first: FirstRequests): string {
  const row = (label: string, s: number[], b: number[]) => [
    label,
    ms(median(s)),
    spread(s),
    ms(median(b)),
    spread(b),
    ratio(median(s), median(b)),
  ];
  return table(
    ["request", "Spindle: median", "min–max", "bare: median", "min–max", "÷ bare"],
    [
      row("first `GET /healthz`", first.healthz.spindle, first.healthz.bare),
      row("first turn on an existing thread", first.turn.spindle, first.turn.bare),
      row("start → ready (every runtime)", first.ready.spindle, first.ready.bare),
    ],
  );
}

function globalScopeTable(input: StartupInput): string {
  const times = (samples: Evaluation[]) => samples.map((e) => e.ms);
  const row = (label: string, of: (side: Side) => number[]) => [
    label,
    ms(median(of("spindle"))),
    spread(of("spindle")),
    ms(median(of("bare"))),
    spread(of("bare")),
    ratio(median(of("spindle")), median(of("bare"))),
  ];
  return table(
    ["measure", "Spindle: median", "min–max", "bare: median", "min–max", "÷ bare"],
    [
      row("global scope in Node: `import()`", (side) => input.node[side]),
      row("global scope in workerd: `GET /import`", (side) => times(input.workerd[side])),
      row("new isolate: import and first `GET /healthz`", (side) =>
        times(input.isolateHealthz[side]),
      ),
      row("a plain request to the loader after either", (side) =>
        [...input.workerd[side], ...input.isolateHealthz[side]].map((e) => e.requestMs),
      ),
    ],
  );
}

function profileTable(profile: Map<string, number>): string {
  const total = [...profile.values()].reduce((a, b) => a + b, 0);
  const rows = (entries: [string, number][]) =>
    entries.slice(0, TOP).map(([name, time]) => [name, ms(time), share(time, total)]);
  const files = [...profile].sort((a, b) => b[1] - a[1]);
  return [
    table(["where (package or folder)", "self time", "share"], rows(grouped(profile))),
    "",
    table(["source file", "self time", "share"], rows(files)),
    "",
    `Sampled CPU in all: ${ms(total)}.`,
  ].join("\n");
}

function bundleTable(bundles: Record<Side, Bundle>): string {
  return table(
    ["worker", "wrangler: Total Upload", "gzip", "modules written", "their gzip"],
    (["spindle", "bare"] as const).map((side) => [
      side === "spindle" ? "Spindle (`wrangler.toml`)" : "bare (`bench/bare/wrangler.toml`)",
      kib(bundles[side].uploadKiB),
      kib(bundles[side].uploadGzipKiB),
      bytes(bundles[side].bytes),
      bytes(bundles[side].gzipBytes),
    ]),
  );
}

function inputsTable(bundle: Bundle): string {
  const total = [...bundle.inputs.values()].reduce((a, b) => a + b, 0);
  return table(
    ["what (package or folder)", "bytes in the bundle", "share"],
    grouped(bundle.inputs)
      .slice(0, TOP)
      .map(([name, size]) => [name, bytes(size), share(size, total)]),
  );
}

export function startupReport(input: StartupInput): string {
  const evaluations = input.node.spindle.length;
  return [
    "# Spindle's startup: a new isolate's first request",
    "",
    runHeader(input.run),
    "",
    "Spindle's production worker and the bare one-DO worker (`bench/bare/`) are measured in the same run. On Cloudflare a new isolate (a deploy, a new location, another isolate started for load) compiles the bundle and runs its global scope, then serves its first request: the bundle, the global scope and the first request are each measured below.",
    "",
    "## Goals",
    "",
    goalsTable(input),
    "",
    "## First request of a fresh runtime",
    "",
    firstTable(input.first),
    "",
    `${input.runs} fresh runtimes per side and request, alternating sides (bare first): each a new workerd process (\`unstable_startWorker\`) on the persisted state of the run, whose first request is timed from send to the last body byte, sent to the runtime itself (not through wrangler's development proxy). The thread (and the bare chat object) had ${input.priorTurns} turns on the \`openai\` provider against the stand-in (\`bench/production/standin.ts\`) before the first runtime; each timed turn is one more, and Spindle's flush alarm has run before each restart. Each timed request waits until the bench process's event loop is quiet (wrangler works on in it after a start; \`quietLoop\` in \`bench/harness.ts\`). workerd evaluates a worker's global scope while it starts, so it is in *start → ready* (with wrangler's bundling and the process start), not in these first requests: the new-isolate row below has both.`,
    "",
    "## Global scope",
    "",
    globalScopeTable(input),
    "",
    `*Node*: ${evaluations} fresh Node ${process.version} processes per bundle, each timing \`import()\` of the deploy bundle with \`cloudflare:*\` mapped to stubs (\`bench/production/evaluate.ts\`). *workerd*: ${evaluations} fresh runtimes per bundle and measure, each running a loader Worker (\`bench/startup/new-isolate.ts\`) whose \`GET /import\` imports the deploy bundle, and whose \`GET /healthz\` imports it and hands the request to the bundle's \`fetch\`: what a new isolate on Cloudflare does for its first request. Each is timed from outside, after one plain request to the loader; the plain request after it is what a request to the loader costs alone.`,
    "",
    "### Where workerd's evaluation of Spindle's global scope goes",
    "",
    profileTable(input.profile),
    "",
    `One more \`GET /import\`, profiled (V8's sampling profiler over the inspector, every 100 µs; a sample counts for at most 1 ms), self time mapped to source files through the bundle's source map. \`(program)\` is V8's own work outside JavaScript functions (compiling among it), \`(garbage collector)\` its collections.${input.profileOut ? ` The profile was written to ${input.profileOut}.` : ""}`,
    "",
    "## Deploy bundle",
    "",
    bundleTable(input.bundles),
    "",
    "### What takes Spindle's bundle",
    "",
    inputsTable(input.bundles.spindle),
    "",
    "Sizes: what `wrangler deploy --dry-run --outdir` reports and writes (source maps excluded); the bytes each input takes come from esbuild's metafile (`--metafile`), minified.",
    "",
  ].join("\n");
}
