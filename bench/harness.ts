/**
 * One wrangler test harness per measured worker (Spindle, and the bare DO control), each in its
 * own workerd process so its memory can be read on its own. Requests go over a loopback socket.
 */
import { readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import type { WorkerHandle } from "wrangler";
import { withTimeout } from "../test/e2e/local-worker.ts";

// Read by wrangler/miniflare when they load: no `Request.cf` download, no telemetry.
process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
process.env.WRANGLER_SEND_METRICS = "false";

/** Bound on one HTTP exchange (a turn on a 10,000-turn thread stays far below it). */
export const REQUEST_TIMEOUT_MS = 30_000;
/** Bound on starting or closing a harness (bundling included). */
export const STARTUP_TIMEOUT_MS = 60_000;

export interface Runtime {
  url: URL;
  worker: WorkerHandle;
  /** The workerd process that runs the worker (not wrangler's proxy in front of it). */
  pid: number;
  close(): Promise<void>;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Waits until this process's event loop runs timers on time again (five in a row within 2 ms,
 * bounded at 5 s). Wrangler works on in this process for a while after a runtime reports ready
 * (a large bundle's source map, its inspector proxy), and a request timed meanwhile would count
 * that delay as the worker's.
 */
export async function quietLoop(): Promise<void> {
  const QUIET_MS = 2;
  const deadline = performance.now() + 5_000;
  let quiet = 0;
  while (quiet < 5 && performance.now() < deadline) {
    const start = performance.now();
    await sleep(10);
    quiet = performance.now() - start - 10 <= QUIET_MS ? quiet + 1 : 0;
  }
}

/**
 * Starts a harness for one worker config and finds its workerd process: the child of this process
 * that holds the Durable Object directory `do/{workerName}-{className}` open.
 * `warmUp` must make the DO exist (so its directory is open) before the lookup.
 */
export async function startRuntime(opts: {
  configPath: string;
  vars?: Record<string, string>;
  doDir: string;
  warmUp: (url: URL) => Promise<void>;
}): Promise<Runtime> {
  const { createTestHarness } = await import("wrangler");
  const server = createTestHarness({
    workers: [{ configPath: opts.configPath, ...(opts.vars ? { vars: opts.vars } : {}) }],
  });
  const close = () => withTimeout(server.close(), STARTUP_TIMEOUT_MS, "closing the harness");
  try {
    const { url } = await withTimeout(server.listen(), STARTUP_TIMEOUT_MS, "starting the harness");
    await opts.warmUp(url);
    const pid = await withTimeout(
      findWorkerd(`/do/${opts.doDir}`),
      10_000,
      `finding the workerd process of ${opts.doDir}`,
    );
    return { url, worker: server.getWorker(), pid, close };
  } catch (err) {
    await close().catch(() => {});
    throw err;
  }
}

function childPids(parent: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // Fields after the parenthesised command: state, ppid, ...
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === parent) pids.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

/** Paths of the files a process holds open (unreadable descriptors are skipped). */
export function openFiles(pid: number): string[] {
  const paths: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      paths.push(readlinkSync(`/proc/${pid}/fd/${fd}`));
    } catch {
      // Closed meanwhile.
    }
  }
  return paths;
}

export async function findWorkerd(pathPart: string): Promise<number> {
  for (;;) {
    for (const pid of childPids(process.pid)) {
      try {
        if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("workerd")) continue;
        if (openFiles(pid).some((p) => p.includes(pathPart))) return pid;
      } catch {
        // Not ours to read, or gone.
      }
    }
    await sleep(100);
  }
}

export interface Memory {
  /** Resident set now, bytes. */
  rssBytes: number;
  /** Peak resident set since the process started (VmHWM), bytes. */
  peakBytes: number;
}

export function memoryOf(pid: number): Memory {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
    if (!match?.[1]) throw new Error(`no ${field} in /proc/${pid}/status`);
    return Number(match[1]) * 1024;
  };
  return { rssBytes: kib("VmRSS"), peakBytes: kib("VmHWM") };
}

/**
 * Size of one Durable Object's open SQLite files (database + WAL): the files named
 * `{objectId}.sqlite*` under `dir`. Undefined when the process does not hold them open.
 */
export function openSqliteBytes(pid: number, dir: string, objectId: string): number | undefined {
  const files = new Set(
    openFiles(pid).filter((p) => /\.sqlite(-wal)?$/.test(p) && p.includes(`${dir}${objectId}.`)),
  );
  if (files.size === 0) return undefined;
  let total = 0;
  for (const file of files) total += statSync(file).size;
  return total;
}

/** A timed request: milliseconds from send to the last body byte. Throws on another status. */
export async function timedFetch(
  url: URL,
  init: { method: string; headers?: Record<string, string>; body?: string },
  expectStatus = 200,
): Promise<{ ms: number; body: string }> {
  const start = performance.now();
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  const body = await res.text();
  const ms = performance.now() - start;
  if (res.status !== expectStatus) {
    throw new Error(
      `${init.method} ${url.pathname}: expected ${expectStatus}, got ${res.status}: ${body.slice(0, 500)}`,
    );
  }
  return { ms, body };
}
