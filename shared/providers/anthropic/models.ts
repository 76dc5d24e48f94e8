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
  }),
);
export type AnthropicWireOptions = z.output<typeof AnthropicWireOptionsSchema>;

/** `SPINDLE_ANTHROPIC_MODELS`, split into the catalog's entries and each model's options. */
export function readAnthropicModels(json: string | undefined): WireModels<AnthropicWireOptions> {
  return readWireModels(json, {
    variable: "SPINDLE_ANTHROPIC_MODELS",
    member: "anthropic",
    schema: AnthropicWireOptionsSchema,
  });
}
