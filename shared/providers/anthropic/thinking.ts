/**
 * Anthropic thinking blocks kept as Spindle `reasoning` items (reference §2.6, §2.10). A block
 * must go back to the API unchanged, signature and all, so the whole block is recorded, with
 * the model that produced it, in the item's `encrypted_content` (a JSON object no OpenAI
 * payload looks like); the thinking text is also the item's `content`, for readers of history.
 * `encrypted_content` alone is enough to replay it: a client that re-adds the item through the
 * API keeps only that field.
 */
import type { ReasoningItem } from "../../protocol/index.ts";
import * as z from "../../zod/index.ts";

/** A thinking block as the API sends it and wants it back. */
export type ThinkingBlock =
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "redacted_thinking"; data: string };

const RecordedThinkingSchema = z.onFirstUse(() =>
  z.object({
    anthropic_model: z.string(),
    block: z.discriminatedUnion("type", [
      z.object({ type: z.literal("thinking"), thinking: z.string(), signature: z.string() }),
      z.object({ type: z.literal("redacted_thinking"), data: z.string() }),
    ]),
  }),
);

/** Every recorded block starts so; other providers' encrypted content never does. */
const PREFIX = '{"anthropic_model":';

/** Whether `item` records an Anthropic thinking block (which only Anthropic can read back). */
export function isRecordedThinking(item: ReasoningItem): boolean {
  return typeof item.encrypted_content === "string" && item.encrypted_content.startsWith(PREFIX);
}

/** The reasoning item recording `block`, produced by `model`. */
export function reasoningItemOf(block: ThinkingBlock, model: string): ReasoningItem {
  const encrypted_content = JSON.stringify({ anthropic_model: model, block });
  if (block.type === "redacted_thinking")
    return { type: "reasoning", summary: [], encrypted_content };
  return {
    type: "reasoning",
    summary: [],
    content: [{ type: "reasoning_text", text: block.thinking }],
    encrypted_content,
  };
}

/**
 * The block `item` recorded, when `model` produced it. Reasoning of other models or providers
 * is dropped: the API could not verify its signature (newer models drop such blocks anyway).
 */
export function thinkingBlockOf(item: ReasoningItem, model: string): ThinkingBlock | undefined {
  if (!isRecordedThinking(item)) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(item.encrypted_content as string);
  } catch {
    return undefined;
  }
  const parsed = RecordedThinkingSchema.safeParse(json);
  if (!parsed.success || parsed.data.anthropic_model !== model) return undefined;
  return parsed.data.block;
}
