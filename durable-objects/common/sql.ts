/** Values SQLite accepts as bound parameters. */
export type SqlValue = string | number | null | ArrayBuffer;

/**
 * A tagged template over `ctx.storage.sql.exec`: values are always bound as parameters, never
 * concatenated into the SQL text. Synchronous, like the storage API itself; consume the cursor
 * before any `await`. `exec` takes a text built
 * at run time (a filter of several parts, names from the module's constants), its values still
 * bound at its `?`s.
 */
export interface Sql {
  <T extends Record<string, SqlStorageValue>>(
    strings: TemplateStringsArray,
    ...values: SqlValue[]
  ): SqlStorageCursor<T>;
  exec<T extends Record<string, SqlStorageValue>>(
    text: string,
    ...values: SqlValue[]
  ): SqlStorageCursor<T>;
}

export function sqlOf(storage: SqlStorage): Sql {
  const sql = <T extends Record<string, SqlStorageValue>>(
    strings: TemplateStringsArray,
    ...values: SqlValue[]
  ) => storage.exec<T>(strings.join("?"), ...values);
  const exec = <T extends Record<string, SqlStorageValue>>(text: string, ...values: SqlValue[]) =>
    storage.exec<T>(text, ...values);
  return Object.assign(sql, { exec });
}
