import { type AnthropicWireOptions, readAnthropicModels } from "./anthropic/models.ts";
import { MessageAssembly } from "./anthropic/stream.ts";
import { buildRequestBody, DEFAULT_MAX_TOKENS, type RequestBodyOptions } from "./anthropic/wire.ts";
import {
  type AttemptScope,
  type Attempts,
  attemptsOf,
  endedEarly,
  type FetchFn,
  normalizeBaseUrl,
  type RetryOptions,
  sseFrames,
  streamWithRetries,
} from "./http/attempts.ts";
import { credentialsOf } from "./http/credentials.ts";
import type { ModelClient, ModelEvent, ModelPrompt } from "./model-client.ts";
import { ProviderError } from "./model-client.ts";

export const ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com/v1";
/** `max_tokens` (which the API requires) when the catalog entry sets no output limit. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = DEFAULT_MAX_TOKENS;
/** The API version every request names; the official SDK sends the same. */
export const ANTHROPIC_VERSION = "2023-06-01";

export interface AnthropicClientConfig extends RetryOptions {
  fetch: FetchFn;
  apiKey: string;
  /** The API root, e.g. `https://api.anthropic.com/v1`; requests go to `{baseUrl}/messages`. */
  baseUrl?: string;
  /** The provider's model name from the catalog entry (sent as `model`). */
  model: string;
  /** Sent as `max_tokens`, which the API requires (default `ANTHROPIC_DEFAULT_MAX_TOKENS`). */
  maxOutputTokens?: number;
  /** How the model takes a request (the entry's `anthropic` member). Default: budgeted thinking. */
  wire?: Partial<AnthropicWireOptions>;
}

/**
 * The `anthropic` provider: the Messages API over an injected `fetch`, streamed as SSE, with
 * prompt-cache breakpoints placed by Spindle (`anthropic/wire.ts`). A hand-written client, as
 * the reference advises (§2.9): the wire is one POST and named SSE events, and the SDK would
 * add ~400 KB to the bundle.
 *
 * Retries, timeouts and aborts are `streamWithRetries`'s (429, 529 and other 5xx, an
 * `overloaded_error` event before anything was yielded). Only finished blocks become items; a
 * stream that ends before `message_stop` is a `ProviderError`.
 */
export class AnthropicClient implements ModelClient {
  readonly model: string;
  readonly #url: string;
  readonly #apiKey: string;
  readonly #maxOutputTokens: number | undefined;
  readonly #thinking: AnthropicWireOptions["thinking"];
  readonly #cacheTtl: AnthropicWireOptions["cache_ttl"];
  readonly #attempts: Attempts;

  constructor(config: AnthropicClientConfig) {
    if (!config.apiKey) throw new ProviderError("anthropic: an API key is required");
    if (!config.model) throw new ProviderError("anthropic: a model name is required");
    this.model = config.model;
    const base = normalizeBaseUrl("anthropic", config.baseUrl ?? ANTHROPIC_DEFAULT_BASE_URL);
    this.#url = `${base}/messages`;
    this.#apiKey = config.apiKey;
    this.#maxOutputTokens = config.maxOutputTokens;
    this.#thinking = config.wire?.thinking ?? "budget";
    this.#cacheTtl = config.wire?.cache_ttl ?? "5m";
    this.#attempts = attemptsOf("anthropic", config.fetch, config);
  }

  /** The JSON body `stream` posts for `prompt`. */
  requestBody(prompt: ModelPrompt): Record<string, unknown> {
    const options: RequestBodyOptions = {
      model: this.model,
      thinking: this.#thinking,
      cacheTtl: this.#cacheTtl,
    };
    if (this.#maxOutputTokens !== undefined) options.maxTokens = this.#maxOutputTokens;
    return buildRequestBody(prompt, options);
  }

  async *stream(prompt: ModelPrompt, signal?: AbortSignal): AsyncGenerator<ModelEvent> {
    signal?.throwIfAborted();
    const body = JSON.stringify(this.requestBody(prompt));
    const headers = {
      "x-api-key": this.#apiKey,
      "anthropic-version": ANTHROPIC_VERSION,
      "content-type": "application/json",
      accept: "text/event-stream",
    };
    const model = this.model;
    const read = (response: Response, scope: AttemptScope) => readEvents(response, scope, model);
    yield* streamWithRetries(this.#attempts, { url: this.#url, headers, body }, read, signal);
  }
}

/** Reads one attempt's Messages stream into model events, ending at `message_stop`. */
async function* readEvents(
  response: Response,
  scope: AttemptScope,
  model: string,
): AsyncGenerator<ModelEvent> {
  const assembly = new MessageAssembly(model);
  for await (const frame of sseFrames(response, scope)) {
    yield* assembly.accept(frame);
    if (assembly.finished) return;
  }
  throw endedEarly();
}

/** Provider settings read from the Worker environment. */
export interface AnthropicEnv {
  ANTHROPIC_BASE_URL?: string;
  ANTHROPIC_API_KEY?: string;
  SPINDLE_ANTHROPIC_MODELS?: string;
}

/** `SPINDLE_ANTHROPIC_MODELS` as `parseConfiguredModels` reads it: without the `anthropic` members. */
export function anthropicCatalogModels(env: AnthropicEnv): string | undefined {
  return readAnthropicModels(env.SPINDLE_ANTHROPIC_MODELS).catalog;
}

/**
 * Builds the `anthropic` client from the environment: `ANTHROPIC_API_KEY` is required (a missing
 * or blank key throws a `ProviderError` that says so), `ANTHROPIC_BASE_URL` defaults to
 * `https://api.anthropic.com/v1` and must be an http(s) URL; the model's options come from its
 * entry in `SPINDLE_ANTHROPIC_MODELS`.
 */
export function createAnthropicClientFromEnv(
  env: AnthropicEnv,
  deps: Omit<AnthropicClientConfig, "apiKey" | "baseUrl" | "wire">,
): AnthropicClient {
  const credentials = credentialsOf(
    "anthropic",
    "ANTHROPIC_API_KEY",
    { key: env.ANTHROPIC_API_KEY, baseUrl: env.ANTHROPIC_BASE_URL },
    ANTHROPIC_DEFAULT_BASE_URL,
  );
  const wire = readAnthropicModels(env.SPINDLE_ANTHROPIC_MODELS).options.get(deps.model);
  return new AnthropicClient({ ...deps, ...credentials, ...(wire ? { wire } : {}) });
}
