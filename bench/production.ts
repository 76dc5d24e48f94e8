/**
 * `npm run bench:production`: Spindle on the path production runs, beside a bare chat Durable
 * Object, in one run: a turn on the `openai` provider against a local Responses stand-in (warm,
 * after eviction, after a runtime restart), the deploy bundle and its global-scope evaluation,
 * SQLite + R2 bytes per message, and the isolate's V8 heap. Prints tables (numbers, never
 * asserted) and writes them to bench/results-production.md. See bench/README.md.
 *
 * Knobs (environment): PRODUCTION_TURNS (sizes, default 10,1000,5000,10000),
 * PRODUCTION_TIMED_TURNS (50), PRODUCTION_COLD_REPEATS (5), PRODUCTION_RESTARTS (2),
 * PRODUCTION_HEAP_PROBES (5), PRODUCTION_EVALUATIONS (5), PRODUCTION_BUILD_BUDGET_S (900),
 * PRODUCTION_PROFILE_OUT (a directory: when set, CPU profiles of a warm turn and of the first turn
 * after one more restart, and a sampling heap profile of 20 warm turns, are written there at each
 * size).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Memory } from "./harness.ts";
import { type Bundle, buildBundle, evaluateOnce } from "./production/bundle.ts";
import { BareSide, LOCAL_MODEL, OPENAI_MODEL, SpindleSide } from "./production/clients.ts";
import {
  type Measured,
  productionReport,
  type SizeResult,
  type StorageAt,
} from "./production/report.ts";
import { type HeapUsage, Runtime } from "./production/runtime.ts";
import { StandIn } from "./production/standin.ts";
import { count, median, ms, positiveInt } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const sizeList = (raw: string | undefined) =>
  [...new Set((raw ?? "10,1000,5000,10000").split(",").map((v) => positiveInt(v.trim(), 0)))].sort(
    (a, b) => a - b,
  );

const SIZES = sizeList(process.env.PRODUCTION_TURNS);
const TIMED = positiveInt(process.env.PRODUCTION_TIMED_TURNS, 50);
const WARMUP = 10;
const COLD = positiveInt(process.env.PRODUCTION_COLD_REPEATS, 5);
const RESTARTS = positiveInt(process.env.PRODUCTION_RESTARTS, 2);
const PROBES = positiveInt(process.env.PRODUCTION_HEAP_PROBES, 5);
const EVALUATIONS = positiveInt(process.env.PRODUCTION_EVALUATIONS, 5);
const BUILD_BUDGET_MS = positiveInt(process.env.PRODUCTION_BUILD_BUDGET_S, 900) * 1000;
const PROFILE_OUT = process.env.PRODUCTION_PROFILE_OUT;
/**
 * The model the thread is grown on: `local` (fast) or `openai` (every seeding turn a request to
 * the stand-in). With a larger `PRODUCTION_OPENAI_WINDOW`, `openai` grows a thread past the size
 * at which the local model's 1,000,000-token window compacts it (about 9,000 turns).
 */
const SEED_MODEL = process.env.PRODUCTION_SEED_MODEL === "openai" ? OPENAI_MODEL : LOCAL_MODEL;
const OPENAI_WINDOW = positiveInt(process.env.PRODUCTION_OPENAI_WINDOW, 1_000_000);
/** Turns of each kind on a throwaway thread after every runtime start, so V8 has compiled them. */
const JIT_TURNS = 30;

const THREAD = "bench";
const JIT = "jit_warmup";
const FRESH = "fresh";

function log(message: string): void {
  process.stderr.write(`[production] ${message}\n`);
}

/** Warms a runtime's code paths (turns of both kinds, reloads) on a throwaway thread. */
async function warmUp(spindle: SpindleSide, bare: BareSide): Promise<void> {
  if (spindle.turnsOf(JIT) === 0) await spindle.create(JIT, LOCAL_MODEL);
  for (const model of [LOCAL_MODEL, OPENAI_MODEL]) {
    for (let i = 0; i < JIT_TURNS; i++) await spindle.turn(JIT, model);
    await spindle.settle(JIT);
    await spindle.evict(JIT);
  }
  await spindle.turn(JIT, OPENAI_MODEL);
  await spindle.settle(JIT);
  await spindle.evict(JIT);
  for (let i = 0; i < 2 * JIT_TURNS; i++) await bare.turn(JIT);
  await bare.evict(JIT);
}

/** Grows the thread with local-model turns up to `target`, within the remaining budget. */
class Seeder {
  #spentMs = 0;
  readonly steps: { from: number; to: number; seconds: number }[] = [];

  async growTo(spindle: SpindleSide, target: number): Promise<boolean> {
    const from = spindle.turnsOf(THREAD);
    const start = performance.now();
    while (spindle.turnsOf(THREAD) < target) {
      if (this.#spentMs + (performance.now() - start) > BUILD_BUDGET_MS) break;
      await spindle.turn(THREAD, SEED_MODEL);
      if (spindle.turnsOf(THREAD) % 1000 === 0) log(`seeded ${count(spindle.turnsOf(THREAD))}`);
    }
    const elapsed = performance.now() - start;
    this.#spentMs += elapsed;
    const to = spindle.turnsOf(THREAD);
    if (to > from) this.steps.push({ from, to, seconds: elapsed / 1000 });
    return to >= target;
  }
}

/** A Spindle turn with the stand-in's own time for the request it made. */
async function spindleTurn(
  spindle: SpindleSide,
  standIn: StandIn,
  thread = THREAD,
): Promise<Measured> {
  const mark = standIn.served.length;
  const total = await spindle.turn(thread, OPENAI_MODEL);
  const served = standIn.since(mark, "spindle");
  return { total, standIn: served.reduce((sum, s) => sum + s.ms, 0), requests: served.length };
}

async function bareTurn(bare: BareSide, standIn: StandIn, name = THREAD): Promise<Measured> {
  const mark = standIn.served.length;
  const total = await bare.turn(name);
  const served = standIn.since(mark, "bare");
  return { total, standIn: served.reduce((sum, s) => sum + s.ms, 0), requests: served.length };
}

async function storageAt(spindle: SpindleSide, bare: BareSide, thread: string): Promise<StorageAt> {
  const report = await spindle.settle(thread);
  return {
    turns: spindle.turnsOf(thread),
    report,
    fileBytes: await spindle.fileBytes(report),
    pages: await spindle.pages(report),
    r2: await spindle.r2(thread),
    bareTurns: bare.turnsOf(thread),
    bareDatabaseSize: await bare.databaseSize(thread),
  };
}

/** The Responses request the side sent last: its size and input items. */
function lastRequest(standIn: StandIn, client: string): { bytes: number; items: number } {
  const body = standIn.lastBody.get(client);
  if (!body) return { bytes: Number.NaN, items: Number.NaN };
  return {
    bytes: body.length,
    items: (JSON.parse(body.toString("utf8")) as { input: [] }).input.length,
  };
}

async function heapAt(spindle: SpindleSide, bare: BareSide, standIn: StandIn) {
  let spindlePolled = 0;
  let barePolled = 0;
  let samples = 0;
  for (let i = 0; i < PROBES; i++) {
    const s = await spindle.runtime.peakDuring(spindleTurn(spindle, standIn));
    spindlePolled = Math.max(spindlePolled, s.peak);
    samples += s.samples;
    const b = await bare.runtime.peakDuring(bareTurn(bare, standIn));
    barePolled = Math.max(barePolled, b.peak);
  }
  const spindleLive: HeapUsage = await spindle.runtime.heapAfterGc();
  const bareLive: HeapUsage = await bare.runtime.heapAfterGc();
  const spindleRss: Memory = await spindle.runtime.memory();
  const bareRss: Memory = await bare.runtime.memory();
  return {
    spindleLive,
    bareLive,
    spindlePeak: spindle.peak.value,
    barePeak: bare.peak.value,
    spindlePolled,
    barePolled,
    polledSamples: samples,
    spindleRss,
    bareRss,
  };
}

async function restarts(spindle: SpindleSide, bare: BareSide, standIn: StandIn) {
  const out = { spindle: [] as Measured[], bare: [] as Measured[], spindleStart: [] as number[] };
  const bareStart: number[] = [];
  for (let i = 0; i < RESTARTS; i++) {
    // No alarm may wake the object in the new runtime before the timed request.
    await spindle.settle(THREAD);
    await spindle.restart();
    out.spindleStart.push(spindle.runtime.startMs);
    out.spindle.push(await spindleTurn(spindle, standIn));
    await bare.restart();
    bareStart.push(bare.runtime.startMs);
    out.bare.push(await bareTurn(bare, standIn));
  }
  return { ...out, bareStart };
}

/** Warm turns whose allocations are sampled (with PRODUCTION_PROFILE_OUT). */
const PROFILED_TURNS = 20;

/**
 * With PRODUCTION_PROFILE_OUT: a warm turn (CPU), the allocations of 20 more, and the first turn
 * after one more restart (CPU), profiled.
 */
async function profiles(spindle: SpindleSide, standIn: StandIn, size: number): Promise<void> {
  if (!PROFILE_OUT) return;
  mkdirSync(PROFILE_OUT, { recursive: true });
  const write = (name: string, profile: unknown) =>
    writeFileSync(join(PROFILE_OUT, `${name}-${size}.cpuprofile`), JSON.stringify(profile));
  write("warm-turn", (await spindle.runtime.profile(() => spindleTurn(spindle, standIn))).profile);
  const turns = async () => {
    for (let i = 0; i < PROFILED_TURNS; i++) await spindleTurn(spindle, standIn);
  };
  const allocated = await spindle.runtime.allocations(turns);
  writeFileSync(
    join(PROFILE_OUT, `allocations-${size}.heapprofile`),
    JSON.stringify(allocated.profile),
  );
  await spindle.settle(THREAD);
  await spindle.restart();
  const first = await spindle.runtime.profile(() => spindleTurn(spindle, standIn));
  write("restart-first-turn", first.profile);
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const loadBefore = loadavg();
  const t0 = performance.now();
  log(`sizes ${SIZES.join(", ")}; ${TIMED} timed turns; ${COLD} evictions; ${RESTARTS} restarts`);

  log("building the deploy bundles…");
  const bundles: { spindle: Bundle; bare: Bundle } = {
    spindle: await buildBundle(join(ROOT, "wrangler.toml")),
    bare: await buildBundle(join(ROOT, "bench/bare/wrangler.toml")),
  };
  const evaluations = { spindle: [] as number[], bare: [] as number[] };
  for (let i = 0; i < EVALUATIONS; i++) {
    evaluations.bare.push(await evaluateOnce(bundles.bare));
    evaluations.spindle.push(await evaluateOnce(bundles.spindle));
  }
  log(
    `global scope: Spindle ${ms(median(evaluations.spindle))}, bare ${ms(median(evaluations.bare))}`,
  );

  const dir = mkdtempSync(join(tmpdir(), "spindle-production-"));
  const { standIn, origin } = await StandIn.start();
  let spindle: SpindleSide | undefined;
  let bare: BareSide | undefined;
  const sizes: SizeResult[] = [];
  const notes: string[] = [];
  const seeder = new Seeder();
  let fresh: StorageAt | undefined;
  try {
    spindle = new SpindleSide(
      await Runtime.start(SpindleSide.spec(origin, OPENAI_WINDOW), join(dir, "spindle")),
    );
    bare = new BareSide(await Runtime.start(BareSide.spec(origin), join(dir, "bare")));
    await warmUp(spindle, bare);
    log("isolates warmed up");

    await spindle.create(FRESH, OPENAI_MODEL);
    await spindleTurn(spindle, standIn, FRESH);
    await bareTurn(bare, standIn, FRESH);
    fresh = await storageAt(spindle, bare, FRESH);

    await spindle.create(THREAD, LOCAL_MODEL);
    spindle.peak.value = 0;
    bare.peak.value = 0;
    for (const [index, size] of SIZES.entries()) {
      const reached = await seeder.growTo(spindle, size);
      if (!reached) {
        notes.push(
          `Seeding stopped at ${count(spindle.turnsOf(THREAD))} turns (budget ${BUILD_BUDGET_MS / 1000} s); the ${count(size)}-turn row is measured there.`,
        );
      }
      const at = spindle.turnsOf(THREAD);
      await bare.seedTo(THREAD, at);
      const storage = await storageAt(spindle, bare, THREAD);
      // The switch to the openai model (and the bare DO's first turn at this size), untimed.
      await spindleTurn(spindle, standIn);
      await bareTurn(bare, standIn);

      log(`${count(at)} turns: evictions…`);
      const cold = { spindle: [] as Measured[], bare: [] as Measured[] };
      for (let i = 0; i < COLD; i++) {
        await bare.evict(THREAD);
        cold.bare.push(await bareTurn(bare, standIn));
        await spindle.settle(THREAD); // no alarm may wake the object between eviction and turn
        await spindle.evict(THREAD);
        cold.spindle.push(await spindleTurn(spindle, standIn));
      }

      log(`${count(at)} turns: warm turns…`);
      const warm = { spindle: [] as Measured[], bare: [] as Measured[] };
      const warmFrom = spindle.turnsOf(THREAD) + WARMUP;
      for (let i = 0; i < WARMUP; i++) await bareTurn(bare, standIn);
      for (let i = 0; i < TIMED; i++) warm.bare.push(await bareTurn(bare, standIn));
      for (let i = 0; i < WARMUP; i++) await spindleTurn(spindle, standIn);
      for (let i = 0; i < TIMED; i++) warm.spindle.push(await spindleTurn(spindle, standIn));
      const request = {
        spindle: lastRequest(standIn, "spindle"),
        bare: lastRequest(standIn, "bare"),
      };

      log(`${count(at)} turns: heap…`);
      const heap = await heapAt(spindle, bare, standIn);

      log(`${count(at)} turns: restarts…`);
      const restart = await restarts(spindle, bare, standIn);
      await profiles(spindle, standIn, at);
      if (index < SIZES.length - 1) await warmUp(spindle, bare);
      // The next size's peaks start with its own turns.
      spindle.peak.value = 0;
      bare.peak.value = 0;

      sizes.push({
        size: at,
        warmPrior: [warmFrom, warmFrom + TIMED - 1],
        request,
        warm,
        cold,
        restart,
        storage,
        heap,
      });
      const w = median(warm.spindle.map((m) => m.total));
      const wb = median(warm.bare.map((m) => m.total));
      log(
        `${count(at)} turns: warm p50 ${ms(w)} (bare ${ms(wb)}), cold ${ms(median(cold.spindle.map((m) => m.total)))}, restart ${ms(median(restart.spindle.map((m) => m.total)))} (bare ${ms(median(restart.bare.map((m) => m.total)))})`,
      );
      if (!reached) break;
    }
  } finally {
    await spindle?.runtime.close().catch((err: unknown) => log(`closing Spindle: ${String(err)}`));
    await bare?.runtime.close().catch((err: unknown) => log(`closing bare: ${String(err)}`));
    await standIn.close();
    for (const path of [dir, dirname(bundles.spindle.path), dirname(bundles.bare.path)]) {
      rmSync(path, { recursive: true, force: true });
    }
  }
  if (spindle && spindle.unsettled.length > 0) {
    notes.push(
      `The wait for the flush alarm ran out (15 s) at ${spindle.unsettled.join(", ")} (thread@turns): what followed may have run with the alarm still due.`,
    );
  }
  if (PROFILE_OUT) notes.push(`CPU profiles were written to ${PROFILE_OUT}.`);
  if (!fresh) throw new Error("no measurement was taken");
  const text = productionReport({
    run: { startedAt, seconds: (performance.now() - t0) / 1000, loadBefore, loadAfter: loadavg() },
    knobs: { timed: TIMED, warmup: WARMUP, cold: COLD, restarts: RESTARTS, probes: PROBES },
    seed: { model: SEED_MODEL, openaiWindow: OPENAI_WINDOW },
    bundles,
    evaluations,
    fresh,
    sizes,
    seeding: seeder.steps,
    notes,
  });
  process.stdout.write(`${text}\n`);
  writeFileSync(join(ROOT, "bench/results-production.md"), text);
  log("wrote bench/results-production.md");
}

await main();
