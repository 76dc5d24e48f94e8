/**
 * The model catalog (design §8): what the engine must know about a model to build its prompt.
 * The two `spindle-local*` models are served offline by the `local` provider, so model switches,
 * image stripping and compaction can be exercised without a network.
 */
import type { InputModality } from "../context-manager/index.ts";
import type { ReasoningEffort, ReasoningSummary, Verbosity } from "../protocol/index.ts";

export type { InputModality };

export interface ModelInfo {
  slug: string;
  /** The provider that serves it by default (`local`, `openai`, …). */
  provider: string;
  /** Base instructions sent in the prompt's `instructions` channel. */
  instructions: string;
  contextWindowTokens: number;
  /**
   * The share of the window that counts as usable, in percent (Codex's
   * `effective_context_window_percent`; default 95): what `model_context_window` records.
   */
  effectiveContextWindowPercent?: number;
  /**
   * The most tokens one request may produce (output, reasoning included): sent to the provider as
   * `max_output_tokens`, and what a `tokens_per_day` reservation counts for a request's output.
   */
  maxOutputTokens: number;
  inputModalities: readonly InputModality[];
  supportsParallelToolCalls: boolean;
  /** Personality name → the message rendered in `<personality_spec>`. */
  personalities: Readonly<Record<string, string>>;
  /**
   * A reasoning model's defaults; absent: the model does not reason and a request carries no
   * `reasoning` (nor asks for encrypted reasoning). A thread's `reasoning` overrides them.
   */
  reasoning?: { readonly effort?: ReasoningEffort; readonly summary: ReasoningSummary };
  /** The verbosity a request asks for (`text.verbosity`); absent: none is sent. */
  verbosity?: Verbosity;
  /**
   * The model's compaction family (Codex's `comp_hash`): a switch between two models whose
   * families differ compacts the history first, with the previous model. Absent: no family is
   * known, and no switch compacts for it.
   */
  compHash?: string;
  /**
   * How long the provider keeps a request's prompt prefix cached, in seconds, counted from the
   * request's start (`SPINDLE_…_MODELS` `prompt_cache_ttl_s`). Idle compaction fires shortly
   * before it runs out; null: the cache has no known lifetime, and idle compaction never fires.
   */
  promptCacheTtlS: number | null;
}

/**
 * The local models' cache lifetime: they cache nothing, and stand for a provider with a 5-minute
 * cache (OpenAI's in-memory retention, Anthropic's default), so idle compaction can be run offline.
 */
const LOCAL_PROMPT_CACHE_TTL_S = 300;

/** Codex's default `effective_context_window_percent`. */
export const DEFAULT_EFFECTIVE_CONTEXT_WINDOW_PERCENT = 95;

/**
 * The window as Codex records it (`model_context_window` of `task_started` and `token_count`,
 * `TurnContext::model_context_window`): the usable share of the model's window, rounded down.
 * Codex writes 258,400 for a 272,000-token window.
 */
export function effectiveContextWindow(model: ModelInfo): number {
  const percent = model.effectiveContextWindowPercent ?? DEFAULT_EFFECTIVE_CONTEXT_WINDOW_PERCENT;
  return Math.floor((model.contextWindowTokens * percent) / 100);
}

const SHARED_PERSONALITIES = {
  friendly:
    "Be warm and encouraging. Explain your reasoning in plain words and check in with the user when a choice is theirs to make.",
  pragmatic:
    "Be brief and direct. Lead with the result, skip pleasantries, and only explain what the user needs to act.",
} as const;

export const SPINDLE_LOCAL: ModelInfo = {
  slug: "spindle-local",
  provider: "local",
  instructions:
    "You are Spindle's local test model. You answer deterministically from the prompt you receive so that the behaviour of the thread runtime can be observed.",
  contextWindowTokens: 1_000_000,
  maxOutputTokens: 4_096,
  inputModalities: ["text", "image"],
  supportsParallelToolCalls: true,
  personalities: SHARED_PERSONALITIES,
  promptCacheTtlS: LOCAL_PROMPT_CACHE_TTL_S,
};

export const SPINDLE_LOCAL_LITE: ModelInfo = {
  slug: "spindle-local-lite",
  provider: "local",
  instructions:
    "You are Spindle's lightweight local test model. You read text only and keep your answers short.",
  contextWindowTokens: 16_000,
  maxOutputTokens: 1_024,
  inputModalities: ["text"],
  supportsParallelToolCalls: false,
  personalities: SHARED_PERSONALITIES,
  promptCacheTtlS: LOCAL_PROMPT_CACHE_TTL_S,
};

export const DEFAULT_MODEL_SLUG = SPINDLE_LOCAL.slug;

/**
 * A lookup of known models (unknown slugs are a client error, 400 `unknown_model`), and of the
 * providers that can serve turns here: a thread set to any other provider is refused when it is
 * configured, rather than failing every turn.
 */
export class ModelCatalog {
  readonly #models: ReadonlyMap<string, ModelInfo>;
  readonly #providers: ReadonlySet<string>;

  /** `providers` defaults to every provider the models name. */
  constructor(models: readonly ModelInfo[], providers?: readonly string[]) {
    const map = new Map<string, ModelInfo>();
    for (const m of models) {
      if (map.has(m.slug)) throw new Error(`duplicate model slug in catalog: ${m.slug}`);
      map.set(m.slug, m);
    }
    this.#models = map;
    this.#providers = new Set(providers ?? models.map((m) => m.provider));
  }

  /** Whether turns can run on `provider` here. */
  serves(provider: string): boolean {
    return this.#providers.has(provider);
  }

  /** The providers that can serve turns, in the order given. */
  providers(): string[] {
    return [...this.#providers];
  }

  /** The same models, served by exactly `providers` (those a deployment has configured). */
  servedBy(providers: readonly string[]): ModelCatalog {
    return new ModelCatalog([...this.#models.values()], providers);
  }

  get(slug: string): ModelInfo | undefined {
    return this.#models.get(slug);
  }

  slugs(): string[] {
    return [...this.#models.keys()];
  }

  /**
   * A catalog with extra entries (e.g. provider models configured from the environment), served
   * by these providers and the new models' own.
   */
  with(models: readonly ModelInfo[]): ModelCatalog {
    const providers = [...this.#providers, ...models.map((m) => m.provider)];
    return new ModelCatalog([...this.#models.values(), ...models], [...new Set(providers)]);
  }
}

export const DEFAULT_MODEL_CATALOG = new ModelCatalog([SPINDLE_LOCAL, SPINDLE_LOCAL_LITE]);
