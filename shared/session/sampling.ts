import { effectiveContextWindow } from "../models/index.ts";
import type {
  ContentItem,
  FunctionCallItem,
  MessageItem,
  ResponseItem,
  TokenUsage,
} from "../protocol/index.ts";
import type { ModelClient, ModelPrompt } from "../providers/index.ts";
import { compactWithinTurn, contextExceedsAutoCompactLimit } from "./compaction-task.ts";
import { recordWorldStateUpdate } from "./context-updates.ts";
import { RoundNotAdmittedError } from "./errors.ts";
import { turnAbortedMessage } from "./notices.ts";
import { buildPrompt } from "./prompt.ts";
import { recordModelRequest } from "./request-lines.ts";
import {
  recordApprovalRequests,
  runServerCalls,
  splitCalls,
  usesServerTools,
  withServerTools,
} from "./server-calls.ts";
import { isAssistantMessage, messageText } from "./streaming.ts";
import { taskCompleteLine, turnAbortedLine, userMessageLine } from "./task-lines.ts";
import type { TaskScope, TurnEvent, TurnOutcome } from "./task-scope.ts";
import { timeReminderDue, timeReminderMessage } from "./time-reminder.ts";
import { captureStepContext, type StepContext, type TurnContext } from "./turn-context.ts";

/** What one model request produced: the recorded items' calls and text, or an interrupt. */
interface StepResult {
  readonly interrupted: boolean;
  readonly calls: FunctionCallItem[];
  readonly lastMessage: string | undefined;
  readonly usage: TokenUsage | undefined;
}

/**
 * The sampling loop (design §5 step 5). Each step: stop if the signal aborted; on a step after
 * the turn's first (tool outputs or queued input follow), compact first when the context passed
 * the auto-compaction limit (`compactWithinTurn`, whose capture the step then uses); else capture
 * a new StepContext and record its world-state diff (the first step uses the capture the context
 * update was built from); record queued steered input; record the current-time reminder when it
 * is due (`timeReminderDue`); build the prompt; stream and record the
 * model's finished items; `token_count`. Calls of server tools run here (`runServerCalls`) and
 * the loop goes on; client calls, and server calls held for approval, end it with
 * `requires_action`; an answer ends it with `task_complete`, unless steered input is queued,
 * which buys one more step. Each capture joins the MCP servers' tools (`withServerTools`).
 */
export async function* sampleTurn(
  scope: TaskScope,
  turn: TurnContext,
  firstStep: StepContext | undefined,
  startedAtMs: number | undefined,
  signal: AbortSignal | undefined,
  /** The warnings this turn reported already (`withServerTools`). */
  warned: Set<string> = new Set(),
): AsyncGenerator<TurnEvent, TurnOutcome> {
  const { sink, clock } = scope.deps;
  const history = scope.state.history;
  const client = scope.deps.modelClient(turn.model, turn.config.provider);
  const queue = scope.queue;
  let step = firstStep;
  for (;;) {
    if (signal?.aborted) return yield* interruptTurn(scope, turn, startedAtMs);
    if (step === undefined && contextExceedsAutoCompactLimit(scope.state, turn.model)) {
      step = yield* compactWithinTurn(scope, turn, signal);
      if (step === undefined) return yield* interruptTurn(scope, turn, startedAtMs);
      if (usesServerTools(scope, turn)) {
        step = yield* withServerTools(scope, turn, step, warned, signal);
      }
    }
    if (step === undefined) {
      step = captureStepContext(turn, clock.nowMs(), scope.state.previousTurnSettings?.model);
      if (usesServerTools(scope, turn)) {
        step = yield* withServerTools(scope, turn, step, warned, signal);
      }
      const update = recordWorldStateUpdate(history, turn, step, sink);
      for (const item of update.items) {
        yield { type: "item.completed", turn_id: turn.turnId, item, context: true };
      }
    }
    for (let content = queue.shift(); content !== undefined; content = queue.shift()) {
      const item = recordUserInput(scope, content, turn);
      yield { type: "item.completed", turn_id: turn.turnId, item, context: false };
    }

    const reminder = turn.config.current_time_reminder;
    if (
      reminder !== undefined &&
      timeReminderDue(history, reminder.reminder_interval_model_requests)
    ) {
      const item = scope.record(timeReminderMessage(clock.nowMs()), turn);
      yield { type: "item.completed", turn_id: turn.turnId, item, context: true };
    }

    const prompt = buildPrompt(history, turn, step);
    recordModelRequest(scope, prompt, turn.model, "sampling");
    const used = step;
    step = undefined;
    const result = yield* streamStep(scope, client, prompt, turn, signal);
    if (result.interrupted) return yield* interruptTurn(scope, turn, startedAtMs);

    history.updateTokenInfo(result.usage, effectiveContextWindow(turn.model));
    const info = history.tokenInfo;
    sink.append({
      type: "event_msg",
      payload: { type: "token_count", info: info ?? null, rate_limits: null },
    });
    yield { type: "token_count", turn_id: turn.turnId, info };

    if (result.calls.length > 0) {
      const split = splitCalls(scope, result.calls, used);
      if (split.run.length > 0) yield* runServerCalls(scope, turn, split.run, signal);
      if (signal?.aborted) return yield* interruptTurn(scope, turn, startedAtMs);
      const ran = new Set(split.run.map((r) => r.call.call_id));
      const waiting = result.calls.filter((c) => !ran.has(c.call_id));
      // Every call ran here: the model sees the outputs in the next step, if the quotas admit it.
      if (waiting.length === 0) {
        const admitting = scope.deps.admitRound?.();
        if (admitting !== undefined && !(await admitting)) throw new RoundNotAdmittedError();
        continue;
      }
      const approvals = split.approvals.map((a) => a.request);
      recordApprovalRequests(scope, approvals);
      const outcome: TurnOutcome = {
        status: "requires_action",
        turn_id: turn.turnId,
        pending_calls: waiting,
        ...(approvals.length > 0 ? { pending_approvals: approvals } : {}),
      };
      if (queue.length > 0) {
        const input = queue.splice(0).map((c) => [...c]);
        scope.carry(turn.turnId, input);
        outcome.queued_input = input.map((c) => [...c]);
      }
      return outcome;
    }
    if (queue.length > 0) continue;
    sink.append(taskCompleteLine(turn.turnId, result.lastMessage, clock.nowMs(), startedAtMs));
    return { status: "completed", turn_id: turn.turnId, last_agent_message: result.lastMessage };
  }
}

/** Records user input as a turn boundary message and its `user_message` event line. */
export function recordUserInput(
  scope: TaskScope,
  content: readonly ContentItem[],
  turn: TurnContext,
): ResponseItem {
  const userItem: MessageItem = { type: "message", role: "user", content: [...content] };
  const recorded = scope.record(userItem, turn);
  scope.deps.sink.append(userMessageLine(content));
  return recorded;
}

/**
 * One model request. Finished output items are recorded as they arrive; text deltas are only
 * streamed. Once the signal aborts, nothing more is recorded (no half item: providers yield only
 * finished items) and the result says `interrupted`, whether the stream threw or ended.
 */
async function* streamStep(
  scope: TaskScope,
  client: ModelClient,
  prompt: ModelPrompt,
  turn: TurnContext,
  signal: AbortSignal | undefined,
): AsyncGenerator<TurnEvent, StepResult> {
  const calls: FunctionCallItem[] = [];
  let lastMessage: string | undefined;
  let usage: TokenUsage | undefined;
  // The id of the message whose text is streaming: named in each delta and given to the message
  // when it is done, so a client can tie the deltas to the item they became.
  let streamingId: string | undefined;
  try {
    for await (const event of client.stream(prompt, signal)) {
      if (signal?.aborted) break;
      if (event.type === "output_text_delta") {
        streamingId ??= scope.withId<MessageItem>({
          type: "message",
          role: "assistant",
          content: [],
        }).id as string;
        yield {
          type: "item.delta",
          turn_id: turn.turnId,
          item_id: streamingId,
          delta: event.delta,
        };
      } else if (event.type === "output_item_done") {
        const done =
          streamingId !== undefined && event.item.type === "message"
            ? { ...event.item, id: streamingId }
            : event.item;
        if (event.item.type === "message") streamingId = undefined;
        const item = scope.record(done, turn);
        if (item.type === "function_call") calls.push(item);
        if (isAssistantMessage(item)) lastMessage = messageText(item);
        yield { type: "item.completed", turn_id: turn.turnId, item, context: false };
      } else {
        usage = event.usage;
      }
    }
  } catch (err) {
    if (!signal?.aborted) throw err;
  }
  return { interrupted: signal?.aborted === true, calls, lastMessage, usage };
}

/**
 * Ends a turn interrupted by the caller (reference §5.4 step 8): the `<turn_aborted>` user
 * fragment goes into history as a `response_item` (turn id stamped), then `event_msg
 * turn_aborted {turn_id, reason: "interrupted"}`. Items recorded before the abort stay, function
 * calls among them unanswered (`forPrompt` pairs them with `aborted`). Queued steered input that
 * had not joined yet is dropped: the user stopped the turn on purpose.
 */
async function* interruptTurn(
  scope: TaskScope,
  turn: TurnContext,
  startedAtMs: number | undefined,
): AsyncGenerator<TurnEvent, TurnOutcome> {
  scope.queue.splice(0);
  const item = scope.record(turnAbortedMessage(), turn);
  yield { type: "item.completed", turn_id: turn.turnId, item, context: true };
  const { sink, clock } = scope.deps;
  sink.append(turnAbortedLine(turn.turnId, "interrupted", clock.nowMs(), startedAtMs));
  yield { type: "turn.interrupted", turn_id: turn.turnId, kind: "turn" };
  return { status: "interrupted", turn_id: turn.turnId };
}
