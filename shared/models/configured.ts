import { ReasoningConfigSchema, VerbositySchema } from "../protocol/index.ts";
import * as z from "../zod/index.ts";
import type { ModelInfo } from "./catalog.ts";

/** A configured model's `max_output_tokens` when its entry sets none. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 32_768;
/**
 * A configured model's `prompt_cache_ttl_s` when its entry sets none: OpenAI's in-memory
 * retention lasts 5-10 minutes idle, so 5 minutes is the lifetime it guarantees.
 */
export const DEFAULT_PROMPT_CACHE_TTL_S = 300;
/** The longest cache lifetime an entry may set: a day (OpenAI's longest retention). */
export const MAX_PROMPT_CACHE_TTL_S = 86_400;

/** A model served by a remote provider, as configured by the operator (e.g. `SPINDLE_OPENAI_MODELS`). */
export const ConfiguredModelSchema = z.onFirstUse(() =>
  z.strictObject({
    slug: z.string().check(z.regex(/^[A-Za-z0-9._:-]{1,64}$/)),
    /** The provider's own model name, when it differs from the slug. */
    model: z.optional(z.string().check(z.minLength(1))),
    context_window: z.number().check(z.int(), z.positive()),
    /** The usable share of the window, in percent, that `model_context_window` records (default 95). */
    effective_context_window_percent: z.optional(z.number().check(z.int(), z.gte(1), z.lte(100))),
    /** The most tokens one request may produce (sent as `max_output_tokens`). */
    max_output_tokens: z._default(
      z.number().check(z.int(), z.positive()),
      DEFAULT_MAX_OUTPUT_TOKENS,
    ),
    input_modalities: z._default(z.array(z.enum(["text", "image"])).check(z.minLength(1)), [
      "text",
      "image",
    ]),
    parallel_tool_calls: z._default(z.boolean(), true),
    instructions: z._default(
      z.string(),
      "You are a helpful assistant working inside a hosted agent thread. Follow the developer and user instructions in the conversation.",
    ),
    /**
     * Set for a reasoning model: its default `effort` (absent: the API's own) and `summary`
     * (default `auto`; `none` sends no summary).
     */
    reasoning: z.optional(ReasoningConfigSchema),
    /** Sent as `text.verbosity` (for models that take one). */
    verbosity: z.optional(VerbositySchema),
    /** The compaction family (Codex's `comp_hash`): switching between families compacts first. */
    comp_hash: z.optional(z.string().check(z.minLength(1), z.maxLength(128))),
    /**
     * How long the provider caches a prompt prefix, in seconds from a request's start; null: no
     * known lifetime (a self-hosted server's capacity-based cache), and idle compaction is off.
     */
    prompt_cache_ttl_s: z._default(
      z.nullable(z.number().check(z.int(), z.positive(), z.lte(MAX_PROMPT_CACHE_TTL_S))),
      DEFAULT_PROMPT_CACHE_TTL_S,
    ),
  }),
);
export type ConfiguredModel = z.output<typeof ConfiguredModelSchema>;

export interface ProviderModel extends ModelInfo {
  /** The name sent to the provider. */
  providerModel: string;
}

/**
 * Parses a provider's configured models (a JSON array). Empty or absent configuration gives no
 * models; invalid configuration throws with the zod message, so a misconfigured deployment fails
 * loudly instead of silently dropping models.
 */
export function parseConfiguredModels(provider: string, json: string | undefined): ProviderModel[] {
  if (json === undefined || json.trim() === "") return [];
  const entries = z.array(ConfiguredModelSchema).parse(JSON.parse(json));
  return entries.map((e) => {
    const model: ProviderModel = {
      slug: e.slug,
      provider,
      providerModel: e.model ?? e.slug,
      instructions: e.instructions,
      contextWindowTokens: e.context_window,
      maxOutputTokens: e.max_output_tokens,
      inputModalities: e.input_modalities,
      supportsParallelToolCalls: e.parallel_tool_calls,
      personalities: {},
      promptCacheTtlS: e.prompt_cache_ttl_s,
    };
    if (e.reasoning !== undefined) {
      const { effort, summary = "auto" } = e.reasoning;
      model.reasoning = effort === undefined ? { summary } : { effort, summary };
    }
    if (e.verbosity !== undefined) model.verbosity = e.verbosity;
    if (e.comp_hash !== undefined) model.compHash = e.comp_hash;
    if (e.effective_context_window_percent !== undefined) {
      model.effectiveContextWindowPercent = e.effective_context_window_percent;
    }
    return model;
  });
}
