import { env, exports } from "cloudflare:workers";

export const BASE = "http://spindle.test";
export const DEV_KEY = "sk-local-dev";

/** Calls the worker with the local development key (tenant `local`) unless a key is given. */
export async function api(
  method: string,
  path: string,
  body?: unknown,
  key: string | null = DEV_KEY,
): Promise<Response> {
  const headers: Record<string, string> = {};
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

/** The Thread DO stub of a thread of tenant `local`. */
export function threadStub(threadId: string, tenant = "local") {
  return env.THREAD.getByName(`${tenant}:${threadId}`);
}

export function newThreadId(): string {
  return `t_${crypto.randomUUID().replaceAll("-", "")}`;
}

/** API keys of the two test tenants configured in vitest.workers.config.ts. */
export const ACME_KEY = "sk-test-acme";
export const GLOBEX_KEY = "sk-test-globex";
