/**
 * The `anthropic` member of a `SPINDLE_ANTHROPIC_MODELS` entry: how the model takes a request.
 * Claude models differ in the thinking they accept: older ones a token budget only, the newest
 * adaptive thinking only (reference §2.6).
 */
import * as z from "../../zod/index.ts";
import { readWireModels, type WireModels } from "../wire-models.ts";

export const AnthropicWireOptionsSchema = z.onFirstUse(() =>
  z.strictObject({
    /**
     * `budget`: `thinking: {type: "enabled", budget_tokens}`. `adaptive`: `thinking: {type:
     * "adaptive"}` with the effort in `output_config`, the only form some newest models take.
     */
    thinking: z._default(z.enum(["budget", "adaptive"]), "budget"),
    /**
     * The lifetime of the cache entries Spindle's breakpoints write: `5m` (the API's default,
     * refreshed by each read) or `1h` (writes cost twice the input price instead of 1.25×).
     */
    cache_ttl: z._default(z.enum(["5m", "1h"]), "5m"),
  }),
);

/** The cache lifetime in seconds, the model's `prompt_cache_ttl_s` unless its entry sets one. */
const TTL_SECONDS: Record<AnthropicWireOptions["cache_ttl"], number> = { "5m": 300, "1h": 3600 };
export type AnthropicWireOptions = z.output<typeof AnthropicWireOptionsSchema>;

/** `SPINDLE_ANTHROPIC_MODELS`, split into the catalog's entries and each model's options. */
export function readAnthropicModels(json: string | undefined): WireModels<AnthropicWireOptions> {
  return readWireModels(json, {
    variable: "SPINDLE_ANTHROPIC_MODELS",
    member: "anthropic",
    schema: AnthropicWireOptionsSchema,
    // Idle compaction times itself by the lifetime the breakpoints really have.
    entryOf: (entry, options) =>
      options.cache_ttl === "5m" || "prompt_cache_ttl_s" in entry
        ? entry
        : { ...entry, prompt_cache_ttl_s: TTL_SECONDS[options.cache_ttl] },
  });
}
