import type { Clock } from "../ports/index.ts";
import {
  type ModelClient,
  type ModelEvent,
  type ModelPrompt,
  ProviderError,
} from "./model-client.ts";
import { InputSerializer } from "./openai/input-text.ts";
import { backoffDelayMs, retryAfterMs } from "./openai/retry.ts";
import { SseParser } from "./openai/sse.ts";
import {
  buildRequestBody,
  interpretEvent,
  type RequestBodyOptions,
  requestBodyBytes,
} from "./openai/wire.ts";

export const OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1";
export const OPENAI_DEFAULT_MAX_ATTEMPTS = 4;
export const OPENAI_DEFAULT_TIMEOUT_MS = 120_000;
/** A `Retry-After` longer than this is not waited out: the request fails at once instead. */
export const OPENAI_DEFAULT_MAX_RETRY_AFTER_MS = 60_000;

/** The part of `fetch` the provider uses, so any implementation (or a test double) fits. */
export type FetchFn = (input: string, init: RequestInit) => Promise<Response>;
/** Waits `ms`; rejects with the signal's reason if it aborts first. */
export type SleepFn = (ms: number, signal?: AbortSignal) => Promise<void>;
/** Runs `fn` after `ms`; returns a function that cancels it. */
export type ScheduleFn = (fn: () => void, ms: number) => () => void;

export interface OpenAIResponsesClientConfig {
  fetch: FetchFn;
  apiKey: string;
  /** The API root, e.g. `https://api.openai.com/v1`; requests go to `{baseUrl}/responses`. */
  baseUrl?: string;
  /** The provider's model name from the catalog entry (sent as `model`). */
  model: string;
  /** The thread id, sent as `prompt_cache_key` so a thread's requests share a cache. */
  threadId?: string;
  /** Sent as `max_output_tokens`: the catalog entry's limit on what one request produces. */
  maxOutputTokens?: number;
  /** Total tries of one request, counting the first. Default 4. */
  maxAttempts?: number;
  /** Per attempt, for the whole response (headers and stream). Default 120 s. */
  timeoutMs?: number;
  /** Default 60 s; see `OPENAI_DEFAULT_MAX_RETRY_AFTER_MS`. */
  maxRetryAfterMs?: number;
  /** Backoff pauses. Default: a timer from `schedule`. */
  sleep?: SleepFn;
  /** Uniform in [0, 1), for backoff jitter. Default `Math.random`. */
  random?: () => number;
  /** Reads "now" to resolve a `Retry-After` HTTP date. Default `Date.now`. */
  clock?: Clock;
  /** Arms the per-attempt timeout. Default `setTimeout`. */
  schedule?: ScheduleFn;
  /**
   * Serializes the requests' `input`, reusing the previous request's text: one per thread, shared
   * by the thread's clients. Default: one of the client's own.
   */
  inputSerializer?: InputSerializer;
}

const STREAM_ENDED_EARLY = "stream ended before the response completed";

/** Caps how much of an error body is read into a message. */
const ERROR_BODY_MAX_CHARS = 2_000;

/** A failure worth another attempt if nothing was yielded yet (429, 5xx, a network error). */
class TransientFailure {
  constructor(
    readonly error: ProviderError,
    readonly retryAfterMs?: number,
  ) {}
}

const defaultSchedule: ScheduleFn = (fn, ms) => {
  const handle = setTimeout(fn, ms);
  return () => clearTimeout(handle);
};

function sleepWith(schedule: ScheduleFn): SleepFn {
  return (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const onAbort = () => {
        cancel();
        reject(abortReason(signal as AbortSignal));
      };
      const cancel = schedule(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, ms);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted.", "AbortError");
}

/**
 * One attempt's lifetime: aborts its fetch and stream when the caller aborts or the timeout
 * fires, and remembers which of the two it was.
 */
class AttemptScope {
  readonly #controller = new AbortController();
  readonly #outer: AbortSignal | undefined;
  readonly #cancelTimer: () => void;
  readonly #onOuterAbort = () => this.#controller.abort(this.#outer?.reason);
  timedOut = false;

  constructor(outer: AbortSignal | undefined, timeoutMs: number, schedule: ScheduleFn) {
    this.#outer = outer;
    outer?.addEventListener("abort", this.#onOuterAbort, { once: true });
    this.#cancelTimer = schedule(() => {
      this.timedOut = true;
      this.#controller.abort(new ProviderError(`timed out after ${timeoutMs} ms`));
    }, timeoutMs);
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /**
   * Settles with `promise`, or rejects as soon as the attempt is aborted: a `fetch` or body
   * that ignores its signal cannot hold the caller past an interrupt.
   */
  race<T>(promise: Promise<T>): Promise<T> {
    const signal = this.#controller.signal;
    if (signal.aborted) {
      promise.catch(() => {});
      return Promise.reject(signal.reason);
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      promise.then(
        (value) => {
          signal.removeEventListener("abort", onAbort);
          resolve(value);
        },
        (error: unknown) => {
          signal.removeEventListener("abort", onAbort);
          reject(error);
        },
      );
    });
  }

  /** Classifies what an attempt threw: the caller's abort, our timeout, or the failure itself. */
  classify(error: unknown): unknown {
    if (this.#outer?.aborted) return abortReason(this.#outer);
    if (this.timedOut) return this.#controller.signal.reason;
    if (error instanceof ProviderError || error instanceof TransientFailure) return error;
    // Anything else came out of fetch or the body stream: a network failure.
    const detail = error instanceof Error ? error.message : String(error);
    return new TransientFailure(
      new ProviderError(`network error: ${detail}`, undefined, { cause: error }),
    );
  }

  dispose(): void {
    this.#cancelTimer();
    this.#outer?.removeEventListener("abort", this.#onOuterAbort);
    // Releases the connection if the stream is still open (consumer stopped early, failure).
    if (!this.#controller.signal.aborted)
      this.#controller.abort(new DOMException("done", "AbortError"));
  }
}

async function errorMessage(response: Response, scope: AttemptScope): Promise<string> {
  let text = "";
  try {
    text = (await scope.race(response.text())).slice(0, ERROR_BODY_MAX_CHARS);
  } catch (error) {
    if (scope.signal.aborted) throw error;
  }
  try {
    const json = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const nested =
      typeof json.error === "object" && json.error !== null ? json.error.message : json.error;
    const message = nested ?? json.message;
    if (typeof message === "string" && message) return message;
  } catch {
    // not JSON: fall through to the raw text
  }
  return text.trim() || response.statusText || "no error message";
}

function isRetryableStatus(status: number): boolean {
  return status === 429 || status >= 500;
}

/**
 * The `openai` provider (design §9): the Responses API over an injected `fetch`, streamed as SSE,
 * with `store: false` and `prompt_cache_key` = thread.
 *
 * - 429, 5xx and network errors are retried with exponential backoff and full jitter (or the
 *   server's `Retry-After`), but only before the first event was yielded: once the caller has
 *   seen part of a response, a failure is final (`ProviderError`).
 * - Other 4xx fail at once with a `ProviderError` carrying the status and the API's message.
 * - Only finished items are yielded (`response.output_item.done`); a stream that ends before
 *   `response.completed` is a `ProviderError`, so no half tool call ever reaches the engine.
 * - Aborting `signal` stops the request and the stream promptly and rejects with the signal's
 *   reason (an `AbortError`), never a `ProviderError`; the per-attempt timeout is a
 *   `ProviderError`.
 */
export class OpenAIResponsesClient implements ModelClient {
  readonly model: string;
  readonly #fetch: FetchFn;
  readonly #url: string;
  readonly #apiKey: string;
  readonly #threadId: string | undefined;
  readonly #maxOutputTokens: number | undefined;
  readonly #maxAttempts: number;
  readonly #timeoutMs: number;
  readonly #maxRetryAfterMs: number;
  readonly #sleep: SleepFn;
  readonly #random: () => number;
  readonly #clock: Clock;
  readonly #schedule: ScheduleFn;
  readonly #serializer: InputSerializer;

  constructor(config: OpenAIResponsesClientConfig) {
    if (!config.apiKey) throw new ProviderError("openai: an API key is required");
    if (!config.model) throw new ProviderError("openai: a model name is required");
    this.model = config.model;
    this.#fetch = config.fetch;
    this.#url = `${normalizeBaseUrl(config.baseUrl ?? OPENAI_DEFAULT_BASE_URL)}/responses`;
    this.#apiKey = config.apiKey;
    this.#threadId = config.threadId;
    this.#maxOutputTokens = config.maxOutputTokens;
    this.#maxAttempts = positiveInteger(
      config.maxAttempts,
      OPENAI_DEFAULT_MAX_ATTEMPTS,
      "maxAttempts",
    );
    this.#timeoutMs = positiveInteger(config.timeoutMs, OPENAI_DEFAULT_TIMEOUT_MS, "timeoutMs");
    this.#maxRetryAfterMs = config.maxRetryAfterMs ?? OPENAI_DEFAULT_MAX_RETRY_AFTER_MS;
    this.#schedule = config.schedule ?? defaultSchedule;
    this.#sleep = config.sleep ?? sleepWith(this.#schedule);
    this.#random = config.random ?? Math.random;
    this.#clock = config.clock ?? { nowMs: () => Date.now() };
    this.#serializer = config.inputSerializer ?? new InputSerializer();
  }

  /** The JSON body `stream` posts for `prompt` (exposed for `GET …/prompt`-style inspection). */
  requestBody(prompt: ModelPrompt): Record<string, unknown> {
    return buildRequestBody(prompt, this.#bodyOptions());
  }

  #bodyOptions(): RequestBodyOptions {
    const options: RequestBodyOptions = { model: this.model };
    if (this.#threadId !== undefined) options.promptCacheKey = this.#threadId;
    if (this.#maxOutputTokens !== undefined) options.maxOutputTokens = this.#maxOutputTokens;
    return options;
  }

  async *stream(prompt: ModelPrompt, signal?: AbortSignal): AsyncGenerator<ModelEvent> {
    signal?.throwIfAborted();
    // `JSON.stringify(this.requestBody(prompt))` as UTF-8, without serializing again what the
    // thread's previous request held.
    const body = requestBodyBytes(prompt, this.#bodyOptions(), this.#serializer);
    for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
      const scope = new AttemptScope(signal, this.#timeoutMs, this.#schedule);
      let yielded = false;
      let transient: TransientFailure;
      try {
        const response = await scope.race(
          this.#fetch(this.#url, {
            method: "POST",
            headers: {
              authorization: `Bearer ${this.#apiKey}`,
              "content-type": "application/json",
              accept: "text/event-stream",
            },
            body,
            signal: scope.signal,
          }),
        );
        if (!response.ok) {
          const error = new ProviderError(
            `openai: HTTP ${response.status}: ${await errorMessage(response, scope)}`,
            response.status,
          );
          if (!isRetryableStatus(response.status)) throw error;
          throw new TransientFailure(error, retryAfterMs(response.headers, this.#clock.nowMs()));
        }
        for await (const event of readEvents(response, scope)) {
          yielded = true;
          yield event;
        }
        return;
      } catch (error) {
        const failure = scope.classify(error);
        if (!(failure instanceof TransientFailure)) throw failure;
        if (yielded || attempt >= this.#maxAttempts) throw failure.error;
        transient = failure;
      } finally {
        scope.dispose();
      }
      const waitMs = transient.retryAfterMs ?? backoffDelayMs(attempt, this.#random);
      if (waitMs > this.#maxRetryAfterMs) throw transient.error;
      await this.#sleep(waitMs, signal);
      signal?.throwIfAborted();
    }
    // Unreachable: the last attempt either returns or throws.
    throw new ProviderError("openai: no attempts were made");
  }
}

/**
 * Reads a Responses SSE body into model events, ending at `response.completed`. Each read is
 * raced against the attempt's signal; a body that closes first is a (transient) failure.
 */
async function* readEvents(response: Response, scope: AttemptScope): AsyncGenerator<ModelEvent> {
  if (!response.body) throw new TransientFailure(new ProviderError(STREAM_ENDED_EARLY));
  const reader = response.body.getReader();
  const parser = new SseParser();
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await scope.race(reader.read());
      } catch (cause) {
        if (scope.signal.aborted) throw cause;
        // The connection dropped mid-body (e.g. the socket was reset).
        throw new TransientFailure(new ProviderError(STREAM_ENDED_EARLY, undefined, { cause }));
      }
      const { done, value } = chunk;
      const frames = done ? parser.end() : parser.push(value);
      for (const frame of frames) {
        const event = interpretEvent(frame);
        if (!event) continue;
        yield event;
        if (event.type === "completed") return;
      }
      if (done) throw new TransientFailure(new ProviderError(STREAM_ENDED_EARLY));
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function normalizeBaseUrl(raw: string): string {
  const trimmed = raw.trim().replace(/\/+$/, "");
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    throw new ProviderError(`openai: the base URL is not a valid URL: ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new ProviderError(`openai: the base URL must be http(s): ${JSON.stringify(raw)}`);
  }
  return trimmed;
}

function positiveInteger(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) {
    throw new ProviderError(`openai: ${name} must be a positive integer, got ${value}`);
  }
  return value;
}

/** Provider settings read from the Worker environment. */
export interface OpenAIEnv {
  OPENAI_BASE_URL?: string;
  OPENAI_API_KEY?: string;
}

/**
 * Builds the `openai` client from the environment: `OPENAI_API_KEY` is required (a missing or
 * blank key throws a `ProviderError` that says so), `OPENAI_BASE_URL` defaults to
 * `https://api.openai.com/v1` and must be an http(s) URL.
 */
export function createOpenAIClientFromEnv(
  env: OpenAIEnv,
  deps: Omit<OpenAIResponsesClientConfig, "apiKey" | "baseUrl">,
): OpenAIResponsesClient {
  const apiKey = env.OPENAI_API_KEY?.trim();
  if (!apiKey) {
    throw new ProviderError(
      "openai: OPENAI_API_KEY is not set; configure it as a secret to use the openai provider",
    );
  }
  const baseUrl = env.OPENAI_BASE_URL?.trim() || OPENAI_DEFAULT_BASE_URL;
  return new OpenAIResponsesClient({ ...deps, apiKey, baseUrl });
}
