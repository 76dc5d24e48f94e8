import { estimateItemsTokenCount, estimateTextTokenCount } from "../context-manager/index.ts";
import type { ModelInfo } from "../models/index.ts";
import type {
  ContentItem,
  FunctionTool,
  MessageItem,
  ResponseItem,
  SessionConfiguration,
} from "../protocol/index.ts";
import { buildWorldState } from "../world-state/index.ts";
import { effectiveBaseInstructions } from "./configuration.ts";
import { buildInitialContext } from "./context-updates.ts";
import { ContextWindowExceededError } from "./errors.ts";
import { buildTurnContext, captureStepContext } from "./turn-context.ts";

/** A turn's smallest possible prompt, estimated by part. */
export interface SmallestPrompt {
  /** The base instructions. */
  instructions: number;
  /** The full initial context and the turn's input. */
  items: number;
  /** The tools offered (the prompt's tools channel). */
  tools: readonly FunctionTool[];
}

/**
 * The smallest prompt a turn with `input` can send under `config`: the base instructions, the
 * full initial context and `input` (a compaction leaves at least these), and its tools.
 */
export function smallestPrompt(
  config: SessionConfiguration,
  model: ModelInfo,
  nowMs: number,
  previousModel: string | undefined,
  input: readonly ContentItem[] = [],
  replayed: readonly ResponseItem[] = [],
): SmallestPrompt {
  const turn = buildTurnContext("fit-check", config, model, nowMs);
  const step = captureStepContext(turn, nowMs, previousModel);
  const initial = buildInitialContext(turn, buildWorldState(step.worldState));
  const userItem: MessageItem[] =
    input.length === 0 ? [] : [{ type: "message", role: "user", content: [...input] }];
  return {
    instructions: estimateTextTokenCount(effectiveBaseInstructions(config, model)),
    items: estimateItemsTokenCount([...initial, ...replayed, ...userItem]),
    tools: step.tools,
  };
}

/**
 * Refuses (`ContextWindowExceededError`) a configuration whose smallest possible prompt cannot
 * fit its model's window: the base instructions, the full initial context and `input` (a turn's;
 * none when a thread is created). No compaction can help, since one leaves at least these; so a
 * thread is never created, nor a turn recorded, that could not run.
 */
export function assertContextFits(
  config: SessionConfiguration,
  model: ModelInfo,
  nowMs: number,
  previousModel: string | undefined,
  input: readonly ContentItem[] = [],
  replayed: readonly ResponseItem[] = [],
): void {
  const smallest = smallestPrompt(config, model, nowMs, previousModel, input, replayed);
  const needed = smallest.instructions + smallest.items;
  if (needed > model.contextWindowTokens) {
    throw new ContextWindowExceededError(needed, model.contextWindowTokens);
  }
}
