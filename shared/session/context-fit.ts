import { estimateItemsTokenCount, estimateTextTokenCount } from "../context-manager/index.ts";
import type { ModelInfo } from "../models/index.ts";
import type { ContentItem, MessageItem, SessionConfiguration } from "../protocol/index.ts";
import { buildWorldState } from "../world-state/index.ts";
import { effectiveBaseInstructions } from "./configuration.ts";
import { buildInitialContext } from "./context-updates.ts";
import { ContextWindowExceededError } from "./errors.ts";
import { buildTurnContext, captureStepContext } from "./turn-context.ts";

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
): void {
  const turn = buildTurnContext("fit-check", config, model, nowMs);
  const step = captureStepContext(turn, nowMs, previousModel);
  const initial = buildInitialContext(turn, buildWorldState(step.worldState));
  const userItem: MessageItem[] =
    input.length === 0 ? [] : [{ type: "message", role: "user", content: [...input] }];
  const needed =
    estimateTextTokenCount(effectiveBaseInstructions(config, model)) +
    estimateItemsTokenCount([...initial, ...userItem]);
  if (needed > model.contextWindowTokens) {
    throw new ContextWindowExceededError(needed, model.contextWindowTokens);
  }
}
