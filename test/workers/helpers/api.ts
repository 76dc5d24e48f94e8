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

export interface SseFrame {
  event?: string;
  id?: string;
  data: string;
}

/** Parses SSE frames from text (comments skipped). */
export function parseSse(text: string): SseFrame[] {
  const frames: SseFrame[] = [];
  for (const block of text.split(/\n\n/)) {
    const frame: SseFrame = { data: "" };
    let any = false;
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = line.slice(0, colon);
      const value = line.slice(colon + 1).replace(/^ /, "");
      any = true;
      if (field === "event") frame.event = value;
      else if (field === "id") frame.id = value;
      else if (field === "data") frame.data += frame.data ? `\n${value}` : value;
    }
    if (any) frames.push(frame);
  }
  return frames;
}

/**
 * Reads an SSE response until `stop` says so (or the stream ends), then cancels it. `stop` sees
 * whole frames only: a long one arrives in several chunks. Linear in the stream's length: text is
 * joined and parsed only when a chunk ends a frame.
 */
export async function readSse(
  res: Response,
  stop: (frames: SseFrame[]) => boolean = () => false,
): Promise<SseFrame[]> {
  const reader = res.body?.pipeThrough(new TextDecoderStream()).getReader();
  if (!reader) throw new Error("no body");
  const frames: SseFrame[] = [];
  /** Text after the last whole frame: `head`, then the chunks received since. */
  let head = "";
  let chunks: string[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const before = chunks.at(-1) ?? head;
    chunks.push(value);
    if (!value.includes("\n\n") && !(before.endsWith("\n") && value.startsWith("\n"))) continue;
    const text = head + chunks.join("");
    const end = text.lastIndexOf("\n\n") + 2;
    frames.push(...parseSse(text.slice(0, end)));
    head = text.slice(end);
    chunks = [];
    if (stop(frames)) {
      await reader.cancel();
      return frames;
    }
  }
  return [...frames, ...parseSse(head + chunks.join(""))];
}

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
