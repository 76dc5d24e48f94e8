import * as z from "../zod/index.ts";
import { type KnownResponseItem, KnownResponseItemSchema } from "./response-item.ts";
import {
  FunctionToolSchema,
  ReasoningEffortSchema,
  ReasoningSummarySchema,
  VerbositySchema,
} from "./thread-config.ts";

/**
 * The request a provider receives (design §5, §7 `GET …/prompt`): three channels built from one
 * StepContext capture. Providers drop local bookkeeping fields of the items before sending.
 */
export const PromptSchema = z.onFirstUse(() =>
  z.object({
    instructions: z.string(),
    input: z.array(KnownResponseItemSchema),
    tools: z.array(FunctionToolSchema),
    parallel_tool_calls: z.boolean(),
    /** A reasoning model's settings: present exactly when the model reasons. */
    reasoning: z.optional(
      z.object({
        effort: z.optional(ReasoningEffortSchema),
        /** Absent when the summary is `none`. */
        summary: z.optional(z.enum(ReasoningSummarySchema.options.filter((s) => s !== "none"))),
      }),
    ),
    /** Present when the model takes a verbosity. */
    text: z.optional(z.object({ verbosity: VerbositySchema })),
  }),
);
export type Prompt = z.infer<typeof PromptSchema>;

/**
 * Fields that are bookkeeping, not model input: item ids are assigned locally (and with
 * `store: false` a provider could not resolve its own ids anyway), and the turn-id passthrough
 * is Spindle's. Codex likewise never sends item ids in a request.
 */
const BOOKKEEPING_FIELDS = new Set(["id", "internal_chat_message_metadata_passthrough"]);

/**
 * An item as the model receives it: bookkeeping fields and undefined members left out, the
 * other members in their order. The one mapping of both `GET …/prompt` and the `openai`
 * provider's request, so the preview is byte for byte what is sent.
 */
export function modelVisibleItem(item: KnownResponseItem): KnownResponseItem {
  const out: Record<string, unknown> = {};
  const record = item as Record<string, unknown>;
  // Keys rather than entries: no pair is allocated per member (every request maps every item).
  for (const key of Object.keys(record)) {
    const value = record[key];
    if (value !== undefined && !BOOKKEEPING_FIELDS.has(key)) out[key] = value;
  }
  return out as KnownResponseItem;
}
