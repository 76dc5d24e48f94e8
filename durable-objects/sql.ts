/** Values SQLite accepts as bound parameters. */
export type SqlValue = string | number | null | ArrayBuffer;

/**
 * A tagged template over `ctx.storage.sql.exec`: values are always bound as parameters, never
 * concatenated into the SQL text. Synchronous, like the storage API itself; consume the cursor
 * before any `await`.
 */
export type Sql = <T extends Record<string, SqlStorageValue>>(
  strings: TemplateStringsArray,
  ...values: SqlValue[]
) => SqlStorageCursor<T>;

export function sqlOf(storage: SqlStorage): Sql {
  return (strings, ...values) => storage.exec(strings.join("?"), ...values);
}
