/**
 * One local runtime of `bench:production`: a worker started with `unstable_startWorker` on a
 * persist directory, with its inspector open and connected, so the benchmark can evict its
 * objects, read its isolate's heap, and stop it and start a new one on the same storage.
 */
import { withTimeout } from "../../test/e2e/local-worker.ts";
import { findWorkerd, type Memory, memoryOf, STARTUP_TIMEOUT_MS, sleep } from "../harness.ts";
import { type InspectedWorkerOptions, Inspector, startInspectedWorker } from "../inspector.ts";

export interface RuntimeSpec extends InspectedWorkerOptions {
  /** The worker's `name` in its wrangler config (the script name eviction needs). */
  script: string;
  /** The DO class whose SQLite directory (`do/{script}-{class}`) identifies the process. */
  className: string;
  /**
   * Send requests to the runtime's own address instead of wrangler's development proxy (a
   * separate workerd process that forwards every request), so a request is timed without that hop.
   */
  direct?: boolean;
}

export interface HeapUsage {
  usedSize: number;
  totalSize: number;
  /** Outside the V8 heap: array buffers' backing stores (given by newer inspectors). */
  backingStorageSize?: number;
}

/** Bound on the requests sent to let a requested garbage collection run. */
const GC_NUDGES = 50;

type StartedWorker = Awaited<ReturnType<typeof startInspectedWorker>>["worker"];

/** The address of the worker's own runtime, once wrangler has started it. */
async function runtimeUrl(worker: StartedWorker): Promise<URL> {
  for (;;) {
    const miniflare = worker.raw.runtimes[0]?.mf;
    if (miniflare) return miniflare.ready;
    await sleep(20);
  }
}

export class Runtime {
  readonly spec: RuntimeSpec;
  readonly persist: string;
  readonly url: URL;
  /**
   * From calling `unstable_startWorker` to the worker answering as ready (with `direct`, to its
   * own runtime having started: workerd has evaluated the worker's global scope by then), ms.
   */
  readonly startMs: number;
  readonly #worker: StartedWorker;
  readonly #inspector: Inspector;
  #pid: number | undefined;

  private constructor(
    spec: RuntimeSpec,
    persist: string,
    started: { worker: StartedWorker; inspector: Inspector; url: URL; startMs: number },
  ) {
    this.spec = spec;
    this.persist = persist;
    this.#worker = started.worker;
    this.#inspector = started.inspector;
    this.url = started.url;
    this.startMs = started.startMs;
  }

  static async start(spec: RuntimeSpec, persist: string): Promise<Runtime> {
    const t0 = performance.now();
    const { worker, inspectorPort } = await withTimeout(
      startInspectedWorker(persist, spec),
      STARTUP_TIMEOUT_MS,
      `starting ${spec.script}`,
    );
    try {
      await withTimeout(worker.ready, STARTUP_TIMEOUT_MS, `${spec.script} getting ready`);
      const proxyUrl = await worker.url;
      const url = spec.direct
        ? await withTimeout(runtimeUrl(worker), STARTUP_TIMEOUT_MS, `${spec.script}'s runtime`)
        : proxyUrl;
      const startMs = performance.now() - t0;
      const inspector = await Inspector.connect(inspectorPort);
      return new Runtime(spec, persist, { worker, inspector, url, startMs });
    } catch (err) {
      await worker.dispose().catch(() => {});
      throw err;
    }
  }

  #miniflare() {
    // The local runtime's Miniflare instance (set once the worker has started).
    const miniflare = this.#worker.raw.runtimes[0]?.mf;
    if (!miniflare) throw new Error(`${this.spec.script}: no local runtime`);
    return miniflare;
  }

  /** Tears down one object's instance; its storage stays. */
  evict(name: string): Promise<void> {
    return this.#miniflare().unsafeEvictDurableObject(this.spec.script, this.spec.className, {
      name,
    });
  }

  /** A Durable Object namespace binding of the worker, through Miniflare's proxy. */
  namespace(binding: string) {
    return this.#miniflare().getDurableObjectNamespace(binding);
  }

  r2Bucket(binding: string) {
    return this.#miniflare().getR2Bucket(binding);
  }

  heap(): Promise<HeapUsage> {
    return this.#inspector.send<HeapUsage>("Runtime.getHeapUsage");
  }

  /**
   * The heap after a full, forced garbage collection: what is live. V8 runs the collection the
   * inspector asks for as a task of the isolate, and workerd runs an idle isolate's tasks only
   * when something enters it, so small requests (a 404) are sent until the collection is done.
   */
  async heapAfterGc(): Promise<HeapUsage> {
    let collected = false;
    const collection = this.#inspector.send("HeapProfiler.collectGarbage").finally(() => {
      collected = true;
    });
    for (let i = 0; i < GC_NUDGES && !collected; i++) {
      await (await fetch(new URL("/__bench/nudge", this.url))).arrayBuffer();
      await sleep(20);
    }
    await withTimeout(collection, 10_000, `collecting garbage in ${this.spec.script}`);
    return this.heap();
  }

  /**
   * The largest heap in use seen while `work` runs, asking the inspector again as soon as it
   * answers. The isolate answers between its own tasks (at the awaits of a request, e.g. while the
   * provider's answer is awaited), not in the middle of synchronous code.
   */
  async peakDuring<T>(work: Promise<T>): Promise<{ result: T; peak: number; samples: number }> {
    let done = false;
    const settled = work.finally(() => {
      done = true;
    });
    let peak = 0;
    let samples = 0;
    const MAX_SAMPLES = 100_000;
    while (!done && samples < MAX_SAMPLES) {
      peak = Math.max(peak, (await this.heap()).usedSize);
      samples += 1;
    }
    return { result: await settled, peak, samples };
  }

  /** A V8 CPU profile (sampled every 100 µs) of the isolate while `work` runs. */
  async profile<T>(work: () => Promise<T>): Promise<{ result: T; profile: unknown }> {
    await this.#inspector.send("Profiler.enable");
    await this.#inspector.send("Profiler.setSamplingInterval", { interval: 100 });
    await this.#inspector.send("Profiler.start");
    const result = await work();
    const { profile } = await this.#inspector.send<{ profile: unknown }>("Profiler.stop");
    return { result, profile };
  }

  /**
   * A V8 sampling heap profile of what the isolate allocates while `work` runs, garbage included
   * (objects a later collection freed stay in it): where the heap between collections comes from.
   */
  async allocations<T>(work: () => Promise<T>): Promise<{ result: T; profile: unknown }> {
    await this.#inspector.send("HeapProfiler.enable");
    await this.#inspector.send("HeapProfiler.startSampling", {
      samplingInterval: 16_384,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    const result = await work();
    const { profile } = await this.#inspector.send<{ profile: unknown }>(
      "HeapProfiler.stopSampling",
    );
    return { result, profile };
  }

  /** The workerd process that runs the worker (found by its open DO directory). */
  async pid(): Promise<number> {
    this.#pid ??= await withTimeout(
      findWorkerd(`/do/${this.spec.script}-${this.spec.className}`),
      10_000,
      `finding the workerd process of ${this.spec.script}`,
    );
    return this.#pid;
  }

  async memory(): Promise<Memory> {
    return memoryOf(await this.pid());
  }

  async close(): Promise<void> {
    this.#inspector.close();
    await withTimeout(this.#worker.dispose(), STARTUP_TIMEOUT_MS, `stopping ${this.spec.script}`);
  }
}
