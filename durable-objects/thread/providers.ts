import type { Env } from "../../env.ts";
import {
  DEFAULT_MODEL_CATALOG,
  type ModelCatalog,
  type ModelInfo,
  parseConfiguredModels,
} from "../../shared/models/index.ts";
import {
  type AiRunner,
  anthropicCatalogModels,
  createAnthropicClientFromEnv,
  createOpenAIChatClientFromEnv,
  createOpenAIClientFromEnv,
  createWorkersAiClientFromEnv,
  type FetchFn,
  InputSerializer,
  LocalModelClient,
  type ModelClient,
  openAIChatCatalogModels,
  ProviderError,
  throughGateway,
  workersAiCatalogModels,
} from "../../shared/providers/index.ts";

/** What a thread's HTTP client for one model is made with (the thread shares them). */
interface HttpClientDeps {
  /** Records each answer's status (`ProviderReport`). */
  fetch: FetchFn;
  /** The catalog entry's provider-side name. */
  model: string;
  maxOutputTokens: number | undefined;
  threadId: string;
  inputSerializer: InputSerializer;
}

/**
 * A provider that speaks an HTTP wire: its models come from a `SPINDLE_…_MODELS` var, and it
 * serves turns once its key is set (its client needs it). One entry per provider.
 */
interface HttpProvider {
  name: string;
  models(env: Env): string | undefined;
  configured(env: Env): boolean;
  client(env: Env, deps: HttpClientDeps): ModelClient;
}

const HTTP_PROVIDERS: readonly HttpProvider[] = [
  {
    name: "openai",
    models: (env) => env.SPINDLE_OPENAI_MODELS,
    configured: (env) => Boolean(env.OPENAI_API_KEY?.trim()),
    client: (env, deps) => createOpenAIClientFromEnv(env, deps),
  },
  {
    name: "anthropic",
    models: (env) => anthropicCatalogModels(env),
    configured: (env) => Boolean(env.ANTHROPIC_API_KEY?.trim()),
    client: (env, deps) => createAnthropicClientFromEnv(env, deps),
  },
  {
    name: "openai-chat",
    models: (env) => openAIChatCatalogModels(env),
    configured: (env) => Boolean(env.OPENAI_CHAT_API_KEY?.trim()),
    client: (env, deps) => createOpenAIChatClientFromEnv(env, deps),
  },
];

/**
 * The catalog of a deployment: the local models plus the configured provider models, served by
 * the providers `modelClientFactory` can build a client for here.
 */
export function catalogOf(env: Env): ModelCatalog {
  return DEFAULT_MODEL_CATALOG.with([
    ...HTTP_PROVIDERS.flatMap((provider) =>
      parseConfiguredModels(provider.name, provider.models(env)),
    ),
    ...parseConfiguredModels(WORKERS_AI, workersAiCatalogModels(env)),
  ]).servedBy(configuredProviders(env));
}

/** `local` always; an HTTP provider once its key is set; `workers-ai` with the `AI` binding. */
function configuredProviders(env: Env): string[] {
  return [
    "local",
    ...HTTP_PROVIDERS.filter((p) => p.configured(env)).map((p) => p.name),
    ...(env.AI ? [WORKERS_AI] : []),
  ];
}

/** The provider of the deployment's Workers AI models, served through the `AI` binding. */
const WORKERS_AI = "workers-ai";

/**
 * What a thread's provider last answered: the provider its last client was made for, and the
 * HTTP status of the last answer it got (null before one, and for `local`, which makes no
 * request). The log line of a task reads it (`task-control.ts`). Also when the task's last model
 * request started (null before one): its prompt cache lives from then (idle compaction).
 */
export class ProviderReport {
  provider: string | null = null;
  status: number | null = null;
  requestStartedMs: number | null = null;

  /** A task starts: nothing answered for it yet. */
  reset(): void {
    this.provider = null;
    this.status = null;
    this.requestStartedMs = null;
  }
}

/**
 * Chooses the model client of a thread's turn (design §9). The thread's HTTP clients share one
 * `InputSerializer`, so each request serializes only the items the previous one lacked.
 */
export function modelClientFactory(
  env: Env,
  threadId: string,
  report: ProviderReport,
): (model: ModelInfo, provider: string) => ModelClient {
  const inputSerializer = new InputSerializer();
  return (model, provider) => {
    report.provider = provider;
    if (provider === "local")
      return new LocalModelClient({ maxOutputTokens: model.maxOutputTokens });
    const providerModel = "providerModel" in model ? String(model.providerModel) : model.slug;
    if (provider === WORKERS_AI && env.AI) {
      // The binding's overloads type each model's inputs; the provider sends any chat model's.
      return createWorkersAiClientFromEnv(env, env.AI as unknown as AiRunner, {
        model: providerModel,
        maxOutputTokens: model.maxOutputTokens,
        threadId,
      });
    }
    const http = HTTP_PROVIDERS.find((p) => p.name === provider);
    if (http) {
      return http.client(env, {
        // Bound late, so a test's or a runtime's replacement of fetch is used.
        fetch: throughGateway(async (input, init) => {
          const response = await fetch(input, init);
          report.status = response.status;
          return response;
        }, env.SPINDLE_AI_GATEWAY_TOKEN?.trim()),
        model: providerModel,
        maxOutputTokens: model.maxOutputTokens,
        threadId,
        inputSerializer,
      });
    }
    throw new ProviderError(`provider "${provider}" is not configured`);
  };
}
