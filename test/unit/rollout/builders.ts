import type { TruncationPolicy } from "../../../shared/context-manager/index.ts";
import type {
  JsonObject,
  MessageItem,
  ResponseItem,
  RolloutLine,
  TokenUsageInfo,
  TurnContextItem,
} from "../../../shared/protocol/index.ts";

export const POLICY: TruncationPolicy = { mode: "tokens", limit: 10_000 };
export const TS = "2026-01-01T00:00:00.000Z";

export function user(text: string): MessageItem {
  return { type: "message", role: "user", content: [{ type: "input_text", text }] };
}

export function assistant(text: string): MessageItem {
  return { type: "message", role: "assistant", content: [{ type: "output_text", text }] };
}

export function developer(text: string): MessageItem {
  return { type: "message", role: "developer", content: [{ type: "input_text", text }] };
}

export const ENV_CONTEXT = "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>";

export function item(payload: ResponseItem): RolloutLine {
  return { timestamp: TS, type: "response_item", payload };
}

export function ctx(model: string, extra: Partial<TurnContextItem> = {}): TurnContextItem {
  return { cwd: "/repo", approval_policy: "never", model, summary: "auto", ...extra };
}

export function turnContext(payload: TurnContextItem): RolloutLine {
  return { timestamp: TS, type: "turn_context", payload };
}

export function taskStarted(turnId: string): RolloutLine {
  return {
    timestamp: TS,
    type: "event_msg",
    payload: { type: "task_started", turn_id: turnId, model_context_window: 272_000 },
  };
}

export function taskComplete(turnId: string): RolloutLine {
  return {
    timestamp: TS,
    type: "event_msg",
    payload: { type: "task_complete", turn_id: turnId, last_agent_message: null },
  };
}

export function turnAborted(turnId?: string): RolloutLine {
  const payload =
    turnId === undefined
      ? { type: "turn_aborted" as const, reason: "interrupted" }
      : { type: "turn_aborted" as const, turn_id: turnId, reason: "interrupted" };
  return { timestamp: TS, type: "event_msg", payload };
}

export function userMessageEvent(message: string): RolloutLine {
  return {
    timestamp: TS,
    type: "event_msg",
    payload: { type: "user_message", message, images: null, local_images: [], text_elements: [] },
  };
}

export function rollback(numTurns: number): RolloutLine {
  return {
    timestamp: TS,
    type: "event_msg",
    payload: { type: "thread_rolled_back", num_turns: numTurns },
  };
}

export function usage(total: number): TokenUsageInfo {
  const u = {
    input_tokens: total,
    cached_input_tokens: 0,
    output_tokens: 0,
    reasoning_output_tokens: 0,
    total_tokens: total,
  };
  return { total_token_usage: u, last_token_usage: u, model_context_window: 258_400 };
}

export function tokenCount(info: TokenUsageInfo | null): RolloutLine {
  return { timestamp: TS, type: "event_msg", payload: { type: "token_count", info } };
}

export function compacted(
  message: string,
  replacement?: ResponseItem[],
  windowNumber?: number,
): RolloutLine {
  const payload: { message: string; replacement_history?: ResponseItem[]; window_number?: number } =
    { message };
  if (replacement !== undefined) payload.replacement_history = replacement;
  if (windowNumber !== undefined) payload.window_number = windowNumber;
  return { timestamp: TS, type: "compacted", payload };
}

export function worldStateFull(state: JsonObject): RolloutLine {
  return { timestamp: TS, type: "world_state", payload: { full: true, state } };
}

export function worldStatePatch(state: JsonObject): RolloutLine {
  return { timestamp: TS, type: "world_state", payload: { full: false, state } };
}

/** A `world_state` line whose payload does not fit the schema, as the codec decodes it. */
export function unreadableWorldState(): RolloutLine {
  return {
    timestamp: TS,
    type: "unknown",
    original_type: "world_state",
    payload: { full: "yes", state: 42 },
  };
}

export function interAgentLine(content: string): RolloutLine {
  return {
    timestamp: TS,
    type: "unknown",
    original_type: "inter_agent_communication",
    payload: {
      author: "/root",
      recipient: "/root/worker",
      other_recipients: [],
      content,
      trigger_turn: true,
    },
  };
}

export interface TurnSpec {
  id: string;
  input: string;
  model?: string;
  /** Modern rollouts write turn_context before the user message, 0.46-era ones after. */
  contextAfterUserMessage?: boolean;
  context?: TurnContextItem;
  worldState?: RolloutLine;
  reply?: string;
  complete?: boolean;
}

/** One real user turn: task_started, turn_context, world_state?, user input, reply, complete. */
export function turn(spec: TurnSpec): RolloutLine[] {
  const context = turnContext(spec.context ?? ctx(spec.model ?? "gpt-5.4", { turn_id: spec.id }));
  const input = [item(user(spec.input)), userMessageEvent(spec.input)];
  const lines: RolloutLine[] = [taskStarted(spec.id)];
  if (spec.contextAfterUserMessage) {
    lines.push(...input, context);
  } else {
    lines.push(context, ...(spec.worldState === undefined ? [] : [spec.worldState]), ...input);
  }
  if (spec.contextAfterUserMessage && spec.worldState !== undefined) lines.push(spec.worldState);
  lines.push(item(assistant(spec.reply ?? `reply to ${spec.input}`)));
  if (spec.complete !== false) lines.push(taskComplete(spec.id));
  return lines;
}
