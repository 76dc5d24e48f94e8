import type { ContentItem, ThreadConfig } from "../shared/protocol/index.ts";
import type { Sql } from "./sql.ts";

/** A turn waiting for the running one (`on_busy: "queue"`). */
export interface QueuedTurn {
  turnId: string;
  content: ContentItem[];
  overrides?: ThreadConfig | undefined;
}

/**
 * Turns waiting to run, in order, in SQLite: a queued turn survives an eviction (the alarm drains
 * the queue when no request comes).
 */
export class TurnQueue {
  readonly #sql: Sql;
  /**
   * Queued turns, counted once per instance (undefined: not counted yet). Every turn checks the
   * queue twice, and it is nearly always empty: the count saves those queries.
   */
  #size: number | undefined;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  #count(): number {
    this.#size ??= this.#sql<{ n: number }>`SELECT COUNT(*) AS n FROM spindle_queue`.one().n;
    return this.#size;
  }

  push(turn: QueuedTurn): void {
    const size = this.#count();
    this.#sql`INSERT INTO spindle_queue (body) VALUES (${JSON.stringify(turn)})`;
    this.#size = size + 1;
  }

  /** Removes and returns the oldest queued turn. */
  shift(): QueuedTurn | undefined {
    if (this.#count() === 0) return undefined;
    const row = this.#sql<{ position: number; body: string }>`
      SELECT position, body FROM spindle_queue ORDER BY position LIMIT 1`.toArray()[0];
    if (!row) {
      this.#size = 0;
      return undefined;
    }
    this.#sql`DELETE FROM spindle_queue WHERE position = ${row.position}`;
    this.#size = this.#count() - 1;
    return JSON.parse(row.body) as QueuedTurn;
  }

  /** Forgets the count (the storage was wiped). */
  reset(): void {
    this.#size = undefined;
  }

  #find(turnId: string): number | undefined {
    const rows = this.#sql<{ position: number; body: string }>`
      SELECT position, body FROM spindle_queue ORDER BY position`.toArray();
    return rows.find((r) => (JSON.parse(r.body) as QueuedTurn).turnId === turnId)?.position;
  }

  has(turnId: string): boolean {
    return this.#find(turnId) !== undefined;
  }

  /** Drops a queued turn; false when it is not queued. */
  remove(turnId: string): boolean {
    const position = this.#find(turnId);
    if (position === undefined) return false;
    const size = this.#count();
    this.#sql`DELETE FROM spindle_queue WHERE position = ${position}`;
    this.#size = size - 1;
    return true;
  }
}
