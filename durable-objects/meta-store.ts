import type { ContentItem, SessionConfiguration } from "../shared/protocol/index.ts";
import type { TurnResource, Warning } from "../worker/schemas.ts";
import type { Sql } from "./sql.ts";

/** The thread's identity and counters (one JSON row; tiny). */
export interface ThreadMeta {
  tenant: string;
  id: string;
  created_at: string;
  updated_at: string;
  forked_from: string | null;
  turn_count: number;
  warnings: Warning[];
}

/** A turn's row: its resource minus the items, which are read back from the rollout by seq range. */
export interface TurnRow {
  id: string;
  ordinal: number;
  /** A user turn, or a compaction (manual or automatic). Absent in rows written before kinds. */
  kind?: "turn" | "compaction";
  status: TurnResource["status"];
  first_seq: number;
  last_seq: number;
  pending_calls: TurnResource["pending_calls"];
  usage: TurnResource["usage"];
  error: TurnResource["error"];
  /** Steered input waiting for a paused turn's tool outputs (joins when the turn resumes). */
  queued_input?: ContentItem[][];
}

/** Small keyed JSON values and turn rows in SQLite. All methods are synchronous. */
export class MetaStore {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  get<T>(key: string): T | undefined {
    const row = this.#sql<{
      value: string;
    }>`SELECT value FROM spindle_meta WHERE key = ${key}`.toArray()[0];
    return row === undefined ? undefined : (JSON.parse(row.value) as T);
  }

  put(key: string, value: unknown): void {
    this.#sql`INSERT INTO spindle_meta (key, value) VALUES (${key}, ${JSON.stringify(value)})
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
  }

  thread(): ThreadMeta | undefined {
    return this.get<ThreadMeta>("thread");
  }

  config(): SessionConfiguration | undefined {
    return this.get<SessionConfiguration>("config");
  }

  putTurn(row: TurnRow): void {
    this
      .#sql`INSERT INTO spindle_turns (turn_id, ordinal, body) VALUES (${row.id}, ${row.ordinal}, ${JSON.stringify(row)})
      ON CONFLICT (turn_id) DO UPDATE SET body = excluded.body`;
  }

  turn(id: string): TurnRow | undefined {
    const row = this.#sql<{
      body: string;
    }>`SELECT body FROM spindle_turns WHERE turn_id = ${id}`.toArray()[0];
    return row === undefined ? undefined : (JSON.parse(row.body) as TurnRow);
  }

  lastTurn(): TurnRow | undefined {
    const row = this.#sql<{ body: string }>`
      SELECT body FROM spindle_turns ORDER BY ordinal DESC LIMIT 1`.toArray()[0];
    return row === undefined ? undefined : (JSON.parse(row.body) as TurnRow);
  }
}
