import { isProblemCode } from "../../../shared/api/index.ts";
import { isUserTurnBoundary } from "../../../shared/context/index.ts";
import { isServerToolWarningCode } from "../../../shared/mcp/index.ts";
import {
  COMPACTION_TRIGGERS,
  type ResponseItem,
  type RolloutLine,
  requestUsage,
  type TokenUsage,
} from "../../../shared/protocol/index.ts";
import { opensUntrackedTurn } from "../../../shared/rollout/index.ts";
import { addTurnUsage } from "../storage/ledger.ts";
import type { TurnRow } from "../storage/meta-store.ts";

/** What the open turn recorded so far that decides its kind. */
interface OpenTurn {
  row: TurnRow;
  /** Opened by a `task_started`; false for a turn of a rollout written before those events. */
  tracked: boolean;
  userInput: boolean;
  compacted: boolean;
}

/**
 * A compaction task compacts and takes no user input (Codex compacts inside user turns too); its
 * trigger is the one its `task_started` named.
 */
function closed(open: OpenTurn, end: Partial<TurnRow>): TurnRow {
  const compaction = open.compacted && !open.userInput;
  const { trigger, ...row } = open.row;
  return {
    ...row,
    kind: compaction ? "compaction" : "turn",
    ...(compaction && trigger !== undefined ? { trigger } : {}),
    ...end,
  };
}

function triggerOf(value: string | undefined): TurnRow["trigger"] {
  return COMPACTION_TRIGGERS.find((trigger) => trigger === value);
}

function opened(id: string, seq: number, tracked: boolean): OpenTurn {
  const row: TurnRow = {
    id,
    ordinal: seq,
    kind: "turn",
    status: "in_progress",
    first_seq: seq,
    last_seq: seq,
    pending_calls: [],
    usage: null,
    error: null,
  };
  return { row, tracked, userInput: false, compacted: false };
}

/**
 * Rebuilds the turn rows from rollout lines (import, restore from R2): a turn spans its
 * `task_started` to its `task_complete` or `turn_aborted`; one still open at the end was cut
 * short. Before the rollout's first `task_started` (Codex before 0.100 wrote none), each real
 * user message starts a turn (`opensUntrackedTurn`), id `turn_line_{seq}`, which runs to the next
 * one, a `turn_aborted` or the first `task_started`.
 */
export function turnRowsFromRollout(
  lines: readonly { seq: number; line: RolloutLine }[],
): TurnRow[] {
  const rows: TurnRow[] = [];
  let open: OpenTurn | undefined;
  let tasksStarted = false;
  let total: TokenUsage | undefined;
  for (const { seq, line } of lines) {
    if (opensUntrackedTurn(line, tasksStarted)) {
      if (open) rows.push(closed(open, { status: "completed", pending_calls: [] }));
      open = opened(`turn_line_${seq}`, seq, false);
    }
    if (line.type !== "event_msg") {
      if (open) {
        open.row.last_seq = seq;
        if (line.type === "response_item") {
          trackCalls(open.row, line.payload);
          if (isUserTurnBoundary(line.payload)) open.userInput = true;
        }
        if (line.type === "compacted") open.compacted = true;
      }
      continue;
    }
    const event = line.payload;
    if (event.type === "task_started") {
      tasksStarted = true;
      if (open) {
        // A task always ends a turn without one; a task left open was cut short.
        const status = open.tracked ? "interrupted" : "completed";
        rows.push(closed(open, { status, pending_calls: [] }));
      }
      open = opened(event.turn_id, seq, true);
      const trigger = triggerOf(event.spindle_compaction_trigger);
      if (trigger !== undefined) open.row.trigger = trigger;
    } else if (open && (event.type === "task_complete" || event.type === "turn_aborted")) {
      const error = event.type === "task_complete" ? turnErrorOf(event.error) : null;
      rows.push(
        closed(open, {
          last_seq: seq,
          status: event.type === "turn_aborted" ? "interrupted" : error ? "failed" : "completed",
          error,
          // An aborted turn waits for nothing: calls it made stay unanswered.
          ...(event.type === "turn_aborted" ? { pending_calls: [] } : {}),
        }),
      );
      const ended = rows.at(-1);
      if (ended && ended.status !== "requires_action") delete ended.pending_approvals;
      open = undefined;
    } else {
      // A request's usage is how far the running total moved, as the ledger reads it.
      if (event.type === "token_count" && event.info) {
        const usage = requestUsage(total, event.info);
        total = event.info.total_token_usage;
        if (open) open.row.usage = addTurnUsage(open.row.usage, usage);
      }
      if (open) {
        open.row.last_seq = seq;
        if (event.type === "user_message") open.userInput = true;
        if (event.type === "mcp_approval_request") {
          const { type, ...request } = event;
          open.row.pending_approvals = [
            ...(open.row.pending_approvals ?? []),
            { ...request, type },
          ];
        }
        const warning = event.type === "warning" ? turnWarningOf(event) : undefined;
        if (warning) open.row.warnings = [...(open.row.warnings ?? []), warning];
      }
    }
  }
  if (open) {
    const waiting = open.row.pending_calls.length > 0;
    const cut = open.tracked ? "interrupted" : "completed";
    rows.push(closed(open, { status: waiting ? "requires_action" : cut }));
  }
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
    const approvals = row.pending_approvals?.filter((a) => a.call_id !== item.call_id);
    if (approvals?.length) row.pending_approvals = approvals;
    else delete row.pending_approvals;
  }
}

/** A `warning` line's turn warning: one of Spindle's, with its code and server. */
function turnWarningOf(event: {
  message: string;
  code?: string | null | undefined;
  server_label?: string | null | undefined;
}): NonNullable<TurnRow["warnings"]>[number] | undefined {
  const { code, server_label, message } = event;
  if (!isServerToolWarningCode(code)) return undefined;
  return { code, server_label: server_label ?? "", message };
}
