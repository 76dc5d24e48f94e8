import {
  type AttemptScope,
  type Attempts,
  attemptsOf,
  type FetchFn,
  normalizeBaseUrl,
  type RetryOptions,
  sseFrames,
  streamWithRetries,
} from "./http/attempts.ts";
import {
  API_KEY_HEADERS,
  type ApiKeyHeader,
  credentialsOf,
  keyedStreamHeaders,
} from "./http/credentials.ts";
import type { ModelClient, ModelEvent, ModelPrompt } from "./model-client.ts";
import { ProviderError } from "./model-client.ts";
import {
  type ChatWireOptions,
  defaultChatWireOptions,
  readChatModels,
} from "./openai-chat/models.ts";
import { ChatStreamAssembler } from "./openai-chat/stream.ts";
import { buildChatRequestBody, isDone, parseChunk } from "./openai-chat/wire.ts";

export const OPENAI_CHAT_DEFAULT_BASE_URL = "https://api.openai.com/v1";

export interface OpenAIChatClientConfig extends RetryOptions {
  fetch: FetchFn;
  apiKey: string;
  /** The API root, e.g. `http://127.0.0.1:8000/v1`; requests go to `{baseUrl}/chat/completions`. */
  baseUrl?: string;
  /** The provider's model name from the catalog entry (sent as `model`). */
  model: string;
  /** Sent as `max_completion_tokens` (or `max_tokens`): the catalog entry's output limit. */
  maxOutputTokens?: number;
  /** How the model's host lays out a request (the entry's `chat` member). Default: OpenAI's. */
  wire?: ChatWireOptions;
  /** The provider its errors name: another wire's provider may speak this one (`workers-ai`). */
  provider?: string;
  /** Where the key goes: `authorization` (`Bearer`, the default) or Azure OpenAI's `api-key`. */
  apiKeyHeader?: ApiKeyHeader;
  /** Sent as the `api-version` query parameter (Azure OpenAI's deployment URLs need one). */
  apiVersion?: string;
}

/**
 * The `openai-chat` provider: Chat Completions over an injected `fetch`, streamed as SSE, for
 * the many hosts that speak it (vLLM, llama.cpp, Ollama, OpenRouter, Groq, OpenAI, …).
 *
 * Retries, timeouts and aborts are `streamWithRetries`'s. Text is streamed as it comes; the
 * items are yielded once the stream has said why it finished, so a stream cut short yields no
 * half tool call (it fails, and is tried again if nothing was yielded yet).
 */
export class OpenAIChatClient implements ModelClient {
  readonly model: string;
  readonly #url: string;
  readonly #apiKey: string;
  readonly #apiKeyHeader: ApiKeyHeader;
  readonly #maxOutputTokens: number | undefined;
  readonly #wire: ChatWireOptions;
  readonly #attempts: Attempts;

  constructor(config: OpenAIChatClientConfig) {
    const provider = config.provider ?? "openai-chat";
    if (!config.apiKey) throw new ProviderError(`${provider}: an API key is required`);
    if (!config.model) throw new ProviderError(`${provider}: a model name is required`);
    this.model = config.model;
    const base = normalizeBaseUrl(provider, config.baseUrl ?? OPENAI_CHAT_DEFAULT_BASE_URL);
    const version = config.apiVersion
      ? `?api-version=${encodeURIComponent(config.apiVersion)}`
      : "";
    this.#url = `${base}/chat/completions${version}`;
    this.#apiKey = config.apiKey;
    this.#apiKeyHeader = config.apiKeyHeader ?? "authorization";
    this.#maxOutputTokens = config.maxOutputTokens;
    this.#wire = config.wire ?? defaultChatWireOptions();
    this.#attempts = attemptsOf(provider, config.fetch, config);
  }

  /** The JSON body `stream` posts for `prompt`. */
  requestBody(prompt: ModelPrompt): Record<string, unknown> {
    return buildChatRequestBody(prompt, {
      model: this.model,
      maxOutputTokens: this.#maxOutputTokens,
      options: this.#wire,
    });
  }

  async *stream(prompt: ModelPrompt, signal?: AbortSignal): AsyncGenerator<ModelEvent> {
    signal?.throwIfAborted();
    const body = JSON.stringify(this.requestBody(prompt));
    const headers = keyedStreamHeaders(this.#apiKey, this.#apiKeyHeader);
    yield* streamWithRetries(this.#attempts, { url: this.#url, headers, body }, readChunks, signal);
  }
}

/** Reads a chat completion's SSE body into model events, ending at `data: [DONE]`. */
async function* readChunks(response: Response, scope: AttemptScope): AsyncGenerator<ModelEvent> {
  const assembler = new ChatStreamAssembler();
  for await (const frame of sseFrames(response, scope)) {
    if (isDone(frame)) break;
    yield* assembler.push(parseChunk(frame));
  }
  // Without `[DONE]`, a stream that said why it finished is still whole (`end` checks).
  yield* assembler.end();
}

/** Provider settings read from the Worker environment. */
export interface OpenAIChatEnv {
  OPENAI_CHAT_BASE_URL?: string;
  OPENAI_CHAT_API_KEY?: string;
  OPENAI_CHAT_API_KEY_HEADER?: string;
  OPENAI_CHAT_API_VERSION?: string;
  SPINDLE_OPENAI_CHAT_MODELS?: string;
}

/** `SPINDLE_OPENAI_CHAT_MODELS` as `parseConfiguredModels` reads it: without the `chat` members. */
export function openAIChatCatalogModels(env: OpenAIChatEnv): string | undefined {
  return readChatModels(env.SPINDLE_OPENAI_CHAT_MODELS, "SPINDLE_OPENAI_CHAT_MODELS").catalog;
}

/**
 * Builds the `openai-chat` client from the environment: `OPENAI_CHAT_API_KEY` is required (a
 * local host that checks none takes any), `OPENAI_CHAT_BASE_URL` defaults to
 * `https://api.openai.com/v1`, `OPENAI_CHAT_API_KEY_HEADER` and `OPENAI_CHAT_API_VERSION` fit
 * Azure OpenAI, and the model's wire options come from its entry in `SPINDLE_OPENAI_CHAT_MODELS`.
 */
export function createOpenAIChatClientFromEnv(
  env: OpenAIChatEnv,
  deps: Omit<OpenAIChatClientConfig, "apiKey" | "baseUrl" | "wire" | "apiKeyHeader" | "apiVersion">,
): OpenAIChatClient {
  const credentials = credentialsOf(
    "openai-chat",
    "OPENAI_CHAT_API_KEY",
    { key: env.OPENAI_CHAT_API_KEY, baseUrl: env.OPENAI_CHAT_BASE_URL },
    OPENAI_CHAT_DEFAULT_BASE_URL,
  );
  const wire = readChatModels(
    env.SPINDLE_OPENAI_CHAT_MODELS,
    "SPINDLE_OPENAI_CHAT_MODELS",
  ).options.get(deps.model);
  const apiVersion = env.OPENAI_CHAT_API_VERSION?.trim();
  return new OpenAIChatClient({
    ...deps,
    ...credentials,
    wire,
    apiKeyHeader: apiKeyHeaderOf(env.OPENAI_CHAT_API_KEY_HEADER),
    ...(apiVersion ? { apiVersion } : {}),
  });
}

/** `OPENAI_CHAT_API_KEY_HEADER`, case-insensitive; unset or blank is `authorization`. */
function apiKeyHeaderOf(value: string | undefined): ApiKeyHeader {
  const name = value?.trim().toLowerCase() || "authorization";
  const header = API_KEY_HEADERS.find((h) => h === name);
  if (header === undefined) {
    throw new ProviderError(
      `openai-chat: OPENAI_CHAT_API_KEY_HEADER must be ${API_KEY_HEADERS.join(" or ")}, not "${value}"`,
    );
  }
  return header;
}
