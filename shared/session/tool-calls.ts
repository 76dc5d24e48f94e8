import type { ContextManager } from "../context-manager/index.ts";
import type { FunctionCallItem, ResponseItem } from "../protocol/index.ts";
import {
  DuplicateCallOutputError,
  MissingCallOutputsError,
  NoPendingCallsError,
  UnknownCallIdError,
} from "./errors.ts";
import type { PendingCallAnswer } from "./task-scope.ts";

/**
 * Checks the outputs a client posts for a turn paused on client tool calls. Throws, in this
 * order: `NoPendingCallsError` (no pending calls); `UnknownCallIdError` (an output for a call
 * that is not pending); `DuplicateCallOutputError`; `MissingCallOutputsError` (all pending calls
 * must be answered in one request, so a turn never samples with some of its calls still open);
 * `NoPendingCallsError` with the stale ids (the calls are not, or no longer, open calls of
 * `turnId` at the end of history: answered already, abandoned for a later turn, rolled back or
 * compacted away).
 */
export function checkToolOutputs(
  history: ContextManager,
  turnId: string,
  pendingCalls: readonly FunctionCallItem[],
  outputs: readonly Pick<PendingCallAnswer, "call_id">[],
): void {
  if (pendingCalls.length === 0) throw new NoPendingCallsError(turnId);
  const pending = new Set(pendingCalls.map((c) => c.call_id));
  const answered = new Set<string>();
  for (const output of outputs) {
    if (!pending.has(output.call_id)) throw new UnknownCallIdError(output.call_id);
    if (answered.has(output.call_id)) throw new DuplicateCallOutputError(output.call_id);
    answered.add(output.call_id);
  }
  const missing = [...pending].filter((id) => !answered.has(id));
  if (missing.length > 0) throw new MissingCallOutputsError(missing);
  const stale = stalePendingCalls(history.items, turnId, pending);
  if (stale.length > 0) throw new NoPendingCallsError(turnId, stale);
}

/**
 * Pending calls of `turnId` that history does not hold as open calls: missing, already answered,
 * stamped with another turn, or followed by an item of another turn (the thread moved on).
 */
function stalePendingCalls(
  items: readonly ResponseItem[],
  turnId: string,
  pending: ReadonlySet<string>,
): string[] {
  const callIndex = new Map<string, number>();
  const answered = new Set<string>();
  items.forEach((item, index) => {
    if (item.type === "function_call" && pending.has(item.call_id)) {
      if (turnIdOf(item) === turnId) callIndex.set(item.call_id, index);
    } else if (item.type === "function_call_output" && pending.has(item.call_id)) {
      answered.add(item.call_id);
    }
  });
  const first = Math.min(...callIndex.values());
  const movedOn = items.slice(first + 1).some((item) => {
    const owner = turnIdOf(item);
    return owner !== undefined && owner !== turnId;
  });
  return [...pending].filter((id) => movedOn || !callIndex.has(id) || answered.has(id));
}

function turnIdOf(item: ResponseItem): string | undefined {
  if (item.type === "other") return undefined;
  return item.internal_chat_message_metadata_passthrough?.turn_id || undefined;
}
