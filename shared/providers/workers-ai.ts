/**
 * The `workers-ai` provider: a deployment's Workers AI models through the `AI` binding. Its
 * Chat-shaped models take a Chat Completions request and stream its chunks (reference
 * providers.md §3), so the client is `openai-chat`'s over the binding (`bindingFetch`): one
 * mapping of history, one chunk parser, one attempt loop. The older text-generation models'
 * native answers are read as Chat chunks on the way (`workers-ai/native-answers.ts`).
 */
import type { RetryOptions } from "./http/attempts.ts";
import type { ModelClient } from "./model-client.ts";
import { type ChatWireOptions, readChatModels } from "./openai-chat/models.ts";
import { OpenAIChatClient } from "./openai-chat.ts";
import { type AiRunner, bindingFetch } from "./workers-ai/binding-fetch.ts";
import { withUniqueCallIds } from "./workers-ai/unique-call-ids.ts";

/** Provider settings read from the Worker environment (`AI` is the binding). */
export interface WorkersAiEnv {
  SPINDLE_WORKERS_AI_MODELS?: string;
  /** An AI Gateway id: the binding's requests then go through that gateway. */
  SPINDLE_WORKERS_AI_GATEWAY?: string;
}

export interface WorkersAiClientConfig extends RetryOptions {
  ai: AiRunner;
  /** The model's Workers AI name (`@cf/…`). */
  model: string;
  maxOutputTokens?: number;
  /** Sent as `x-session-affinity`, so a thread's requests find the replica with its prefix. */
  threadId?: string;
  gatewayId?: string;
  wire?: ChatWireOptions;
}

/**
 * The binding is no HTTP endpoint: the chat client's request goes to `bindingFetch`, which
 * ignores its URL and key; these only satisfy the client's checks.
 */
const BINDING_URL = "http://workers-ai.binding";
const BINDING_KEY = "binding";

export function createWorkersAiClient(config: WorkersAiClientConfig): ModelClient {
  const { ai: _ai, threadId: _threadId, gatewayId: _gatewayId, wire: _wire, ...retry } = config;
  const client = new OpenAIChatClient({
    ...retry,
    fetch: bindingFetch(config.ai, {
      model: config.model,
      ...(config.threadId ? { sessionAffinity: config.threadId } : {}),
      ...(config.gatewayId ? { gatewayId: config.gatewayId } : {}),
    }),
    apiKey: BINDING_KEY,
    baseUrl: BINDING_URL,
    provider: "workers-ai",
    ...(config.wire ? { wire: config.wire } : {}),
  });
  return withUniqueCallIds(client);
}

/** `SPINDLE_WORKERS_AI_MODELS` as `parseConfiguredModels` reads it (entries may carry `chat`). */
export function workersAiCatalogModels(env: WorkersAiEnv): string | undefined {
  return readChatModels(env.SPINDLE_WORKERS_AI_MODELS, "SPINDLE_WORKERS_AI_MODELS").catalog;
}

/** The client of one Workers AI model of the catalog, with its entry's wire options. */
export function createWorkersAiClientFromEnv(
  env: WorkersAiEnv,
  ai: AiRunner,
  deps: Omit<WorkersAiClientConfig, "ai" | "wire" | "gatewayId">,
): ModelClient {
  const gatewayId = env.SPINDLE_WORKERS_AI_GATEWAY?.trim();
  const wire = readChatModels(
    env.SPINDLE_WORKERS_AI_MODELS,
    "SPINDLE_WORKERS_AI_MODELS",
  ).options.get(deps.model);
  return createWorkersAiClient({
    ...deps,
    ai,
    ...(gatewayId ? { gatewayId } : {}),
    ...(wire ? { wire } : {}),
  });
}
