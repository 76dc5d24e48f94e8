import type { ContextManager } from "../context-manager/index.ts";
import type { KnownResponseItem, Prompt } from "../protocol/index.ts";
import { summarizationRequestMessage } from "./notices.ts";
import type { StepContext, TurnContext } from "./turn-context.ts";

/** Provider views of frozen history items, reused across prompts (a long thread copies only new items). */
const providerViews = new WeakMap<object, KnownResponseItem>();

/** Removes Spindle/Codex bookkeeping that providers do not accept. Returns a (frozen) copy. */
function providerView(item: KnownResponseItem): KnownResponseItem {
  if (!("internal_chat_message_metadata_passthrough" in item)) return item;
  const cached = providerViews.get(item);
  if (cached) return cached;
  const { internal_chat_message_metadata_passthrough: _, ...rest } = item;
  const view = Object.freeze(rest) as KnownResponseItem;
  if (Object.isFrozen(item)) providerViews.set(item, view);
  return view;
}

/**
 * The exact request for one sampling step (design §5): base instructions, the normalized history
 * (`forPrompt`, a copy: invariant 4) and the tools of the same StepContext capture.
 */
export function buildPrompt(history: ContextManager, turn: TurnContext, step: StepContext): Prompt {
  return {
    instructions: turn.baseInstructions,
    input: history.forPrompt(turn.model.inputModalities).map(providerView),
    tools: step.tools.map((t) => ({ ...t })),
    parallel_tool_calls: turn.model.supportsParallelToolCalls,
  };
}

/**
 * The request of a compaction task (reference §5.6): the turn's base instructions, the normalized
 * history and one extra user message asking for a summary. That message exists only in this
 * request; it is never recorded. No tools are offered, so the model can only answer in text.
 */
export function buildCompactionPrompt(history: ContextManager, turn: TurnContext): Prompt {
  return {
    instructions: turn.baseInstructions,
    input: [
      ...history.forPrompt(turn.model.inputModalities).map(providerView),
      summarizationRequestMessage(),
    ],
    tools: [],
    parallel_tool_calls: turn.model.supportsParallelToolCalls,
  };
}
