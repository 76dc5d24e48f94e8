import {
  type ListResource,
  type ListTurnsRequest,
  previewText,
  type RpcResult,
  type TurnSummary,
} from "../../shared/api/index.ts";
import type { RolloutLine } from "../../shared/protocol/index.ts";
import { fail, ok } from "../common/results.ts";
import type { LiveThread } from "./live-thread.ts";
import { storedLinesBetween } from "./resources.ts";
import type { TurnRow } from "./storage/meta-store.ts";
import { decodeTolerantly, type StoredLine } from "./storage/rollout-log.ts";
import { FINISHED_TURN_STATUSES } from "./storage/turn-rows.ts";

/**
 * A page of the thread's turns, newest first. The cursor is the ordinal of the page's oldest
 * turn: the next page is the turns before it, so turns started meanwhile shift nothing.
 *
 * Times, previews and rollbacks are read from the page's own lines (one read of the seq range
 * its turns span, from just after the turn before them: the SQLite tail for recent turns, the
 * R2 segments holding them for older ones) rather than kept in the turn rows: a row is kept
 * forever and a grouped one is about 17 bytes, which two previews of up to 200 characters would
 * multiply many times over for every turn, while the inspector lists a page at a time. Rows
 * rebuilt from a rollout then list the same, as they are read from the same lines.
 */
export async function turnPage(
  live: LiveThread,
  req: ListTurnsRequest,
): Promise<RpcResult<ListResource<TurnSummary>>> {
  let before: number | undefined;
  if (req.cursor !== undefined) {
    before = parseCursor(req.cursor);
    if (before === undefined) {
      return fail("invalid_request", "The cursor is invalid.", [
        { path: "cursor", message: "unknown cursor" },
      ]);
    }
  }
  const rows = live.parts.meta.newestTurns(req.limit + 1, before);
  const page = rows.slice(0, req.limit);
  const oldest = page.at(-1);
  // The read starts after the older neighbour's last line (the extra row, else seq 1) so the
  // lines between turns, where rollbacks are, come with it: a turn then shows the same
  // rollback whichever page it is on.
  const stored = oldest
    ? await storedLinesBetween(
        live,
        (rows[req.limit]?.last_seq ?? 0) + 1,
        Math.max(...page.map((r) => r.last_seq)),
      )
    : [];
  const data = page.map((row, i) => {
    const lines = decodeTolerantly(linesIn(stored, row.first_seq, row.last_seq)).lines;
    const summary = turnSummary(live, row, lines);
    const gap = linesIn(stored, (rows[i + 1]?.last_seq ?? 0) + 1, row.first_seq - 1);
    return { ...summary, rollback_before: rollbackIn(gap, summary.created_at) };
  });
  return ok({
    object: "list",
    data,
    next_cursor: oldest && rows.length > req.limit ? makeCursor(oldest.ordinal) : null,
  });
}

/** The lines of `stored` (in seq order) in [first, last], found by binary search. */
function linesIn(stored: readonly StoredLine[], first: number, last: number): StoredLine[] {
  let low = 0;
  let high = stored.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((stored[mid]?.seq ?? 0) < first) low = mid + 1;
    else high = mid;
  }
  let end = low;
  while (end < stored.length && (stored[end]?.seq ?? 0) <= last) end += 1;
  return stored.slice(low, end);
}

/**
 * The rollbacks among the lines between two turns, as one: their turns summed, the newest time
 * (`fallbackAt`, the next turn's start, for a line without a readable one). Only lines naming the
 * event are decoded (lines are stored as `encodeRolloutLine` writes them, so the name is there
 * verbatim): the gap before the first turn holds the session's first, large lines.
 */
function rollbackIn(
  gap: readonly StoredLine[],
  fallbackAt: string,
): TurnSummary["rollback_before"] {
  let turns = 0;
  let at: string | undefined;
  let found = false;
  const candidates = gap.filter((l) => l.line.includes("thread_rolled_back"));
  for (const line of decodeTolerantly(candidates).lines) {
    if (line.type !== "event_msg" || line.payload.type !== "thread_rolled_back") continue;
    // A rollback of no turns (an imported line) changed nothing.
    if (line.payload.num_turns === 0) continue;
    found = true;
    turns += line.payload.num_turns;
    const time = isoTime(line.timestamp);
    if (time !== undefined && (at === undefined || time > at)) at = time;
  }
  return found ? { turns, at: at ?? fallbackAt } : null;
}

/** A turn's summary from its row and its decoded lines (in order). */
function turnSummary(
  live: LiveThread,
  row: TurnRow,
  lines: readonly RolloutLine[],
): Omit<TurnSummary, "rollback_before"> {
  const kind = row.kind ?? "turn";
  const first = lines[0];
  const last = lines.at(-1);
  let input: string | undefined;
  let output: string | undefined;
  for (const line of lines) {
    if (line.type !== "event_msg") continue;
    // The turn's input is its first user message (steered input comes later).
    if (line.payload.type === "user_message") input ??= line.payload.message;
    if (line.payload.type === "task_complete")
      output = line.payload.last_agent_message ?? undefined;
  }
  return {
    object: "turn.summary",
    id: row.id,
    kind,
    ...(row.trigger === undefined ? {} : { trigger: row.trigger }),
    status: row.status,
    // A turn whose lines are lost (a damaged segment) has no time of its own: the thread's.
    created_at: isoTime(first?.timestamp) ?? live.meta.created_at,
    completed_at: FINISHED_TURN_STATUSES.has(row.status)
      ? (isoTime(last?.timestamp) ?? null)
      : null,
    usage: row.usage,
    input_preview: kind === "turn" && input !== undefined ? previewText(input) : null,
    output_preview: output === undefined ? null : previewText(output),
    first_seq: row.first_seq,
    last_seq: row.last_seq,
  };
}

/** A line's timestamp as ISO-8601 in UTC (Codex and Spindle write it so; others are read as dates). */
function isoTime(timestamp: string | undefined): string | undefined {
  if (timestamp === undefined) return undefined;
  const ms = Date.parse(timestamp);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}

function makeCursor(ordinal: number): string {
  return btoa(JSON.stringify({ o: ordinal }));
}

function parseCursor(cursor: string): number | undefined {
  try {
    const value = JSON.parse(atob(cursor)) as unknown;
    if (typeof value !== "object" || value === null) return undefined;
    const { o } = value as Record<string, unknown>;
    return Number.isInteger(o) && (o as number) > 0 ? (o as number) : undefined;
  } catch {
    return undefined;
  }
}
