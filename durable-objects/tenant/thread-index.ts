import type {
  ListResource,
  ListThreadsQuery,
  RpcResult,
  ThreadResource,
  ThreadSync,
} from "../../shared/api/index.ts";
import type { Clock } from "../../shared/ports/index.ts";
import * as z from "../../shared/zod/index.ts";
import { badCursor, decodeCursor, pageOf } from "../common/cursor.ts";
import { failQuota, ok } from "../common/results.ts";
import type { Sql } from "../common/sql.ts";

/**
 * How long a reservation under `max_threads` holds a place for a thread being created: far
 * longer than a create takes. One whose thread never pushed (the create failed, the instance went
 * away) stops counting after it.
 */
export const RESERVATION_MS = 60_000;

const ListCursorSchema = z.onFirstUse(() =>
  z.object({
    o: z.enum(["asc", "desc"]),
    u: z.string(),
    i: z.string(),
  }),
);

/**
 * The tenant's thread index (design §11 listing), in the `Tenant` object: one row per thread, the
 * thread's own resource as of its newest push (see `thread/tenancy/tenant-sync.ts`), plus its metadata as rows
 * for the filters. Pages are keyset pages on (`updated_at`, thread id), so a page costs the same
 * however deep it is.
 */
export class ThreadIndex {
  readonly #sql: Sql;
  readonly #clock: Clock;

  constructor(sql: Sql, clock: Clock) {
    this.#sql = sql;
    this.#clock = clock;
  }

  /**
   * Applies a push's index entry, unless a newer push was applied already. True when it
   * removed the thread (its push says it was deleted).
   */
  apply(sync: ThreadSync): boolean {
    const applied = this.#sql<{ version: number }>`
      SELECT version FROM tenant_thread_sync WHERE thread_id = ${sync.threadId}`.toArray()[0];
    if (applied && applied.version >= sync.version) return false;
    this
      .#sql`INSERT INTO tenant_thread_sync (thread_id, version) VALUES (${sync.threadId}, ${sync.version})
      ON CONFLICT (thread_id) DO UPDATE SET version = excluded.version`;
    const thread = sync.thread;
    if (thread === null) {
      this.remove(sync.threadId);
      return true;
    }
    this.#sql`INSERT INTO tenant_threads (thread_id, status, updated_at, body, reserved_until)
      VALUES (${thread.id}, ${thread.status}, ${thread.updated_at}, ${JSON.stringify(thread)}, NULL)
      ON CONFLICT (thread_id) DO UPDATE SET status = excluded.status,
        updated_at = excluded.updated_at, body = excluded.body, reserved_until = NULL`;
    this.#sql`DELETE FROM tenant_thread_metadata WHERE thread_id = ${thread.id}`;
    for (const [key, value] of Object.entries(thread.metadata)) {
      this.#sql`INSERT INTO tenant_thread_metadata (thread_id, key, value)
        VALUES (${thread.id}, ${key}, ${value})`;
    }
    return false;
  }

  /** Drops a thread from the index (its sync row stays: a late push must not bring it back). */
  remove(threadId: string): void {
    this.#sql`DELETE FROM tenant_threads WHERE thread_id = ${threadId}`;
    this.#sql`DELETE FROM tenant_thread_metadata WHERE thread_id = ${threadId}`;
  }

  /** A page of threads; `invalid_request` for a cursor of another order or not this index's. */
  list(query: ListThreadsQuery): RpcResult<ListResource<ThreadResource>> {
    const where = ["body IS NOT NULL"];
    const params: SqlStorageValue[] = [];
    if (query.status !== undefined) {
      where.push("status = ?");
      params.push(query.status);
    }
    for (const [key, value] of Object.entries(query.metadata ?? {})) {
      where.push(
        "thread_id IN (SELECT thread_id FROM tenant_thread_metadata WHERE key = ? AND value = ?)",
      );
      params.push(key, value);
    }
    const desc = query.order === "desc";
    if (query.cursor !== undefined) {
      const after = decodeCursor(query.cursor, ListCursorSchema);
      if (after === undefined || after.o !== query.order) {
        return badCursor("unknown cursor, or one made for another order");
      }
      where.push(desc ? "(updated_at, thread_id) < (?, ?)" : "(updated_at, thread_id) > (?, ?)");
      params.push(after.u, after.i);
    }
    const direction = desc ? "DESC" : "ASC";
    const rows = this.#sql
      .exec<{ thread_id: string; updated_at: string; body: string }>(
        `SELECT thread_id, updated_at, body FROM tenant_threads WHERE ${where.join(" AND ")}
         ORDER BY updated_at ${direction}, thread_id ${direction} LIMIT ?`,
        ...params,
        query.limit + 1,
      )
      .toArray();
    return ok(
      pageOf(
        rows,
        query.limit,
        (row) => JSON.parse(row.body) as ThreadResource,
        (last) => ({ o: query.order, u: last.updated_at, i: last.thread_id }),
      ),
    );
  }

  /**
   * Holds a place for `threadId` when the tenant has fewer than `max` threads (indexed ones and
   * reservations still holding). A thread already indexed needs none.
   */
  reserve(threadId: string, max: number): RpcResult<null> {
    const now = this.#clock.nowMs();
    this.#sql`DELETE FROM tenant_threads WHERE body IS NULL AND reserved_until <= ${now}`;
    const own = this.#sql<{ body: string | null }>`
      SELECT body FROM tenant_threads WHERE thread_id = ${threadId}`.toArray()[0];
    if (own?.body) return ok(null);
    const { count } = this.#sql<{ count: number }>`
      SELECT COUNT(*) AS count FROM tenant_threads WHERE thread_id != ${threadId}`.one();
    if (count >= max) {
      return failQuota("max_threads", `The tenant holds ${count} threads, its max_threads.`);
    }
    this
      .#sql`INSERT INTO tenant_threads (thread_id, reserved_until) VALUES (${threadId}, ${now + RESERVATION_MS})
      ON CONFLICT (thread_id) DO UPDATE SET reserved_until = excluded.reserved_until`;
    return ok(null);
  }

  /** Up to `limit` thread ids of the index (reservations included), for the tenant's deletion. */
  threadIds(limit: number): string[] {
    return this.#sql<{ thread_id: string }>`SELECT thread_id FROM tenant_threads LIMIT ${limit}`
      .toArray()
      .map((row) => row.thread_id);
  }
}
