import {
  type AttemptScope,
  type Attempts,
  attemptsOf,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_RETRY_AFTER_MS,
  DEFAULT_TIMEOUT_MS,
  endedEarly,
  type FetchFn,
  normalizeBaseUrl,
  type RetryOptions,
  sseFrames,
  streamWithRetries,
} from "./http/attempts.ts";
import { credentialsOf, keyedStreamHeaders } from "./http/credentials.ts";
import type { ModelClient, ModelEvent, ModelPrompt } from "./model-client.ts";
import { ProviderError } from "./model-client.ts";
import { InputSerializer } from "./openai/input-text.ts";
import {
  buildRequestBody,
  interpretEvent,
  type RequestBodyOptions,
  requestBodyBytes,
} from "./openai/wire.ts";

export const OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1";
export const OPENAI_DEFAULT_MAX_ATTEMPTS = DEFAULT_MAX_ATTEMPTS;
export const OPENAI_DEFAULT_TIMEOUT_MS = DEFAULT_TIMEOUT_MS;
export const OPENAI_DEFAULT_MAX_RETRY_AFTER_MS = DEFAULT_MAX_RETRY_AFTER_MS;

export interface OpenAIResponsesClientConfig extends RetryOptions {
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
  /**
   * Serializes the requests' `input`, reusing the previous request's text: one per thread, shared
   * by the thread's clients. Default: one of the client's own.
   */
  inputSerializer?: InputSerializer;
}

/**
 * The `openai` provider (design §9): the Responses API over an injected `fetch`, streamed as SSE,
 * with `store: false` and `prompt_cache_key` = thread.
 *
 * Retries, timeouts and aborts are `streamWithRetries`'s. Only finished items are yielded
 * (`response.output_item.done`); a stream that ends before `response.completed` is a
 * `ProviderError`, so no half tool call ever reaches the engine.
 */
export class OpenAIResponsesClient implements ModelClient {
  readonly model: string;
  readonly #url: string;
  readonly #apiKey: string;
  readonly #threadId: string | undefined;
  readonly #maxOutputTokens: number | undefined;
  readonly #attempts: Attempts;
  readonly #serializer: InputSerializer;

  constructor(config: OpenAIResponsesClientConfig) {
    if (!config.apiKey) throw new ProviderError("openai: an API key is required");
    if (!config.model) throw new ProviderError("openai: a model name is required");
    this.model = config.model;
    this.#url = `${normalizeBaseUrl("openai", config.baseUrl ?? OPENAI_DEFAULT_BASE_URL)}/responses`;
    this.#apiKey = config.apiKey;
    this.#threadId = config.threadId;
    this.#maxOutputTokens = config.maxOutputTokens;
    this.#attempts = attemptsOf("openai", config.fetch, config);
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
    const headers = keyedStreamHeaders(this.#apiKey);
    yield* streamWithRetries(this.#attempts, { url: this.#url, headers, body }, readEvents, signal);
  }
}

/** Reads a Responses SSE body into model events, ending at `response.completed`. */
async function* readEvents(response: Response, scope: AttemptScope): AsyncGenerator<ModelEvent> {
  for await (const frame of sseFrames(response, scope)) {
    const event = interpretEvent(frame);
    if (!event) continue;
    yield event;
    if (event.type === "completed") return;
  }
  throw endedEarly();
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
  const credentials = credentialsOf(
    "openai",
    "OPENAI_API_KEY",
    { key: env.OPENAI_API_KEY, baseUrl: env.OPENAI_BASE_URL },
    OPENAI_DEFAULT_BASE_URL,
  );
  return new OpenAIResponsesClient({ ...deps, ...credentials });
}
