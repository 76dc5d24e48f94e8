import type * as z from "zod";
import type { ListResource, RpcResult } from "../shared/api/index.ts";
import { fail } from "./results.ts";

/**
 * Opaque page cursors of the tenancy lists: a small JSON value, base64url. Only the object that
 * made one reads it back; one it cannot read is an `invalid_request` for the caller.
 */
export function encodeCursor(value: unknown): string {
  return btoa(JSON.stringify(value)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/** The value of `cursor` when it is one `schema` accepts, else undefined. */
export function decodeCursor<S extends z.ZodType>(
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
