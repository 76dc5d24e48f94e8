import {
  type EntryMark,
  type LedgerEntry,
  type ListResource,
  type RpcResult,
  type UsageBucket,
  type UsageGroup,
  type UsageQuery,
  withCacheHitRatio,
} from "../../shared/api/index.ts";
import * as z from "../../shared/zod/index.ts";
import { utcDay } from "../common/clock.ts";
import { badCursor, decodeCursor, pageOf } from "../common/cursor.ts";
import { ok } from "../common/results.ts";
import type { Sql } from "../common/sql.ts";

/** `GET /v1/usage` without `start` covers this many days before `end`. */
export const DEFAULT_USAGE_DAYS = 30;

const DAY_MS = 86_400_000;

/** Ledger entries in the order a thread writes them: by incarnation (its creation), then seq. */
function byMark(a: EntryMark, b: EntryMark): number {
  if (a.incarnation !== b.incarnation) return a.incarnation < b.incarnation ? -1 : 1;
  return a.seq - b.seq;
}

const COLUMN: Record<UsageGroup, string> = { day: "day", thread: "thread_id", model: "model" };
const BucketCursorSchema = z.onFirstUse(() =>
  z.object({ g: z.enum(["day", "thread", "model"]), b: z.string() }),
);

/**
 * The tenant's usage ledger (design §11), in the `Tenant` object: the entries its threads push,
 * added into one row per (UTC day, thread, model), and each day's input + output tokens for
 * `tokens_per_day`. Each thread's newest entry id taken is kept, so an entry pushed twice (a push
 * whose answer was lost) is added once. The thread derived each entry from a `token_count` line
 * in the step that wrote the line, so the sums here are the sums of the turns' usage.
 */
export class UsageRollup {
  readonly #sql: Sql;
  readonly #counted: (threadId: string, tokens: number) => void;

  /** `counted` hears the input + output tokens of the entries each `apply` takes. */
  constructor(sql: Sql, counted: (threadId: string, tokens: number) => void = () => {}) {
    this.#sql = sql;
    this.#counted = counted;
  }

  /**
   * Adds the entries not taken yet (those after the newest one taken, by incarnation, then seq);
   * answers the newest one taken for the thread.
   */
  apply(threadId: string, entries: readonly LedgerEntry[]): EntryMark | null {
    let through = this.#taken(threadId);
    let taken = false;
    let tokens = 0;
    for (const e of this.#notTaken(through, entries)) {
      tokens += e.input_tokens + e.output_tokens;
      const turns = e.first_of_turn ? 1 : 0;
      this.#sql`INSERT INTO tenant_usage (day, thread_id, model, input_tokens, cached_input_tokens,
          output_tokens, reasoning_tokens, requests, turns)
        VALUES (${e.day}, ${threadId}, ${e.model}, ${e.input_tokens}, ${e.cached_input_tokens},
          ${e.output_tokens}, ${e.reasoning_tokens}, 1, ${turns})
        ON CONFLICT (day, thread_id, model) DO UPDATE SET
          input_tokens = input_tokens + excluded.input_tokens,
          cached_input_tokens = cached_input_tokens + excluded.cached_input_tokens,
          output_tokens = output_tokens + excluded.output_tokens,
          reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
          requests = requests + 1, turns = turns + excluded.turns`;
      this
        .#sql`INSERT INTO tenant_daily_tokens (day, tokens) VALUES (${e.day}, ${e.input_tokens + e.output_tokens})
        ON CONFLICT (day) DO UPDATE SET tokens = tokens + excluded.tokens`;
      through = { incarnation: e.incarnation, seq: e.seq };
      taken = true;
    }
    // Nothing new, nothing written: an admission with no entries only reads.
    if (taken && through !== null) {
      this.#sql`INSERT INTO tenant_thread_sync (thread_id, usage_incarnation, usage_seq)
        VALUES (${threadId}, ${through.incarnation}, ${through.seq})
        ON CONFLICT (thread_id) DO UPDATE SET usage_incarnation = excluded.usage_incarnation,
          usage_seq = excluded.usage_seq`;
      this.#counted(threadId, tokens);
    }
    return through;
  }

  /** The newest entry taken for the thread. */
  #taken(threadId: string): EntryMark | null {
    const row = this.#sql<{ usage_incarnation: string; usage_seq: number }>`
      SELECT usage_incarnation, usage_seq FROM tenant_thread_sync
      WHERE thread_id = ${threadId}`.toArray()[0];
    return row && row.usage_incarnation !== ""
      ? { incarnation: row.usage_incarnation, seq: row.usage_seq }
      : null;
  }

  /** `entries` after `through`, in order. */
  #notTaken(through: EntryMark | null, entries: readonly LedgerEntry[]): LedgerEntry[] {
    return [...entries].sort(byMark).filter((e) => through === null || byMark(e, through) > 0);
  }

  /** Input + output tokens the tenant used on `day`. */
  tokensOn(day: string): number {
    const row = this.#sql<{ tokens: number }>`
      SELECT tokens FROM tenant_daily_tokens WHERE day = ${day}`.toArray()[0];
    return row?.tokens ?? 0;
  }

  /** `GET /v1/usage`, buckets in order of their key; `nowMs` sets the default range. */
  query(query: UsageQuery, nowMs: number): RpcResult<ListResource<UsageBucket>> {
    const end = query.end ?? utcDay(nowMs + DAY_MS);
    const start = query.start ?? utcDay(Date.parse(end) - DEFAULT_USAGE_DAYS * DAY_MS);
    const column = COLUMN[query.group_by];
    const params: SqlStorageValue[] = [start, end];
    let after = "";
    if (query.cursor !== undefined) {
      const cursor = decodeCursor(query.cursor, BucketCursorSchema);
      if (cursor === undefined || cursor.g !== query.group_by) {
        return badCursor("unknown cursor, or one made for another group_by");
      }
      after = ` AND ${column} > ?`;
      params.push(cursor.b);
    }
    const rows = this.#sql
      .exec<Omit<UsageBucket, "object">>(
        `SELECT ${column} AS bucket, SUM(input_tokens) AS input_tokens,
           SUM(cached_input_tokens) AS cached_input_tokens, SUM(output_tokens) AS output_tokens,
           SUM(reasoning_tokens) AS reasoning_tokens, SUM(requests) AS requests,
           SUM(turns) AS turns
         FROM tenant_usage WHERE day >= ? AND day < ?${after}
         GROUP BY ${column} ORDER BY ${column} LIMIT ?`,
        ...params,
        query.limit + 1,
      )
      .toArray();
    return ok(
      pageOf(
        rows,
        query.limit,
        (row): UsageBucket => withCacheHitRatio({ object: "usage_bucket", ...row }),
        (last) => ({ g: query.group_by, b: last.bucket }),
      ),
    );
  }
}
