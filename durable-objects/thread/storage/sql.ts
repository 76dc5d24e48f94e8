import { type Sql as CommonSql, sqlOf as commonSqlOf } from "../../common/sql.ts";
import { type Tables, tablesOf } from "./schema.ts";

export type { SqlValue } from "../../common/sql.ts";

/** The thread's SQL: the common tagged template, and which of its lazily created tables exist. */
export interface Sql extends CommonSql {
  readonly tables: Tables;
}

export function sqlOf(storage: SqlStorage): Sql {
  return Object.assign(commonSqlOf(storage), { tables: tablesOf(storage) });
}
