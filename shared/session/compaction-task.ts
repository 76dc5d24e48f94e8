import { effectiveContextWindow, type ModelCatalog, type ModelInfo } from "../models/index.ts";
import type { ResponseItem, TokenUsage } from "../protocol/index.ts";
import { buildWorldState } from "../world-state/index.ts";
import {
  buildCompactedHistory,
  type CompactionTrigger,
  collectUserMessages,
  compactUserMessagesBudgetTokens,
  DEFAULT_AUTO_COMPACT_FRACTION,
  exceedsAutoCompactLimit,
  withContextBeforeLastRealUser,
} from "./compaction.ts";
import { effectiveBaseInstructions } from "./configuration.ts";
import { buildInitialContext } from "./context-updates.ts";
import { CompactionFailedError } from "./errors.ts";
import { buildCompactionPrompt } from "./prompt.ts";
import { recordModelRequest } from "./request-lines.ts";
import { isAssistantMessage, messageText, streamModel } from "./streaming.ts";
import { taskCompleteLine, taskStartedLine, turnAbortedLine } from "./task-lines.ts";
import type { CompactionOutcome, SessionState, TaskScope, TurnEvent } from "./task-scope.ts";
import {
  buildTurnContext,
  captureStepContext,
  type StepContext,
  type TurnContext,
  toTurnContextItem,
} from "./turn-context.ts";

/**
 * The tokens the context holds, measured as Codex does (reference §4.6): the provider's last
 * reported total plus an estimate of what was recorded since the model last answered, O(new
 * items); the whole-history estimate (with `model`'s base instructions) only until a provider
 * has reported usage.
 */
export function contextTokens(state: SessionState, model: ModelInfo): number {
  const { config, history } = state;
  return history.tokenInfo
    ? history.getTotalTokenUsage(true)
    : history.estimateTokenCount(effectiveBaseInstructions(config, model));
}

/** Whether `tokens` of context are above `auto_compact_fraction` × `model`'s window. */
export function exceedsAutoCompactLimitOf(
  state: SessionState,
  model: ModelInfo,
  tokens: number,
): boolean {
  const fraction = state.config.auto_compact_fraction ?? DEFAULT_AUTO_COMPACT_FRACTION;
  return exceedsAutoCompactLimit(tokens, fraction, model.contextWindowTokens);
}

/** Whether the context (`contextTokens`) is above `auto_compact_fraction` × `model`'s window. */
export function contextExceedsAutoCompactLimit(state: SessionState, model: ModelInfo): boolean {
  return exceedsAutoCompactLimitOf(state, model, contextTokens(state, model));
}

/**
 * The model that summarizes before a turn on `current`: after a switch to a model with a smaller
 * window (a downshift), the previous model, for which the history was built and which it may not
 * fit; else `current`.
 */
export function summarizerFor(
  state: SessionState,
  current: ModelInfo,
  catalog: ModelCatalog,
): ModelInfo {
  const previous = state.previousTurnSettings?.model;
  const previousModel = previous === undefined ? undefined : catalog.get(previous);
  return previousModel !== undefined &&
    previousModel.contextWindowTokens > current.contextWindowTokens
    ? previousModel
    : current;
}

/**
 * Codex's `comp_hash_changed`: the previous turn's model and `current` both name a compaction
 * family, and they differ. A missing family is not enough to compact.
 */
export function compactionFamilyChanged(state: SessionState, current: ModelInfo): boolean {
  const previous = state.previousTurnSettings?.comp_hash;
  return previous !== undefined && current.compHash !== undefined && previous !== current.compHash;
}

/**
 * The model that should summarize before the next turn, or undefined when none is needed: after
 * a switch across compaction families, the previous model (the history is in its family; the
 * current one when the catalog no longer has it), as Codex compacts for `comp_hash_changed`;
 * else, when the context passed the limit, `summarizerFor`.
 */
export function autoCompactionModel(
  state: SessionState,
  current: ModelInfo,
  catalog: ModelCatalog,
): ModelInfo | undefined {
  if (compactionFamilyChanged(state, current)) {
    const previous = state.previousTurnSettings?.model;
    return (previous === undefined ? undefined : catalog.get(previous)) ?? current;
  }
  if (!contextExceedsAutoCompactLimit(state, current)) return undefined;
  return summarizerFor(state, current, catalog);
}

/** What a compaction did to history, or that it was interrupted (history untouched). */
type Compacted =
  | { interrupted: true }
  | {
      interrupted: false;
      summary: string;
      replacement: ResponseItem[];
      /** The capture the re-injected context was built from, when there was one. */
      step?: StepContext;
    };

/**
 * The part every compaction shares (reference §5.6): `summarizer` is asked for a summary (base
 * instructions + `forPrompt` history + one summarization request that is not recorded); history
 * is replaced by the newest real user messages (text only, within
 * `compactUserMessagesBudgetTokens` of the thread model's window) and the summary message
 * (history_version + 1, baseline cleared), and `compacted {message, replacement_history}` is
 * written; then a `token_count`.
 *
 * `injectFor` is Codex's `InitialContextInjection`. Undefined (a manual compaction): no context
 * is kept and the reference context item is cleared, so the next turn re-injects the full
 * context after the summary. A turn (an automatic compaction): that turn's full initial context,
 * captured once the summary is in, goes right above the last real user message
 * (`withContextBeforeLastRealUser`), so the summary stays the last item; the `compacted` line is
 * followed by a full `world_state` and that turn's `turn_context`, which become the baseline and
 * the reference: what comes next is a diff, as after any turn's context update.
 *
 * An abort means `interrupted`, history untouched; an empty summary throws
 * `CompactionFailedError`, history untouched.
 */
async function* compactHistory(
  scope: TaskScope,
  summarizer: TurnContext,
  provider: string,
  signal: AbortSignal | undefined,
  injectFor: TurnContext | undefined,
): AsyncGenerator<TurnEvent, Compacted> {
  const { sink, clock } = scope.deps;
  const { config, history } = scope.state;
  const previousModel = scope.state.previousTurnSettings?.model;
  const client = scope.deps.modelClient(summarizer.model, provider);
  let summary: string | undefined;
  let usage: TokenUsage | undefined;
  const prompt = buildCompactionPrompt(history, summarizer);
  // A request an abort stops before it is sent is not recorded (`streamModel` sends none).
  if (signal?.aborted !== true) recordModelRequest(scope, prompt, summarizer.model, "compaction");
  const interrupted = await streamModel(client, prompt, signal, (event) => {
    if (event.type === "completed") usage = event.usage;
    else if (event.type === "output_item_done" && isAssistantMessage(event.item)) {
      summary = messageText(event.item);
    }
  });
  if (interrupted) return { interrupted: true };
  if (summary === undefined || summary.trim() === "") {
    throw new CompactionFailedError(summarizer.turnId);
  }

  // The budget follows the thread's model: the replacement must fit the model that reads it.
  const budget = compactUserMessagesBudgetTokens(scope.model(config.model).contextWindowTokens);
  const kept: ResponseItem[] = buildCompactedHistory(
    collectUserMessages(history.items),
    summary,
    budget,
  ).map((item) => scope.withId(item));
  const injected =
    injectFor === undefined
      ? undefined
      : injectedContext(injectFor, captureStepContext(injectFor, clock.nowMs(), previousModel));
  const replacement =
    injected === undefined ? kept : withContextBeforeLastRealUser(kept, injected.items);
  history.replace(replacement);
  sink.append({
    type: "compacted",
    payload: { message: summary, replacement_history: replacement },
  });
  if (injected === undefined) {
    history.referenceContextItem = undefined;
  } else {
    sink.append({ type: "world_state", payload: { full: true, state: injected.snapshot } });
    sink.append({ type: "turn_context", payload: injected.turnContextItem });
    history.worldStateBaseline = injected.snapshot;
    history.referenceContextItem = injected.turnContextItem;
  }

  recordCompactionUsage(scope, usage, summarizer);
  const info = history.tokenInfo;
  sink.append({
    type: "event_msg",
    payload: { type: "token_count", info: info ?? null, rate_limits: null },
  });
  yield { type: "token_count", turn_id: summarizer.turnId, info };
  return {
    interrupted: false,
    summary,
    replacement,
    ...(injected === undefined ? {} : { step: injected.step }),
  };
}

/** A turn's full initial context with the snapshot and `turn_context` that describe it. */
function injectedContext(turn: TurnContext, step: StepContext) {
  const worldState = buildWorldState(step.worldState);
  return {
    step,
    items: buildInitialContext(turn, worldState),
    snapshot: worldState.snapshot(),
    turnContextItem: toTurnContextItem(turn),
  };
}

/**
 * A compaction task (reference §5.6), run under `turnId`: `task_started`, `compactHistory`,
 * `task_complete` (or `turn_aborted` when interrupted). A `manual` or `idle` one keeps no context; an
 * `auto` one, run right before a user turn, re-injects the context that turn would send, built
 * from the thread's configuration and model under the task's own turn id.
 */
export async function* runCompaction(
  scope: TaskScope,
  trigger: CompactionTrigger,
  summarizer: ModelInfo,
  signal: AbortSignal | undefined,
  turnId: string,
): AsyncGenerator<TurnEvent, CompactionOutcome> {
  const { sink, clock } = scope.deps;
  const { config } = scope.state;
  const turn = buildTurnContext(turnId, config, summarizer, clock.nowMs());
  const startedAtMs = clock.nowMs();
  sink.append(taskStartedLine(turn, startedAtMs, trigger));
  yield { type: "turn.started", turn_id: turnId, kind: "compaction", trigger };

  const provider = summarizer.slug === config.model ? config.provider : summarizer.provider;
  const injectFor =
    trigger === "auto"
      ? buildTurnContext(turnId, config, scope.model(config.model), clock.nowMs())
      : undefined;
  const result = yield* compactHistory(scope, turn, provider, signal, injectFor);
  if (result.interrupted) {
    sink.append(turnAbortedLine(turnId, "interrupted", clock.nowMs(), startedAtMs));
    yield { type: "turn.interrupted", turn_id: turnId, kind: "compaction" };
    return { status: "interrupted", turn_id: turnId };
  }
  const { summary, replacement } = result;
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
 * A compaction between two sampling steps of `turn` (Codex's mid-turn compaction), when the
 * context passed the limit before a step that follows tool outputs or queued input. It is part of
 * the turn (no task lines of its own); `turn`'s model summarizes and its context is re-injected
 * above the last real user message. Returns the StepContext the context was built from (the next
 * step samples with it), or undefined when interrupted.
 */
export async function* compactWithinTurn(
  scope: TaskScope,
  turn: TurnContext,
  signal: AbortSignal | undefined,
): AsyncGenerator<TurnEvent, StepContext | undefined> {
  const result = yield* compactHistory(scope, turn, turn.config.provider, signal, turn);
  if (result.interrupted) return undefined;
  yield {
    type: "compaction.completed",
    turn_id: turn.turnId,
    trigger: "auto",
    summary: result.summary,
    replacement_history: result.replacement,
  };
  return result.step;
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
  const window = effectiveContextWindow(turn.model);
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
