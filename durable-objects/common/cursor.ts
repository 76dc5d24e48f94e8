import type { ListQuery, ListResource, RpcResult } from "../../shared/api/index.ts";
import * as z from "../../shared/zod/index.ts";
import { fail } from "./results.ts";
import type { Sql, SqlValue } from "./sql.ts";

/**
 * Opaque page cursors of the tenancy lists: a small JSON value, base64url. Only the object that
 * made one reads it back; one it cannot read is an `invalid_request` for the caller.
 */
function encodeCursor(value: unknown): string {
  return btoa(JSON.stringify(value)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/** The value of `cursor` when it is one `schema` accepts, else undefined. */
export function decodeCursor<S extends z.ZodMiniType>(
  cursor: string,
  schema: S,
): z.output<S> | undefined {
  try {
    const json = atob(cursor.replaceAll("-", "+").replaceAll("_", "/"));
    const parsed = schema.safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** A page from `limit + 1` rows in order: the first `limit`, and a cursor when more follow. */
export function pageOf<R, T>(
  rows: readonly R[],
  limit: number,
  item: (row: R) => T,
  cursorOf: (last: R) => unknown,
): ListResource<T> {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    object: "list",
    data: page.map(item),
    next_cursor: rows.length > limit && last !== undefined ? encodeCursor(cursorOf(last)) : null,
  };
}

/** The answer to a cursor that this listing did not make (`why`: what else it may be). */
export function badCursor(why = "unknown cursor"): RpcResult<never> {
  return fail("invalid_request", "The cursor is not one of this listing's.", [
    { path: "cursor", message: why },
  ]);
}

/** A place in a list ordered by a text column, then the row id. */
interface KeysetPosition {
  c: string;
  i: string;
}

const KeysetCursorSchema = z.onFirstUse(() => z.object({ c: z.string(), i: z.string() }));

/**
 * One page of a keyset-paged list: `rows` reads up to `limit` rows after a position (undefined:
 * from the start), in the list's order; `position` says where a row is. Undefined for a cursor
 * this list did not make.
 */
function keysetPage<R, T>(
  query: ListQuery,
  rows: (after: KeysetPosition | undefined, limit: number) => R[],
  item: (row: R) => T,
  position: (row: R) => KeysetPosition,
): ListResource<T> | undefined {
  let after: KeysetPosition | undefined;
  if (query.cursor !== undefined) {
    after = decodeCursor(query.cursor, KeysetCursorSchema);
    if (after === undefined) return undefined;
  }
  return pageOf(rows(after, query.limit + 1), query.limit, item, position);
}

/**
 * A list of a tenant object's table in keyset pages, by a time column and then `id`: oldest
 * first, or newest first, optionally of the rows whose `scope` column holds a value. Names are
 * this module's constants (table and column names cannot be bound parameters).
 */
type PagedList =
  | {
      table: "tenant_keys" | "tenant_hooks" | "tenant_endpoints" | "tenant_mcp_servers";
      time: "created_at";
    }
  | {
      table: "tenant_hook_deliveries";
      time: "received_at";
      scope: "hook_id";
      value: string;
      newestFirst: true;
    }
  | {
      table: "tenant_webhook_deliveries";
      time: "created_at";
      scope: "endpoint_id";
      value: string;
      newestFirst: true;
    };

export function tablePage<R extends Record<string, SqlStorageValue>, T>(
  sql: Sql,
  list: PagedList,
  query: ListQuery,
  item: (row: R) => T,
): ListResource<T> | undefined {
  const order = "newestFirst" in list ? "DESC" : "ASC";
  return keysetPage(
    query,
    (after, limit) => {
      const where: string[] = [];
      const values: SqlValue[] = [];
      if ("scope" in list) {
        where.push(`${list.scope} = ?`);
        values.push(list.value);
      }
      if (after !== undefined) {
        where.push(`(${list.time}, id) ${"newestFirst" in list ? "<" : ">"} (?, ?)`);
        values.push(after.c, after.i);
      }
      const filter = where.length === 0 ? "" : ` WHERE ${where.join(" AND ")}`;
      const text = `SELECT * FROM ${list.table}${filter}
        ORDER BY ${list.time} ${order}, id ${order} LIMIT ?`;
      return sql.exec<R>(text, ...values, limit).toArray();
    },
    item,
    (row) => ({ c: String(row[list.time]), i: String(row.id) }),
  );
}
