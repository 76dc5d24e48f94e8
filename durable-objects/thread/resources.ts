import {
  type ListHistoryRequest,
  type ListResource,
  type RpcResult,
  type ThreadResource,
  type ThreadStatus,
  type TurnResource,
  withCacheHitRatio,
} from "../../shared/api/index.ts";
import type { ResponseItem, RolloutLine } from "../../shared/protocol/index.ts";
import { fail, ok } from "../common/results.ts";
import type { LiveThread } from "./live-thread.ts";
import type { TurnRow } from "./storage/meta-store.ts";
import { decodeTolerantly, firstMissingSeq, type StoredLine } from "./storage/rollout-log.ts";

/** The Thread resource; `running` when a task runs now (a paused turn is `requires_action`). */
export function threadResource(live: LiveThread, running: boolean): ThreadResource {
  const meta = live.meta;
  const last = live.parts.meta.lastTurn();
  const status: ThreadStatus = running
    ? "running"
    : last?.status === "requires_action"
      ? "requires_action"
      : "idle";
  return {
    object: "thread",
    id: meta.id,
    status,
    config: live.session.state.config,
    turn_count: meta.turn_count,
    ...(last === undefined ? {} : { last_turn_id: last.id }),
    token_usage: live.session.history.tokenInfo ?? null,
    usage: withCacheHitRatio(live.ledger.totals()),
    metadata: meta.metadata ?? {},
    created_at: meta.created_at,
    updated_at: meta.updated_at,
    forked_from: meta.forked_from,
    imported_from: meta.imported_from ?? null,
    warnings: meta.warnings,
  };
}

/** A turn's resource; its items are read back from its lines unless given. */
export async function turnResource(
  live: LiveThread,
  row: TurnRow,
  items?: ResponseItem[],
): Promise<TurnResource> {
  const recorded =
    items ??
    (await linesBetween(live, row.first_seq, row.last_seq)).flatMap((l) =>
      l.type === "response_item" ? [l.payload] : [],
    );
  return {
    object: "turn",
    id: row.id,
    thread_id: live.meta.id,
    kind: row.kind ?? "turn",
    status: row.status,
    items: recorded,
    pending_calls: row.pending_calls,
    ...(row.pending_approvals?.length ? { pending_approvals: row.pending_approvals } : {}),
    ...(row.warnings?.length ? { warnings: row.warnings } : {}),
    ...(row.trigger === undefined ? {} : { trigger: row.trigger }),
    usage: row.usage,
    error: row.error,
  };
}

/** A queued turn: accepted, nothing recorded yet. */
export function queuedTurnResource(threadId: string, turnId: string): TurnResource {
  return {
    object: "turn",
    id: turnId,
    thread_id: threadId,
    kind: "turn",
    status: "in_progress",
    items: [],
    pending_calls: [],
    usage: null,
    error: null,
  };
}

async function linesBetween(live: LiveThread, first: number, last: number): Promise<RolloutLine[]> {
  return decodeTolerantly(await storedLinesBetween(live, first, last)).lines;
}

/**
 * The stored lines in [first, last], in seq order: from SQLite when it still has them, else from
 * the R2 segments that hold them (SQLite read first: a line leaves it only once it is in R2).
 */
export async function storedLinesBetween(
  live: LiveThread,
  first: number,
  last: number,
): Promise<StoredLine[]> {
  if (last < first) return [];
  const local = live.log.rawAfter(first - 1, last - first + 1);
  // Not a seq range check: a fork's SQLite holds its first line and none it borrows.
  if (firstMissingSeq(local, first - 1, Math.min(last, live.log.lastSeq)) === undefined) {
    return local;
  }
  const bySeq = new Map((await live.segments.readLines(first, last)).map((l) => [l.seq, l]));
  for (const line of local) bySeq.set(line.seq, line);
  return [...bySeq.values()].sort((a, b) => a.seq - b.seq);
}

/**
 * A page of live history. The cursor holds the index to go on from and the count of history
 * rewrites (compactions, rollbacks) it was made under: valid across reloads until the next
 * rewrite. A page reads only the stored runs of history it falls in (a cold start reads none).
 */
export function historyPage(
  live: LiveThread,
  req: ListHistoryRequest,
): RpcResult<ListResource<ResponseItem>> {
  const history = live.session.history;
  let start = 0;
  if (req.cursor !== undefined) {
    const parsed = parseCursor(req.cursor);
    if (!parsed || parsed.v !== live.rewrites || parsed.i > history.length) {
      return fail("invalid_request", "The cursor is invalid or the history was rewritten since.", [
        { path: "cursor", message: "unknown or expired cursor" },
      ]);
    }
    start = parsed.i;
  }
  const end = Math.min(start + req.limit, history.length);
  return ok({
    object: "list",
    data: history.slice(start, end),
    next_cursor: end < history.length ? makeCursor(live.rewrites, end) : null,
  });
}

function makeCursor(rewrites: number, index: number): string {
  return btoa(JSON.stringify({ v: rewrites, i: index }));
}

function parseCursor(cursor: string): { v: number; i: number } | undefined {
  try {
    const value = JSON.parse(atob(cursor)) as unknown;
    if (typeof value !== "object" || value === null) return undefined;
    const { v, i } = value as Record<string, unknown>;
    return Number.isInteger(v) && Number.isInteger(i) && (i as number) >= 0
      ? { v: v as number, i: i as number }
      : undefined;
  } catch {
    return undefined;
  }
}
