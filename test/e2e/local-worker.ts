/**
 * Starts the Spindle worker in a real workerd process through wrangler's programmatic API and
 * talks to it over a loopback socket. Used by the end-to-end tests only.
 */
import { fileURLToPath } from "node:url";

// Read by wrangler/miniflare when they load: no `Request.cf` download, no telemetry.
process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
process.env.WRANGLER_SEND_METRICS = "false";

export const DEV_KEY = "sk-local-dev";
export const WRANGLER_CONFIG = fileURLToPath(new URL("../../wrangler.toml", import.meta.url));

/** Bound on one HTTP exchange with the worker. */
export const REQUEST_TIMEOUT_MS = 15_000;
/** Bound on starting or stopping the runtime (bundling included). */
export const STARTUP_TIMEOUT_MS = 30_000;

export interface LocalWorker {
  url: URL;
  dispose(): Promise<void>;
}

/** Rejects with a named timeout when `promise` takes longer than `ms`. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Starts the worker as development (so the local key works) with its DO SQLite and R2 data under
 * `persistDir`, and any other `vars` (`config`: another worker's wrangler.toml, for benchmarks). A second call with the same directory after `dispose()` is
 * a real restart: a new workerd process, no memory carried over, storage kept.
 */
export async function startLocalWorker(
  persistDir: string,
  vars: Record<string, string> = {},
  config = WRANGLER_CONFIG,
): Promise<LocalWorker> {
  const { unstable_startWorker } = await import("wrangler");
  const worker = await withTimeout(
    unstable_startWorker({
      config,
      bindings: Object.fromEntries(
        Object.entries({ ...vars, SPINDLE_ENV: "development" }).map(([name, value]) => [
          name,
          { type: "plain_text" as const, value },
        ]),
      ),
      dev: {
        persist: persistDir,
        server: { hostname: "127.0.0.1", port: 0 },
        inspector: false,
        watch: false,
        logLevel: "warn",
      },
    }),
    STARTUP_TIMEOUT_MS,
    "starting the worker",
  );
  const dispose = () => withTimeout(worker.dispose(), STARTUP_TIMEOUT_MS, "stopping the worker");
  try {
    await withTimeout(worker.ready, STARTUP_TIMEOUT_MS, "waiting for the worker");
    const url = await withTimeout(worker.url, STARTUP_TIMEOUT_MS, "reading the worker URL");
    return { url, dispose };
  } catch (err) {
    await dispose().catch(() => {});
    throw err;
  }
}

/** One request over the socket, with the development key unless `key` is given (null: none). */
export async function call(
  base: URL,
  method: string,
  path: string,
  body?: unknown,
  key: string | null = DEV_KEY,
): Promise<Response> {
  const headers: Record<string, string> = {};
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  return fetch(new URL(path, base), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
}

/** The body as text after checking the status (the text is kept for byte comparisons). */
export async function text(res: Response, status = 200): Promise<string> {
  const body = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${body}`);
  return body;
}

/** `read`'s first defined answer, asked every 200 ms for at most `withinMs`. */
export async function eventually<T>(
  read: () => Promise<T | undefined>,
  what: string,
  withinMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
