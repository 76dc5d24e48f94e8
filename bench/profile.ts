/**
 * `npm run bench:profile`: where a turn's CPU time goes inside workerd, read with V8's sampling
 * profiler over the inspector. It grows one thread, then profiles cold starts (the first turn
 * after an eviction) and warm turns, and prints the functions that took the time, plus the
 * isolate's heap before and after a forced garbage collection. Numbers are printed, never
 * asserted. The `.cpuprofile` files it writes open in Chrome DevTools (Performance panel).
 *
 * Knobs (environment): PROFILE_TURNS (thread size, 5000), PROFILE_COLD (profiled cold starts, 5),
 * PROFILE_WARM (profiled warm turns, 20), PROFILE_OUT (where the profiles go, bench/profiles).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type CpuProfile, type ProfileNode, sampledTimes } from "./cpu-profile.ts";
import { sleep, timedFetch } from "./harness.ts";
import { Inspector, startInspectedWorker } from "./inspector.ts";
import { median, ms, positiveInt } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const TURNS = positiveInt(process.env.PROFILE_TURNS, 5_000);
const COLD = positiveInt(process.env.PROFILE_COLD, 5);
const WARM = positiveInt(process.env.PROFILE_WARM, 20);
const OUT = process.env.PROFILE_OUT ?? join(ROOT, "bench", "profiles");
/** Turns on a throwaway thread (with three reloads) so V8 has compiled the code paths first. */
const JIT_WARMUP_TURNS = 200;
/** Sampling interval of the profiler, microseconds. */
const SAMPLING_US = 100;
/** The most one sample counts for (see `breakdownOf`). */
const MAX_SAMPLE_GAP_US = 10 * SAMPLING_US;
/** Long enough for the flush alarm (1 s after a turn) and the checkpoint after it. */
const SETTLE_MS = 2_500;
const TOP = 20;

const THREAD = "profiled";
const HEADERS = { authorization: "Bearer sk-local-dev", "content-type": "application/json" };

function log(message: string): void {
  process.stderr.write(`[profile] ${message}\n`);
}

/** The isolate's heap before and after a forced garbage collection, as a sentence. */
async function heapUsage(cdp: Inspector): Promise<string> {
  type HeapUsage = { usedSize: number; totalSize: number };
  const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  const before = await cdp.send<HeapUsage>("Runtime.getHeapUsage");
  await cdp.send("HeapProfiler.collectGarbage");
  const after = await cdp.send<HeapUsage>("Runtime.getHeapUsage");
  return (
    `${mib(before.usedSize)} used of ${mib(before.totalSize)} committed; after a forced ` +
    `garbage collection ${mib(after.usedSize)} of ${mib(after.totalSize)}`
  );
}

// --- Reading a profile --------------------------------------------------------------------------

/** Milliseconds per function name: self (samples in it) and inclusive (it or what it called). */
interface Breakdown {
  self: Map<string, number>;
  inclusive: Map<string, number>;
  /** Sampled time that was not idle. */
  busy: number;
}

function nameOf(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  // An anonymous function is told apart by its line in the bundle (0-based in profiles).
  const name = functionName || `(anonymous@${lineNumber + 1})`;
  // Bundled code is one file; name only the runtime's own modules.
  return url.startsWith("node-internal:") ? `${name} [${url}]` : name;
}

function breakdownOf(profiles: readonly CpuProfile[]): Breakdown {
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let busy = 0;
  const add = (map: Map<string, number>, key: string, msValue: number) =>
    map.set(key, (map.get(key) ?? 0) + msValue);
  for (const profile of profiles) {
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const node of profile.nodes)
      for (const child of node.children ?? []) parent.set(child, node.id);
    for (const [id, time] of sampledTimes(profile, MAX_SAMPLE_GAP_US)) {
      const leaf = byId.get(id);
      if (!leaf || nameOf(leaf) === "(idle)") continue;
      busy += time;
      add(self, nameOf(leaf), time);
      // Each function counts once per stack, however deep it recurses.
      const seen = new Set<string>();
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const node = byId.get(at);
        if (!node) break;
        const name = nameOf(node);
        if (name === "(root)" || seen.has(name)) continue;
        seen.add(name);
        add(inclusive, name, time);
      }
    }
  }
  const per = (map: Map<string, number>) => {
    for (const [key, value] of map) map.set(key, value / profiles.length);
    return map;
  };
  return { self: per(self), inclusive: per(inclusive), busy: busy / profiles.length };
}

function printTop(title: string, map: Map<string, number>): void {
  console.log(`  ${title}`);
  for (const [name, time] of [...map].sort((a, b) => b[1] - a[1]).slice(0, TOP)) {
    console.log(`    ${time.toFixed(2).padStart(7)} ms  ${name}`);
  }
}

function report(what: string, walls: number[], profiles: CpuProfile[]): void {
  const { self, inclusive, busy } = breakdownOf(profiles);
  console.log(
    `\n${what}: ${profiles.length} profiled, wall median ${ms(median(walls))} ` +
      `(${walls.map((w) => w.toFixed(1)).join(", ")} ms), CPU sampled ${busy.toFixed(1)} ms each`,
  );
  printTop("inclusive (the function and what it called), per turn:", inclusive);
  printTop("self (the function's own code), per turn:", self);
}

// --- The run ------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const persist = mkdtempSync(join(tmpdir(), "spindle-profile-"));
  const { worker, inspectorPort } = await startInspectedWorker(persist);
  let inspector: Inspector | undefined;
  try {
    await worker.ready;
    const url = await worker.url;
    const evict = (thread: string) => {
      // The local runtime's Miniflare instance (set once the worker has started).
      const miniflare = worker.raw.runtimes[0]?.mf;
      if (!miniflare) throw new Error("no local runtime to evict objects from");
      return miniflare.unsafeEvictDurableObject("spindle", "Thread", { name: `local:${thread}` });
    };
    const post = (path: string, body: unknown, status = 200) =>
      timedFetch(
        new URL(path, url),
        { method: "POST", headers: HEADERS, body: JSON.stringify(body) },
        status,
      );
    let asked = 0;
    const turn = (thread: string) =>
      post(`/v1/threads/${thread}/turns`, {
        input: `Benchmark question number ${asked++}, please answer.`,
      });

    const warmup = `warmup-${Date.now()}`;
    await post("/v1/threads", { id: warmup, cwd: "/repo" }, 201);
    for (let i = 0; i < JIT_WARMUP_TURNS; i++) {
      await turn(warmup);
      if (i % 50 === 49) await evict(warmup);
    }
    log(`isolate warmed up (${JIT_WARMUP_TURNS} turns and reloads on a throwaway thread)`);

    await post("/v1/threads", { id: THREAD, cwd: "/repo" }, 201);
    const seedStart = performance.now();
    for (let i = 0; i < TURNS; i++) {
      await turn(THREAD);
      if ((i + 1) % 1000 === 0) log(`seeded ${i + 1} turns`);
    }
    const seedSeconds = (performance.now() - seedStart) / 1000;

    const cdp = await Inspector.connect(inspectorPort);
    inspector = cdp;
    const seeded = await heapUsage(cdp);
    await cdp.send("Profiler.enable");
    await cdp.send("Profiler.setSamplingInterval", { interval: SAMPLING_US });
    mkdirSync(OUT, { recursive: true });
    /** `count` profiled turns, each after `before`; the profiles are also written to OUT. */
    const sample = async (kind: "cold" | "warm", count: number, before: () => Promise<void>) => {
      const walls: number[] = [];
      const profiles: CpuProfile[] = [];
      for (let i = 0; i < count; i++) {
        await before();
        await cdp.send("Profiler.start");
        walls.push((await turn(THREAD)).ms);
        const { profile } = await cdp.send<{ profile: CpuProfile }>("Profiler.stop");
        writeFileSync(join(OUT, `${kind}-${TURNS}-${i + 1}.cpuprofile`), JSON.stringify(profile));
        profiles.push(profile);
      }
      return { walls, profiles };
    };
    const cold = await sample("cold", COLD, async () => {
      await sleep(SETTLE_MS);
      await evict(THREAD);
    });
    await sleep(SETTLE_MS);
    const warm = await sample("warm", WARM, async () => {});

    const loaded = await heapUsage(cdp);

    console.log(
      `# Where a turn's time goes in workerd (local run, ${new Date().toISOString()})\n\n` +
        `One thread of ${TURNS.toLocaleString("en-US")} turns (seeded in ${seedSeconds.toFixed(0)} s), ` +
        `sampled every ${SAMPLING_US} µs; profiles in ${OUT}. The profiler slows the code it samples, ` +
        `so wall times here run above the benchmark's.`,
    );
    report("Cold start (first turn after an eviction)", cold.walls, cold.profiles);
    report("Warm turn", warm.walls, warm.profiles);
    console.log(
      `\nIsolate heap right after seeding (the thread never evicted): ${seeded}.\n` +
        `Isolate heap after the profiled turns: ${loaded}.`,
    );
  } finally {
    inspector?.close();
    await worker.dispose();
    rmSync(persist, { recursive: true, force: true });
  }
}

await main();
