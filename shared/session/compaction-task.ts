import type { ModelCatalog, ModelInfo } from "../models/index.ts";
import type { ResponseItem, TokenUsage } from "../protocol/index.ts";
import {
  buildCompactedHistory,
  type CompactionTrigger,
  collectUserMessages,
  compactUserMessagesBudgetTokens,
  DEFAULT_AUTO_COMPACT_FRACTION,
  exceedsAutoCompactLimit,
} from "./compaction.ts";
import { effectiveBaseInstructions } from "./configuration.ts";
import { CompactionFailedError } from "./errors.ts";
import { buildCompactionPrompt } from "./prompt.ts";
import { isAssistantMessage, messageText, streamModel } from "./sampling.ts";
import { taskCompleteLine, taskStartedLine, turnAbortedLine } from "./task-lines.ts";
import type { CompactionOutcome, SessionState, TaskScope, TurnEvent } from "./task-scope.ts";
import { buildTurnContext, type TurnContext } from "./turn-context.ts";

/**
 * The model that should summarize before the next turn, or undefined when no compaction is
 * needed. After a switch to a model with a smaller window (a downshift), the previous model
 * summarizes: the history was built for it and may not fit the new one.
 */
export function autoCompactionModel(
  state: SessionState,
  current: ModelInfo,
  catalog: ModelCatalog,
): ModelInfo | undefined {
  const config = state.config;
  const fraction = config.auto_compact_fraction ?? DEFAULT_AUTO_COMPACT_FRACTION;
  // Codex's measure (reference §4.6): the provider's last reported total plus an estimate of
  // what was recorded since the model last answered, O(new items); the whole-history estimate
  // only until a provider has reported usage.
  const history = state.history;
  const estimate = history.tokenInfo
    ? history.getTotalTokenUsage(true)
    : history.estimateTokenCount(effectiveBaseInstructions(config, current));
  if (!exceedsAutoCompactLimit(estimate, fraction, current.contextWindowTokens)) return undefined;
  const previous = state.previousTurnSettings?.model;
  const previousModel = previous === undefined ? undefined : catalog.get(previous);
  if (
    previousModel !== undefined &&
    previousModel.contextWindowTokens > current.contextWindowTokens
  ) {
    return previousModel;
  }
  return current;
}

/**
 * A compaction task (reference §5.6), run under `turnId`: `task_started`; the summarizer is
 * asked for a summary (base instructions + `forPrompt` history + one summarization request that
 * is not recorded); history is replaced by the newest real user messages (text only, within
 * `compactUserMessagesBudgetTokens` of the thread model's window) followed by the summary message
 * (history_version + 1, baseline cleared); the reference context item is cleared so the next turn
 * re-injects the full context; then `compacted {message, replacement_history}`, a `token_count`
 * and `task_complete`. An abort ends it `interrupted` with history untouched; an empty summary
 * throws `CompactionFailedError`, history untouched.
 */
export async function* runCompaction(
  scope: TaskScope,
  trigger: CompactionTrigger,
  summarizer: ModelInfo,
  signal: AbortSignal | undefined,
  turnId: string,
): AsyncGenerator<TurnEvent, CompactionOutcome> {
  const { sink, clock } = scope.deps;
  const { config, history } = scope.state;
  const turn = buildTurnContext(turnId, config, summarizer, clock.nowMs());
  const startedAtMs = clock.nowMs();
  sink.append(taskStartedLine(turn, startedAtMs));
  yield { type: "turn.started", turn_id: turnId, kind: "compaction" };

  const provider = summarizer.slug === config.model ? config.provider : summarizer.provider;
  const client = scope.deps.modelClient(summarizer, provider);
  let summary: string | undefined;
  let usage: TokenUsage | undefined;
  const interrupted = await streamModel(
    client,
    buildCompactionPrompt(history, turn),
    signal,
    (event) => {
      if (event.type === "completed") usage = event.usage;
      else if (event.type === "output_item_done" && isAssistantMessage(event.item)) {
        summary = messageText(event.item);
      }
    },
  );
  if (interrupted) {
    sink.append(turnAbortedLine(turnId, "interrupted", clock.nowMs(), startedAtMs));
    yield { type: "turn.interrupted", turn_id: turnId, kind: "compaction" };
    return { status: "interrupted", turn_id: turnId };
  }
  if (summary === undefined || summary.trim() === "") throw new CompactionFailedError(turnId);

  // The budget follows the thread's model: the replacement must fit the model that reads it.
  const budget = compactUserMessagesBudgetTokens(scope.model(config.model).contextWindowTokens);
  const replacement: ResponseItem[] = buildCompactedHistory(
    collectUserMessages(history.items),
    summary,
    budget,
  ).map((item) => scope.withId(item));
  history.replace(replacement);
  history.referenceContextItem = undefined;
  sink.append({
    type: "compacted",
    payload: { message: summary, replacement_history: replacement },
  });

  recordCompactionUsage(scope, usage, turn);
  const info = history.tokenInfo;
  sink.append({
    type: "event_msg",
    payload: { type: "token_count", info: info ?? null, rate_limits: null },
  });
  yield { type: "token_count", turn_id: turnId, info };

  sink.append(taskCompleteLine(turnId, undefined, clock.nowMs(), startedAtMs));
  yield {
    type: "compaction.completed",
    turn_id: turnId,
    trigger,
    summary,
    replacement_history: replacement,
  };
  return { status: "completed", turn_id: turnId, summary, replacement_history: replacement };
}

/**
 * Adds the summarization request's usage to the totals, then sets the last usage to the estimate
 * of the new, shorter history: what the context holds now, not what the request cost.
 */
function recordCompactionUsage(
  scope: TaskScope,
  usage: TokenUsage | undefined,
  turn: TurnContext,
): void {
  const { config, history } = scope.state;
  const window = turn.model.contextWindowTokens;
  history.updateTokenInfo(usage, window);
  const estimate = history.estimateTokenCount(
    effectiveBaseInstructions(config, scope.model(config.model)),
  );
  const info = history.tokenInfo;
  const last = {
    input_tokens: 0,
    cached_input_tokens: 0,
    output_tokens: 0,
    reasoning_output_tokens: 0,
    total_tokens: estimate,
  };
  history.tokenInfo = {
    total_token_usage: info?.total_token_usage ?? { ...last, total_tokens: 0 },
    last_token_usage: last,
    model_context_window: info?.model_context_window ?? window,
  };
}
