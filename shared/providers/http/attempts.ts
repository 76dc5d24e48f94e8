/**
 * One streamed model request over HTTP, tried again while that is safe: the attempt loop every
 * HTTP provider shares (`openai`, `openai-chat`, …). A provider gives the request and a reader
 * that turns its answer into model events; the loop owns timeouts, aborts, retries and the
 * failures a caller sees.
 */
import type { Clock } from "../../ports/index.ts";
import { type ModelEvent, ProviderError } from "../model-client.ts";
import { backoffDelayMs, retryAfterMs } from "./retry.ts";
import { type SseEvent, SseParser } from "./sse.ts";

export const DEFAULT_MAX_ATTEMPTS = 4;
export const DEFAULT_TIMEOUT_MS = 120_000;
/** A `Retry-After` longer than this is not waited out: the request fails at once instead. */
export const DEFAULT_MAX_RETRY_AFTER_MS = 60_000;

/** The part of `fetch` the providers use, so any implementation (or a test double) fits. */
export type FetchFn = (input: string, init: RequestInit) => Promise<Response>;
/** Waits `ms`; rejects with the signal's reason if it aborts first. */
export type SleepFn = (ms: number, signal?: AbortSignal) => Promise<void>;
/** Runs `fn` after `ms`; returns a function that cancels it. */
export type ScheduleFn = (fn: () => void, ms: number) => () => void;

/** How a provider's requests are tried; every field has a default. */
export interface RetryOptions {
  /** Total tries of one request, counting the first. Default 4. */
  maxAttempts?: number;
  /** Per attempt, for the whole response (headers and stream). Default 120 s. */
  timeoutMs?: number;
  /** Default 60 s; see `DEFAULT_MAX_RETRY_AFTER_MS`. */
  maxRetryAfterMs?: number;
  /** Backoff pauses. Default: a timer from `schedule`. */
  sleep?: SleepFn;
  /** Uniform in [0, 1), for backoff jitter. Default `Math.random`. */
  random?: () => number;
  /** Reads "now" to resolve a `Retry-After` HTTP date. Default `Date.now`. */
  clock?: Clock;
  /** Arms the per-attempt timeout. Default `setTimeout`. */
  schedule?: ScheduleFn;
}

/** `RetryOptions` with the defaults filled in, checked once when a client is made. */
export interface Attempts {
  /** The provider's name: it starts each of its error messages. */
  provider: string;
  fetch: FetchFn;
  maxAttempts: number;
  timeoutMs: number;
  maxRetryAfterMs: number;
  sleep: SleepFn;
  random: () => number;
  clock: Clock;
  schedule: ScheduleFn;
}

export function attemptsOf(provider: string, fetch: FetchFn, options: RetryOptions): Attempts {
  const schedule = options.schedule ?? defaultSchedule;
  return {
    provider,
    fetch,
    maxAttempts: positiveInteger(
      provider,
      options.maxAttempts,
      DEFAULT_MAX_ATTEMPTS,
      "maxAttempts",
    ),
    timeoutMs: positiveInteger(provider, options.timeoutMs, DEFAULT_TIMEOUT_MS, "timeoutMs"),
    maxRetryAfterMs: options.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS,
    sleep: options.sleep ?? sleepWith(schedule),
    random: options.random ?? Math.random,
    clock: options.clock ?? { nowMs: () => Date.now() },
    schedule,
  };
}

/** One request: where it goes and what it sends (the body already serialized). */
export interface HttpRequest {
  url: string;
  headers: Record<string, string>;
  body: BodyInit;
}

/** Reads one attempt's successful answer into model events (`sseFrames` for a streamed one). */
export type AnswerReader = (response: Response, scope: AttemptScope) => AsyncIterable<ModelEvent>;

/** A failure worth another attempt if nothing was yielded yet (429, 5xx, a network error). */
export class TransientFailure {
  constructor(
    readonly error: ProviderError,
    readonly retryAfterMs?: number,
  ) {}
}

const STREAM_ENDED_EARLY = "stream ended before the response completed";

/** A stream that closed before its end: transient, so tried again if nothing was yielded. */
export function endedEarly(cause?: unknown): TransientFailure {
  return new TransientFailure(
    new ProviderError(STREAM_ENDED_EARLY, undefined, cause === undefined ? undefined : { cause }),
  );
}

/**
 * Streams `request`'s answer as model events (design §9):
 *
 * - 429, 5xx and network errors are retried with exponential backoff and full jitter (or the
 *   server's `Retry-After`), but only before the first event was yielded: once the caller has
 *   seen part of a response, a failure is final (`ProviderError`).
 * - Other 4xx fail at once with a `ProviderError` carrying the status and the API's message.
 * - Aborting `signal` stops the request and the stream promptly and rejects with the signal's
 *   reason (an `AbortError`), never a `ProviderError`; the per-attempt timeout is a
 *   `ProviderError`.
 */
export async function* streamWithRetries(
  attempts: Attempts,
  request: HttpRequest,
  read: AnswerReader,
  signal?: AbortSignal,
): AsyncGenerator<ModelEvent> {
  signal?.throwIfAborted();
  for (let attempt = 1; attempt <= attempts.maxAttempts; attempt++) {
    const scope = new AttemptScope(signal, attempts.timeoutMs, attempts.schedule);
    let yielded = false;
    let transient: TransientFailure;
    try {
      const response = await scope.race(
        attempts.fetch(request.url, {
          method: "POST",
          headers: request.headers,
          body: request.body,
          signal: scope.signal,
        }),
      );
      if (!response.ok) {
        const answer = await errorAnswer(response, scope);
        const error = new ProviderError(
          `${attempts.provider}: HTTP ${response.status}: ${answer.message}`,
          response.status,
        );
        if (!worthRetrying(response, answer.json)) throw error;
        throw new TransientFailure(error, retryAfterMs(response.headers, attempts.clock.nowMs()));
      }
      for await (const event of read(response, scope)) {
        yielded = true;
        yield event;
      }
      return;
    } catch (error) {
      const failure = scope.classify(error);
      if (!(failure instanceof TransientFailure)) throw failure;
      if (yielded || attempt >= attempts.maxAttempts) throw failure.error;
      transient = failure;
    } finally {
      scope.dispose();
    }
    const waitMs = transient.retryAfterMs ?? backoffDelayMs(attempt, attempts.random);
    if (waitMs > attempts.maxRetryAfterMs) throw transient.error;
    await attempts.sleep(waitMs, signal);
    signal?.throwIfAborted();
  }
  // Unreachable: the last attempt either returns or throws.
  throw new ProviderError(`${attempts.provider}: no attempts were made`);
}

/**
 * The SSE frames of a streamed answer, each read raced against the attempt's signal. It ends
 * when the body does: whether that was too early is the reader's to say (`endedEarly`).
 */
export async function* sseFrames(
  response: Response,
  scope: AttemptScope,
): AsyncGenerator<SseEvent> {
  if (!response.body) throw endedEarly();
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
        throw endedEarly(cause);
      }
      const { done, value } = chunk;
      yield* done ? parser.end() : parser.push(value);
      if (done) return;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** An API root from configuration: http(s), without trailing slashes. */
export function normalizeBaseUrl(provider: string, raw: string): string {
  const trimmed = raw.trim().replace(/\/+$/, "");
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    throw new ProviderError(`${provider}: the base URL is not a valid URL: ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new ProviderError(`${provider}: the base URL must be http(s): ${JSON.stringify(raw)}`);
  }
  return trimmed;
}

function positiveInteger(
  provider: string,
  value: number | undefined,
  fallback: number,
  name: string,
): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) {
    throw new ProviderError(`${provider}: ${name} must be a positive integer, got ${value}`);
  }
  return value;
}

/** Caps how much of an error body is read into a message. */
const ERROR_BODY_MAX_CHARS = 2_000;

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
export class AttemptScope {
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

/** An error answer's message (from its JSON where it has one) and the JSON itself. */
async function errorAnswer(
  response: Response,
  scope: AttemptScope,
): Promise<{ message: string; json: unknown }> {
  let text = "";
  try {
    text = (await scope.race(response.text())).slice(0, ERROR_BODY_MAX_CHARS);
  } catch (error) {
    if (scope.signal.aborted) throw error;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON: the raw text is the message
  }
  const body = (typeof json === "object" && json !== null ? json : {}) as {
    error?: { message?: unknown } | string;
    message?: unknown;
  };
  const nested =
    typeof body.error === "object" && body.error !== null ? body.error.message : body.error;
  const message = nested ?? body.message;
  if (typeof message === "string" && message) return { message, json };
  return { message: text.trim() || response.statusText || "no error message", json };
}

/**
 * Whether an error answer is worth another attempt: what the API says in `x-should-retry`
 * (OpenAI's and Anthropic's SDKs obey it first), else 429 and 5xx, except a 429 that says a
 * spending limit was reached (Anthropic's `enforced_spend_limit_reached`: no wait ends it).
 */
function worthRetrying(response: Response, json: unknown): boolean {
  const told = response.headers.get("x-should-retry")?.trim().toLowerCase();
  if (told === "true") return true;
  if (told === "false") return false;
  if (response.status === 429 && JSON.stringify(json ?? null).includes(SPEND_LIMIT)) return false;
  return response.status === 429 || response.status >= 500;
}

const SPEND_LIMIT = '"enforced_spend_limit_reached"';
