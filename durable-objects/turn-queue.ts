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

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  push(turn: QueuedTurn): void {
    this.#sql`INSERT INTO spindle_queue (body) VALUES (${JSON.stringify(turn)})`;
  }

  /** Removes and returns the oldest queued turn. */
  shift(): QueuedTurn | undefined {
    const row = this.#sql<{ position: number; body: string }>`
      SELECT position, body FROM spindle_queue ORDER BY position LIMIT 1`.toArray()[0];
    if (!row) return undefined;
    this.#sql`DELETE FROM spindle_queue WHERE position = ${row.position}`;
    return JSON.parse(row.body) as QueuedTurn;
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
    this.#sql`DELETE FROM spindle_queue WHERE position = ${position}`;
    return true;
  }
}
