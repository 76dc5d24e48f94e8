import type { Env } from "../../env.ts";
import {
  DEFAULT_MODEL_CATALOG,
  type ModelCatalog,
  type ModelInfo,
  parseConfiguredModels,
} from "../../shared/models/index.ts";
import {
  createOpenAIClientFromEnv,
  InputSerializer,
  LocalModelClient,
  type ModelClient,
  ProviderError,
} from "../../shared/providers/index.ts";

/**
 * The catalog of a deployment: the local models plus the configured provider models, served by
 * the providers `modelClientFactory` can build a client for here.
 */
export function catalogOf(env: Env): ModelCatalog {
  return DEFAULT_MODEL_CATALOG.with(
    parseConfiguredModels("openai", env.SPINDLE_OPENAI_MODELS),
  ).servedBy(configuredProviders(env));
}

/** `local` always; `openai` once its key is set (`createOpenAIClientFromEnv` needs it). */
function configuredProviders(env: Env): string[] {
  return env.OPENAI_API_KEY?.trim() ? ["local", "openai"] : ["local"];
}

/**
 * What a thread's provider last answered: the provider its last client was made for, and the
 * HTTP status of the last answer it got (null before one, and for `local`, which makes no
 * request). The log line of a task reads it (`task-control.ts`).
 */
export class ProviderReport {
  provider: string | null = null;
  status: number | null = null;

  /** A task starts: nothing answered for it yet. */
  reset(): void {
    this.provider = null;
    this.status = null;
  }
}

/**
 * Chooses the model client of a thread's turn (design §9). The thread's `openai` clients share
 * one `InputSerializer`, so each request serializes only the items the previous one lacked.
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
    if (provider === "openai") {
      const providerModel = "providerModel" in model ? String(model.providerModel) : model.slug;
      return createOpenAIClientFromEnv(env, {
        // Bound late, so a test's or a runtime's replacement of fetch is used.
        fetch: async (input, init) => {
          const response = await fetch(input, init);
          report.status = response.status;
          return response;
        },
        model: providerModel,
        maxOutputTokens: model.maxOutputTokens,
        threadId,
        inputSerializer,
      });
    }
    throw new ProviderError(`provider "${provider}" is not configured`);
  };
}
