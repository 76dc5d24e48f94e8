import type { ContentItem, ThreadConfig } from "../../../shared/protocol/index.ts";
import type { Sql } from "../storage/sql.ts";
import { splitText, TextParts } from "../storage/text-parts.ts";

/** A turn waiting for the running one (`on_busy: "queue"`). */
export interface QueuedTurn {
  turnId: string;
  content: ContentItem[];
  overrides?: ThreadConfig | undefined;
  additionalContext?: Record<string, string> | undefined;
  /** The edge request that queued it (`Trace`), for its task's log line and events. */
  requestId?: string | undefined;
}

/**
 * Turns waiting to run, in order, in SQLite: a queued turn survives an eviction (the alarm drains
 * the queue when no request comes). A turn whose JSON is longer than one value holds (its input
 * may be up to the 8 MiB turn body) is stored in parts (`TextParts`).
 */
export class TurnQueue {
  readonly #sql: Sql;
  /**
   * Queued turns, counted once per instance (undefined: not counted yet). Every turn checks the
   * queue twice, and it is nearly always empty: the count saves those queries.
   */
  #size: number | undefined;

  readonly #parts: TextParts;

  constructor(sql: Sql) {
    this.#sql = sql;
    this.#parts = new TextParts(sql, "queue");
  }

  #count(): number {
    this.#size ??= this.#sql.tables.ifExists(
      "spindle_queue",
      0,
      () => this.#sql<{ n: number }>`SELECT COUNT(*) AS n FROM spindle_queue`.one().n,
    );
    return this.#size;
  }

  push(turn: QueuedTurn): void {
    const size = this.#count();
    const parts = splitText(JSON.stringify(turn));
    // A position after every queued one (the largest + 1: positions of turns that left the
    // queue may be given again, so their parts go with them).
    const { position } = this.#sql.tables.ensuring("spindle_queue", () =>
      this.#sql<{ position: number }>`
        INSERT INTO spindle_queue (body) VALUES (${parts[0] ?? ""}) RETURNING position`.one(),
    );
    // The rest, when the turn is longer than one part: its key is the position just assigned.
    this.#parts.store(position, parts);
    this.#size = size + 1;
  }

  /** Every queued turn by position, oldest first (at most `limit`). */
  #turns(limit = -1): Map<number, QueuedTurn> {
    const turns = new Map<number, QueuedTurn>();
    const rows = this.#sql.tables.ifExists("spindle_queue", [], () =>
      this.#sql<{ position: number; body: string }>`
        SELECT position, body FROM spindle_queue ORDER BY position LIMIT ${limit}`.toArray(),
    );
    for (const row of rows) {
      turns.set(row.position, JSON.parse(this.#parts.join(row.position, row.body)) as QueuedTurn);
    }
    return turns;
  }

  #delete(position: number): void {
    // Only ever a position just read: the table exists.
    this.#sql`DELETE FROM spindle_queue WHERE position = ${position}`;
    this.#parts.remove(position);
  }

  /** The oldest queued turn, left in the queue. */
  peek(): QueuedTurn | undefined {
    if (this.#count() === 0) return undefined;
    return [...this.#turns(1).values()][0];
  }

  /** Removes and returns the oldest queued turn. */
  shift(): QueuedTurn | undefined {
    if (this.#count() === 0) return undefined;
    const [oldest] = this.#turns(1);
    if (!oldest) {
      this.#size = 0;
      return undefined;
    }
    const [position, turn] = oldest;
    this.#delete(position);
    this.#size = this.#count() - 1;
    return turn;
  }

  /** Forgets the count (the storage was wiped). */
  reset(): void {
    this.#size = undefined;
  }

  #find(turnId: string): number | undefined {
    for (const [position, turn] of this.#turns()) if (turn.turnId === turnId) return position;
    return undefined;
  }

  has(turnId: string): boolean {
    return this.#find(turnId) !== undefined;
  }

  /** Drops a queued turn; false when it is not queued. */
  remove(turnId: string): boolean {
    const position = this.#find(turnId);
    if (position === undefined) return false;
    const size = this.#count();
    this.#delete(position);
    this.#size = size - 1;
    return true;
  }
}
