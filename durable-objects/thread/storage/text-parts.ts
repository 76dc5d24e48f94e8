import type { Sql } from "./sql.ts";

/**
 * Durable Object SQLite limits a row to 2 MB. Local workerd does not enforce that on plain
 * inserts, but fails larger JSON parameters (`SQLITE_TOOBIG`), so a test cannot be relied on to
 * notice. Text that may be longer (rollout lines, events, queued turns, configuration, turn rows:
 * a turn body may be 8 MiB) is stored in parts of at most this many UTF-16 code units: at most 3
 * UTF-8 bytes each, 1.5 MB a part.
 */
export const TEXT_PART_MAX_CHARS = 500_000;

/** Splits text into parts, never between the two halves of a surrogate pair. */
export function splitText(text: string, max = TEXT_PART_MAX_CHARS): string[] {
  const parts: string[] = [];
  let start = 0;
  while (text.length - start > max) {
    let end = start + max;
    const code = text.charCodeAt(end);
    if (code >= 0xdc00 && code <= 0xdfff) end -= 1;
    parts.push(text.slice(start, end));
    start = end;
  }
  parts.push(text.slice(start));
  return parts;
}

/**
 * What a `spindle_parts` row continues: an event, a queued turn, a meta value, a turn row or a
 * part of the newest provider request.
 */
export type PartsKind = "event" | "queue" | "meta" | "turn" | "request";

/**
 * The overflow of values longer than one part (`spindle_parts`): the owner's row keeps the first
 * part, the rest are stored here under the owner's kind and key. Which keys have parts is read
 * once and kept in memory, so values that fit (nearly all) cost no extra statement to write or
 * read. After the storage is wiped the set may still name keys whose parts are gone: that costs
 * a query, never a wrong value.
 */
export class TextParts {
  readonly #sql: Sql;
  readonly #kind: PartsKind;
  #keys: Set<string> | undefined;

  constructor(sql: Sql, kind: PartsKind) {
    this.#sql = sql;
    this.#kind = kind;
  }

  #withParts(): Set<string> {
    this.#keys ??= new Set(
      this.#sql.tables.ifExists("spindle_parts", [], () =>
        this.#sql<{ key: string }>`
          SELECT DISTINCT key FROM spindle_parts WHERE kind = ${this.#kind}`
          .toArray()
          .map((r) => r.key),
      ),
    );
    return this.#keys;
  }

  /** Stores all but the first part of `text` for `key` (replacing any) and returns the first. */
  split(key: string | number, text: string): string {
    return this.store(key, splitText(text));
  }

  /** `split` for text its owner already split (`splitText`), to write its first part first. */
  store(key: string | number, parts: readonly string[]): string {
    const [first = "", ...rest] = parts;
    const id = String(key);
    this.remove(id);
    rest.forEach((part, i) => {
      this.#sql.tables.ensuring("spindle_parts", () => {
        this.#sql`INSERT INTO spindle_parts (kind, key, part, body)
          VALUES (${this.#kind}, ${id}, ${i + 1}, ${part})`;
      });
    });
    if (rest.length > 0) this.#withParts().add(id);
    return first;
  }

  /** The whole value of `key`, given its first part (from the owner's row). */
  join(key: string | number, first: string): string {
    const id = String(key);
    if (!this.#withParts().has(id)) return first;
    const rest = this.#sql.tables.ifExists("spindle_parts", [], () =>
      this.#sql<{ body: string }>`
        SELECT body FROM spindle_parts WHERE kind = ${this.#kind} AND key = ${id} ORDER BY part`.toArray(),
    );
    let text = first;
    for (const row of rest) text += row.body;
    return text;
  }

  /** Drops the parts of `key`, if it has any. */
  remove(key: string | number): void {
    const id = String(key);
    if (!this.#withParts().delete(id)) return;
    this.#sql.tables.ifExists("spindle_parts", undefined, () => {
      this.#sql`DELETE FROM spindle_parts WHERE kind = ${this.#kind} AND key = ${id}`;
    });
  }

  /** Drops the parts of every key `dropped` picks. */
  removeWhere(dropped: (key: string) => boolean): void {
    for (const key of [...this.#withParts()]) if (dropped(key)) this.remove(key);
  }
}
