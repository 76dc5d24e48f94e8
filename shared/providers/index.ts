export {
  ANTHROPIC_DEFAULT_BASE_URL,
  ANTHROPIC_DEFAULT_MAX_TOKENS,
  ANTHROPIC_VERSION,
  AnthropicClient,
  type AnthropicClientConfig,
  type AnthropicEnv,
  anthropicCatalogModels,
  createAnthropicClientFromEnv,
} from "./anthropic.ts";
export type {
  FetchFn,
  RetryOptions,
  ScheduleFn,
  SleepFn,
} from "./http/attempts.ts";
export { throughGateway } from "./http/gateway.ts";
export { LocalModelClient } from "./local.ts";
export {
  type ModelClient,
  type ModelEvent,
  type ModelPrompt,
  ProviderError,
} from "./model-client.ts";
export { InputSerializer } from "./openai/input-text.ts";
export {
  createOpenAIClientFromEnv,
  OPENAI_DEFAULT_BASE_URL,
  OPENAI_DEFAULT_MAX_ATTEMPTS,
  OPENAI_DEFAULT_MAX_RETRY_AFTER_MS,
  OPENAI_DEFAULT_TIMEOUT_MS,
  type OpenAIEnv,
  OpenAIResponsesClient,
  type OpenAIResponsesClientConfig,
} from "./openai.ts";
export {
  type ChatWireOptions,
  defaultChatWireOptions,
} from "./openai-chat/models.ts";
export {
  createOpenAIChatClientFromEnv,
  OPENAI_CHAT_DEFAULT_BASE_URL,
  OpenAIChatClient,
  type OpenAIChatClientConfig,
  type OpenAIChatEnv,
  openAIChatCatalogModels,
} from "./openai-chat.ts";
export type { AiRunner } from "./workers-ai/binding-fetch.ts";
export {
  createWorkersAiClient,
  createWorkersAiClientFromEnv,
  type WorkersAiClientConfig,
  type WorkersAiEnv,
  workersAiCatalogModels,
} from "./workers-ai.ts";
