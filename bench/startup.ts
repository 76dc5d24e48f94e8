/**
 * `npm run bench:startup`: what a new isolate pays before and for its first request, for Spindle
 * and the bare one-DO worker in the same run: the deploy bundle's size (and what takes it), its
 * global scope's evaluation (in Node, and in workerd with a CPU profile of where it goes), and a
 * fresh runtime's first `GET /healthz` and first turn on an existing thread (persisted state, a
 * new workerd process each time). Prints the report (numbers, never asserted) and writes it to
 * bench/results-startup.md. See bench/README.md.
 *
 * Knobs (environment): STARTUP_RUNS (fresh runtimes per side and request, 5),
 * STARTUP_EVALUATIONS (global-scope samples per bundle, in Node and in workerd, 5),
 * STARTUP_PROFILE_OUT (a directory: the CPU profile of workerd evaluating Spindle's bundle is
 * written there).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type CpuProfile, selfTimeBy, sourceFileOf } from "./cpu-profile.ts";
import { quietLoop, timedFetch } from "./harness.ts";
import { type Bundle, buildBundle, evaluateOnce } from "./production/bundle.ts";
import { BareSide, OPENAI_MODEL, SpindleSide } from "./production/clients.ts";
import { Runtime } from "./production/runtime.ts";
import { StandIn } from "./production/standin.ts";
import { BUNDLE_MODULE, type Evaluation, newIsolate, sourceMapOf } from "./startup/new-isolate.ts";
import { type FirstRequests, type Side, startupReport } from "./startup/report.ts";
import { median, ms, positiveInt } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const RUNS = positiveInt(process.env.STARTUP_RUNS, 5);
const EVALUATIONS = positiveInt(process.env.STARTUP_EVALUATIONS, 5);
const PROFILE_OUT = process.env.STARTUP_PROFILE_OUT;
/** Turns the measured thread has before the first fresh runtime: an existing conversation. */
const PRIOR_TURNS = 10;
/** A sample counts for at most this in a profile (the sampler runs every 100 µs). */
const MAX_SAMPLE_GAP_US = 1_000;
const THREAD = "startup";

function log(message: string): void {
  process.stderr.write(`[startup] ${message}\n`);
}

/**
 * The global scope in fresh Node processes and in new workerd isolates, and a new isolate's first
 * `GET /healthz` (the import and the request), alternating sides.
 */
async function evaluations(bundles: Record<Side, Bundle>) {
  const node: Record<Side, number[]> = { spindle: [], bare: [] };
  const workerd: Record<Side, Evaluation[]> = { spindle: [], bare: [] };
  const healthz: Record<Side, Evaluation[]> = { spindle: [], bare: [] };
  for (let i = 0; i < EVALUATIONS; i++) {
    for (const side of ["bare", "spindle"] as const) {
      node[side].push(await evaluateOnce(bundles[side]));
      workerd[side].push(await newIsolate(bundles[side], "/import"));
      healthz[side].push(await newIsolate(bundles[side], "/healthz"));
    }
  }
  // One more, profiled: the profiler slows what it samples, so it is not among the timings.
  const profiled = await newIsolate(bundles.spindle, "/import", true);
  if (!profiled.profile) throw new Error("the profiled evaluation returned no profile");
  return { node, workerd, healthz, profile: profiled.profile };
}

/** Self time of the profiled evaluation by source file (through the bundle's source map). */
function whereItGoes(bundle: Bundle, profile: CpuProfile): Map<string, number> {
  const map = sourceMapOf(bundle);
  const keyOf = map
    ? sourceFileOf(BUNDLE_MODULE, map, ROOT)
    : (node: { callFrame: { url: string } }) => node.callFrame.url;
  return selfTimeBy(profile, MAX_SAMPLE_GAP_US, keyOf);
}

/**
 * Both sides get an existing thread (PRIOR_TURNS turns on the stand-in), then, RUNS times and
 * alternating sides, a new runtime on the same state serves one request: `GET /healthz`, or a turn.
 */
async function firstRequests(origin: string, dir: string): Promise<FirstRequests> {
  const spindle = new SpindleSide(
    await Runtime.start({ ...SpindleSide.spec(origin), direct: true }, join(dir, "spindle")),
  );
  const bare = new BareSide(
    await Runtime.start({ ...BareSide.spec(origin), direct: true }, join(dir, "bare")),
  );
  const out: FirstRequests = {
    healthz: { spindle: [], bare: [] },
    turn: { spindle: [], bare: [] },
    ready: { spindle: [], bare: [] },
  };
  const healthz = async (runtime: Runtime) =>
    (await timedFetch(new URL("/healthz", runtime.url), { method: "GET" })).ms;
  try {
    await spindle.create(THREAD, OPENAI_MODEL);
    for (let i = 0; i < PRIOR_TURNS; i++) {
      await spindle.turn(THREAD, OPENAI_MODEL);
      await bare.turn(THREAD);
    }
    for (let i = 0; i < RUNS; i++) {
      for (const kind of ["healthz", "turn"] as const) {
        // No alarm may wake the thread in the new runtime ahead of the timed request.
        await spindle.settle(THREAD);
        await bare.restart();
        out.ready.bare.push(bare.runtime.startMs);
        await quietLoop();
        out[kind].bare.push(
          kind === "healthz" ? await healthz(bare.runtime) : await bare.turn(THREAD),
        );
        await spindle.restart();
        out.ready.spindle.push(spindle.runtime.startMs);
        await quietLoop();
        out[kind].spindle.push(
          kind === "healthz"
            ? await healthz(spindle.runtime)
            : await spindle.turn(THREAD, OPENAI_MODEL),
        );
      }
      log(
        `run ${i + 1}: /healthz ${ms(out.healthz.spindle.at(-1) ?? Number.NaN)} (bare ${ms(out.healthz.bare.at(-1) ?? Number.NaN)}), turn ${ms(out.turn.spindle.at(-1) ?? Number.NaN)} (bare ${ms(out.turn.bare.at(-1) ?? Number.NaN)})`,
      );
    }
  } finally {
    await spindle.runtime.close().catch((err: unknown) => log(`closing Spindle: ${String(err)}`));
    await bare.runtime.close().catch((err: unknown) => log(`closing bare: ${String(err)}`));
  }
  return out;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const loadBefore = loadavg();
  const t0 = performance.now();
  log(`${RUNS} fresh runtimes per side and request; ${EVALUATIONS} evaluations per bundle`);

  log("building the deploy bundles…");
  const bundles: Record<Side, Bundle> = {
    spindle: await buildBundle(join(ROOT, "wrangler.toml")),
    bare: await buildBundle(join(ROOT, "bench/bare/wrangler.toml")),
  };
  const dir = mkdtempSync(join(tmpdir(), "spindle-startup-"));
  const { standIn, origin } = await StandIn.start();
  try {
    log("evaluating the global scopes…");
    const evaluated = await evaluations(bundles);
    log(
      `global scope in Node: Spindle ${ms(median(evaluated.node.spindle))}, bare ${ms(median(evaluated.node.bare))}`,
    );
    if (PROFILE_OUT) {
      mkdirSync(PROFILE_OUT, { recursive: true });
      writeFileSync(
        join(PROFILE_OUT, "global-scope.cpuprofile"),
        JSON.stringify(evaluated.profile),
      );
    }
    log("fresh runtimes…");
    const first = await firstRequests(origin, dir);
    const text = startupReport({
      run: {
        startedAt,
        seconds: (performance.now() - t0) / 1000,
        loadBefore,
        loadAfter: loadavg(),
      },
      runs: RUNS,
      priorTurns: PRIOR_TURNS,
      bundles,
      node: evaluated.node,
      workerd: evaluated.workerd,
      isolateHealthz: evaluated.healthz,
      profile: whereItGoes(bundles.spindle, evaluated.profile),
      first,
      ...(PROFILE_OUT ? { profileOut: PROFILE_OUT } : {}),
    });
    process.stdout.write(`${text}\n`);
    writeFileSync(join(ROOT, "bench/results-startup.md"), text);
    log("wrote bench/results-startup.md");
  } finally {
    await standIn.close();
    for (const path of [dir, dirname(bundles.spindle.path), dirname(bundles.bare.path)]) {
      rmSync(path, { recursive: true, force: true });
    }
  }
}

await main();
