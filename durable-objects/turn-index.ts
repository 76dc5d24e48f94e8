import { isProblemCode } from "../shared/api/index.ts";
import {
  type ResponseItem,
  type RolloutLine,
  requestUsage,
  type TokenUsage,
} from "../shared/protocol/index.ts";
import { addTurnUsage } from "./ledger.ts";
import type { TurnRow } from "./meta-store.ts";

/**
 * Rebuilds the turn rows from rollout lines (restore from R2): a turn spans its `task_started` to
 * its `task_complete` or `turn_aborted`; one still open at the end was cut short. A turn's usage
 * is the sum of its requests', each read from its `token_count` line as the ledger reads it.
 */
export function turnRowsFromRollout(
  lines: readonly { seq: number; line: RolloutLine }[],
): TurnRow[] {
  const rows: TurnRow[] = [];
  let open: TurnRow | undefined;
  let total: TokenUsage | undefined;
  for (const { seq, line } of lines) {
    if (line.type !== "event_msg") {
      if (open) {
        open.last_seq = seq;
        if (line.type === "response_item") trackCalls(open, line.payload);
        if (line.type === "compacted") open.kind = "compaction";
      }
      continue;
    }
    const event = line.payload;
    if (event.type === "task_started") {
      if (open) rows.push({ ...open, status: "interrupted", pending_calls: [] });
      open = {
        id: event.turn_id,
        ordinal: seq,
        kind: "turn",
        status: "in_progress",
        first_seq: seq,
        last_seq: seq,
        pending_calls: [],
        usage: null,
        error: null,
      };
    } else if (open && (event.type === "task_complete" || event.type === "turn_aborted")) {
      const error = event.type === "task_complete" ? turnErrorOf(event.error) : null;
      rows.push({
        ...open,
        last_seq: seq,
        status: event.type === "turn_aborted" ? "interrupted" : error ? "failed" : "completed",
        error,
        // An aborted turn waits for nothing: calls it made stay unanswered.
        ...(event.type === "turn_aborted" ? { pending_calls: [] } : {}),
      });
      open = undefined;
    } else {
      if (event.type === "token_count" && event.info) {
        const usage = requestUsage(total, event.info);
        total = event.info.total_token_usage;
        if (open) open.usage = addTurnUsage(open.usage, usage);
      }
      if (open) open.last_seq = seq;
    }
  }
  if (open)
    rows.push({
      ...open,
      status: open.pending_calls.length > 0 ? "requires_action" : "interrupted",
    });
  return rows;
}

/**
 * A failed turn's error as its `task_complete` line recorded it (`{code, message}`, Spindle's
 * shape); a code outside the vocabulary, or a bare message, reads as `provider_error`.
 */
function turnErrorOf(value: unknown): TurnRow["error"] {
  if (value === undefined || value === null) return null;
  if (typeof value === "object") {
    const { code, message } = value as { code?: unknown; message?: unknown };
    return {
      code: isProblemCode(code) ? code : "provider_error",
      message: typeof message === "string" ? message : JSON.stringify(value),
    };
  }
  return { code: "provider_error", message: String(value) };
}

function trackCalls(row: TurnRow, item: ResponseItem): void {
  if (item.type === "function_call") row.pending_calls = [...row.pending_calls, item];
  if (item.type === "function_call_output") {
    row.pending_calls = row.pending_calls.filter((c) => c.call_id !== item.call_id);
  }
}
