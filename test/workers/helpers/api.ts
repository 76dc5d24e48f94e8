import { env, exports } from "cloudflare:workers";
import { vi } from "vitest";

export const BASE = "http://spindle.test";
export const DEV_KEY = "sk-local-dev";

/**
 * Calls the worker with the local development key (tenant `local`) unless a key is given, with
 * any `extra` headers (e.g. `Idempotency-Key`, `Last-Event-ID`).
 */
export async function api(
  method: string,
  path: string,
  body?: unknown,
  key: string | null = DEV_KEY,
  extra: Record<string, string> = {},
): Promise<Response> {
  const headers: Record<string, string> = { ...extra };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  return exports.default.fetch(`${BASE}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

export async function json<T = Record<string, unknown>>(res: Response, status = 200): Promise<T> {
  const text = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}

/** The Thread DO stub of a thread of a static tenant (`local` by default; no incarnation). */
export function threadStub(threadId: string, tenant = "local") {
  return env.THREAD.getByName(`${tenant}:${threadId}`);
}

export function newThreadId(): string {
  return `t_${crypto.randomUUID().replaceAll("-", "")}`;
}

/** API keys of the two test tenants configured in vitest.workers.config.ts. */
export const ACME_KEY = "sk-test-acme";
export const GLOBEX_KEY = "sk-test-globex";

export { parseSse, readSse, type SseFrame } from "../../helpers/sse.ts";

export async function post(path: string, body?: unknown, key: string | null = DEV_KEY) {
  return api("POST", path, body, key);
}

/**
 * `POST /v1/threads/import?id=&parent=` with a JSONL body, as the local development tenant unless
 * `key` says otherwise (no `id`: the service names the thread), with `extra` headers.
 */
export async function importRollout(
  id: string | undefined,
  body: string,
  extra: Record<string, string> = {},
  { parent, key = DEV_KEY }: { parent?: string; key?: string } = {},
): Promise<Response> {
  const params = new URLSearchParams({
    ...(id === undefined ? {} : { id }),
    ...(parent === undefined ? {} : { parent }),
  }).toString();
  const query = params === "" ? "" : `?${params}`;
  return exports.default.fetch(`${BASE}/v1/threads/import${query}`, {
    method: "POST",
    headers: {
      ...extra,
      authorization: `Bearer ${key}`,
      "content-type": "application/x-ndjson",
    },
    body,
  });
}

/** Resolves once the thread reports a running task (a `/slow` turn started without awaiting it). */
export async function untilRunning(threadId: string, key: string = DEV_KEY): Promise<void> {
  await vi.waitUntil(
    async () =>
      (await json<{ status: string }>(await api("GET", `/v1/threads/${threadId}`, undefined, key)))
        .status === "running",
    { timeout: 5_000, interval: 10 },
  );
}
