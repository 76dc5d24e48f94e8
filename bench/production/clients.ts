/**
 * The two sides `bench:production` drives, each over HTTP on 127.0.0.1 through its runtime:
 * Spindle (threads on the local model for seeding, on the `openai` provider for what is timed)
 * and the bare chat DO (`bench/bare/chat.ts`). Both sample their isolate's heap after every turn.
 */
import { fileURLToPath } from "node:url";
import { openFiles, openSqliteBytes, sleep, timedFetch } from "../harness.ts";
import { type FilePages, filePages } from "./pages.ts";
import { Runtime, type RuntimeSpec } from "./runtime.ts";
import { STANDIN_ANSWER } from "./standin.ts";
import type { StorageReport } from "./worker.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export const OPENAI_MODEL = "bench-openai";
export const LOCAL_MODEL = "spindle-local";
const HEADERS = { authorization: "Bearer sk-local-dev", "content-type": "application/json" };
/** Bound on waiting for the flush alarm (due 1 s after a turn) and what it runs. */
const SETTLE_TIMEOUT_MS = 15_000;
/** Settled: no alarm due sooner than this (what is left is event expiry, minutes away). */
const SETTLED_ALARM_MS = 5_000;

/** A fixed-shape user message (~45 bytes), like a short chat input. */
export const userInput = (n: number) => `Benchmark question number ${n}, please answer.`;

/** Keeps the larger of the heap sizes seen since the last reset. */
class PeakHeap {
  value = 0;

  async sample(runtime: Runtime): Promise<void> {
    this.value = Math.max(this.value, (await runtime.heap()).usedSize);
  }
}

abstract class Side {
  runtime: Runtime;
  readonly peak = new PeakHeap();
  readonly turns = new Map<string, number>();

  constructor(runtime: Runtime) {
    this.runtime = runtime;
  }

  turnsOf(name: string): number {
    return this.turns.get(name) ?? 0;
  }

  protected counted(name: string): void {
    this.turns.set(name, this.turnsOf(name) + 1);
  }

  /** Stops this runtime and starts a new one on the same persist directory. */
  async restart(): Promise<void> {
    const { spec, persist } = this.runtime;
    await this.runtime.close();
    this.runtime = await Runtime.start(spec, persist);
  }
}

export class SpindleSide extends Side {
  /** The model each thread's configuration holds now. */
  readonly #model = new Map<string, string>();
  /** Waits for the flush that ran out of time, as `thread@turns`. */
  readonly unsettled: string[] = [];

  /** `windowTokens`: the openai model's context window (compaction runs at 90% of it). */
  static spec(standInOrigin: string, windowTokens = 1_000_000): RuntimeSpec {
    return {
      script: "spindle",
      className: "Thread",
      entrypoint: `${ROOT}bench/production/worker.ts`,
      vars: {
        OPENAI_BASE_URL: `${standInOrigin}/spindle/v1`,
        OPENAI_API_KEY: "sk-bench-standin",
        // By default the local model's window, so switching models does not change when
        // compaction runs.
        SPINDLE_OPENAI_MODELS: JSON.stringify([
          { slug: OPENAI_MODEL, model: "gpt-bench", context_window: windowTokens },
        ]),
      },
    };
  }

  #call(method: string, path: string, body?: unknown, status = 200) {
    const init = {
      method,
      headers: HEADERS,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    };
    return timedFetch(new URL(path, this.runtime.url), init, status);
  }

  async create(thread: string, model: string): Promise<void> {
    await this.#call("POST", "/v1/threads", { id: thread, cwd: "/repo", model }, 201);
    this.#model.set(thread, model);
  }

  /** One turn on `model` (switching the thread to it first if need be); its latency in ms. */
  async turn(thread: string, model: string): Promise<number> {
    const switching = this.#model.get(thread) !== model;
    const body = {
      input: userInput(this.turnsOf(thread) + 1),
      ...(switching ? { overrides: { model } } : {}),
    };
    const { ms, body: answer } = await this.#call("POST", `/v1/threads/${thread}/turns`, body);
    const status = (JSON.parse(answer) as { status?: string }).status;
    if (status !== "completed") throw new Error(`${thread}: turn ended ${status}: ${answer}`);
    this.#model.set(thread, model);
    this.counted(thread);
    await this.peak.sample(this.runtime);
    return ms;
  }

  #objectName = (thread: string) => `local:${thread}`;

  evict(thread: string): Promise<void> {
    return this.runtime.evict(this.#objectName(thread));
  }

  async storage(thread: string): Promise<StorageReport> {
    const path = `/__bench/storage/${encodeURIComponent(this.#objectName(thread))}`;
    return JSON.parse((await this.#call("GET", path)).body) as StorageReport;
  }

  /** Waits until no alarm is due soon and storage stopped changing; the storage then. */
  async settle(thread: string): Promise<StorageReport> {
    const deadline = performance.now() + SETTLE_TIMEOUT_MS;
    let previous = "";
    for (;;) {
      const report = await this.storage(thread);
      const quiet = report.alarm === null || report.alarm > Date.now() + SETTLED_ALARM_MS;
      const key = JSON.stringify({ size: report.databaseSize, tables: report.tables });
      if (quiet && key === previous) return report;
      if (performance.now() > deadline) {
        this.unsettled.push(`${thread}@${this.turnsOf(thread)}`);
        return report;
      }
      previous = quiet ? key : "";
      await sleep(250);
    }
  }

  /** Objects and bytes under the thread's R2 prefix. */
  async r2(thread: string): Promise<{ objects: number; bytes: number }> {
    const bucket = await this.runtime.r2Bucket("ROLLOUT");
    let objects = 0;
    let bytes = 0;
    let cursor: string | undefined;
    do {
      const page = await bucket.list({
        prefix: `threads/local/${thread}/`,
        ...(cursor ? { cursor } : {}),
      });
      objects += page.objects.length;
      bytes += page.objects.reduce((sum, o) => sum + o.size, 0);
      cursor = page.truncated ? page.cursor : undefined;
    } while (cursor !== undefined);
    return { objects, bytes };
  }

  /** The object's database + WAL files in local workerd (what the disk holds, not what is billed). */
  async fileBytes(report: StorageReport): Promise<number | undefined> {
    return openSqliteBytes(await this.runtime.pid(), "/do/spindle-Thread/", report.id);
  }

  /** The object's database pages by table, from its file (see `pages.ts`). */
  async pages(report: StorageReport): Promise<FilePages | undefined> {
    const file = openFiles(await this.runtime.pid()).find(
      (p) => p.includes(`/do/spindle-Thread/${report.id}.`) && p.endsWith(".sqlite"),
    );
    return file === undefined ? undefined : filePages(file);
  }
}

export class BareSide extends Side {
  static spec(standInOrigin: string): RuntimeSpec {
    return {
      script: "spindle-bench-bare",
      className: "BareChat",
      config: `${ROOT}bench/bare/wrangler.toml`,
      vars: { STANDIN_URL: `${standInOrigin}/bare/v1` },
    };
  }

  #post(path: string, body: unknown) {
    const init = { method: "POST", headers: HEADERS, body: JSON.stringify(body) };
    return timedFetch(new URL(path, this.runtime.url), init);
  }

  async turn(name: string): Promise<number> {
    const input = userInput(this.turnsOf(name) + 1);
    const { ms } = await this.#post(`/chat/${name}/turns`, { input });
    this.counted(name);
    await this.peak.sample(this.runtime);
    return ms;
  }

  /** Adds turns without the provider until the object holds `turns` of them. */
  async seedTo(name: string, turns: number): Promise<void> {
    const SEED_CHUNK = 5_000;
    while (this.turnsOf(name) < turns) {
      const n = Math.min(SEED_CHUNK, turns - this.turnsOf(name));
      const user = userInput(this.turnsOf(name) + 1);
      await this.#post(`/chat/${name}/seed`, { turns: n, user, assistant: STANDIN_ANSWER });
      this.turns.set(name, this.turnsOf(name) + n);
    }
  }

  evict(name: string): Promise<void> {
    // The object's name as `getByName` gives it.
    return this.runtime.evict(name);
  }

  async databaseSize(name: string): Promise<number> {
    const { body } = await timedFetch(new URL(`/chat/${name}/size`, this.runtime.url), {
      method: "GET",
    });
    return (JSON.parse(body) as { database_size: number }).database_size;
  }
}
