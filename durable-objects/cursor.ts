import type { z } from "zod";

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
