import type { RequestHead, RequestMemory, RunMark } from "../../../shared/model-requests/index.ts";
import type { MetaStore } from "./meta-store.ts";
import type { Sql } from "./sql.ts";
import { TextParts } from "./text-parts.ts";

const HEAD_KEY = "last_request";
const MARKS_KEY = "last_request_runs";

/**
 * The thread's newest provider request, for the cache report of the next one (design §14): its
 * head and run marks in `spindle_meta`, its parts (instructions, tools, each input item, as JSON)
 * in `spindle_request_parts`, a part longer than a row continued in `spindle_parts`. A request
 * rewrites only the parts that changed, so a turn writes the items it added. A restore empties
 * them all (the head goes with `spindle_meta`), and the next task rebuilds them from the rollout.
 */
export class SqliteRequestMemory implements RequestMemory {
  readonly #sql: Sql;
  readonly #meta: MetaStore;
  readonly #long: TextParts;

  constructor(sql: Sql, meta: MetaStore) {
    this.#sql = sql;
    this.#meta = meta;
    this.#long = new TextParts(sql, "request");
  }

  head(): RequestHead | null | undefined {
    return this.#meta.get<RequestHead | null>(HEAD_KEY);
  }

  parts(from: number, to: number): string[] {
    const rows = this.#sql.tables.ifExists("spindle_request_parts", [], () =>
      this.#sql<{ idx: number; body: string }>`
        SELECT idx, body FROM spindle_request_parts WHERE idx >= ${from} AND idx < ${to}
        ORDER BY idx`.toArray(),
    );
    if (rows.length !== to - from) {
      throw new Error(`the newest request's parts ${from}-${to - 1} are not all stored`);
    }
    return rows.map((row) => this.#long.join(row.idx, row.body));
  }

  marks(): RunMark[] {
    return this.#meta.get<RunMark[]>(MARKS_KEY) ?? [];
  }

  write(
    head: RequestHead | null,
    changed: ReadonlyMap<number, string>,
    marks?: readonly RunMark[],
  ): void {
    const count = head?.parts ?? 0;
    this.#sql.tables.ifExists("spindle_request_parts", undefined, () => {
      this.#sql`DELETE FROM spindle_request_parts WHERE idx >= ${count}`;
    });
    this.#long.removeWhere((key) => Number(key) >= count);
    for (const [idx, text] of changed) {
      const first = this.#long.split(idx, text);
      this.#sql.tables.ensuring("spindle_request_parts", () => {
        this.#sql`INSERT INTO spindle_request_parts (idx, body) VALUES (${idx}, ${first})
          ON CONFLICT (idx) DO UPDATE SET body = excluded.body`;
      });
    }
    this.#meta.put(HEAD_KEY, head);
    if (marks !== undefined) this.#meta.put(MARKS_KEY, marks);
  }
}
