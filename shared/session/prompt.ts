import type { ContextManager } from "../context-manager/index.ts";
import { modelVisibleItem, type Prompt } from "../protocol/index.ts";
import type { ModelPrompt } from "../providers/index.ts";
import { summarizationRequestMessage } from "./notices.ts";
import type { StepContext, TurnContext } from "./turn-context.ts";

/**
 * A prompt as the model sees it (`GET …/prompt`): its input items mapped by `modelVisibleItem`,
 * exactly as the `openai` provider maps them into its request.
 */
export function modelVisiblePrompt(prompt: ModelPrompt): Prompt {
  return { ...prompt, input: prompt.input.toArray().map(modelVisibleItem) };
}

/**
 * The exact request for one sampling step (design §5): base instructions, the normalized history
 * (`promptInput`, a copy: invariant 4) and the tools of the same StepContext capture. The items are
 * history's own frozen objects, bookkeeping included: a long thread's prompt copies no item, and
 * per-item caches (token estimates) keep working across prompts and reloads.
 */
export function buildPrompt(
  history: ContextManager,
  turn: TurnContext,
  step: StepContext,
): ModelPrompt {
  return {
    instructions: turn.baseInstructions,
    input: history.promptInput(turn.model.inputModalities),
    tools: step.tools.map((t) => ({ ...t })),
    parallel_tool_calls: turn.model.supportsParallelToolCalls,
    ...turn.request,
  };
}

/**
 * The request of a compaction task (reference §5.6): the turn's base instructions, the normalized
 * history and one extra user message asking for a summary. That message exists only in this
 * request; it is never recorded. No tools are offered, so the model can only answer in text.
 */
export function buildCompactionPrompt(history: ContextManager, turn: TurnContext): ModelPrompt {
  return {
    instructions: turn.baseInstructions,
    input: history.promptInput(turn.model.inputModalities).concat([summarizationRequestMessage()]),
    tools: [],
    parallel_tool_calls: turn.model.supportsParallelToolCalls,
    ...turn.request,
  };
}
