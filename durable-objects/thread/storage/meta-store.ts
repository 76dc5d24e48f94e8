import type { Warning } from "../../../shared/api/index.ts";
import type {
  ImportedFrom,
  SessionConfiguration,
  ThreadMetadata,
} from "../../../shared/protocol/index.ts";
import type { Sql } from "./sql.ts";
import { TextParts } from "./text-parts.ts";
import { type TurnRow, TurnRows } from "./turn-rows.ts";

export type { TurnRow } from "./turn-rows.ts";

/** The thread's identity and counters (one JSON row; tiny). */
export interface ThreadMeta {
  tenant: string;
  id: string;
  created_at: string;
  updated_at: string;
  forked_from: string | null;
  /** The rollout an import came from. Absent in rows written before it was kept: none. */
  imported_from?: ImportedFrom | null;
  turn_count: number;
  warnings: Warning[];
  /** The newest `spindle_metadata` line's (absent in rows written before metadata: none). */
  metadata?: ThreadMetadata;
}

/** A new thread's identity. */
export function newThreadMeta(
  tenant: string,
  id: string,
  createdAt: string,
  forkedFrom: string | null,
): ThreadMeta {
  return {
    tenant,
    id,
    created_at: createdAt,
    updated_at: createdAt,
    forked_from: forkedFrom,
    imported_from: null,
    turn_count: 0,
    warnings: [],
    metadata: {},
  };
}

/** The `session_meta` payload of a thread created through the API (Codex's field names). */
export function sessionMetaPayload(id: string, now: string, config: SessionConfiguration) {
  return {
    id,
    timestamp: now,
    cwd: config.environments[0]?.cwd ?? "/",
    originator: "spindle",
    cli_version: "spindle-0.1.0",
    source: "api",
    model_provider: config.provider,
  };
}

/**
 * Keyed JSON values and turn rows (`TurnRows`) in SQLite. All methods are synchronous. Values
 * are usually small; one longer than a row part (a configuration with megabytes of instructions,
 * a turn waiting on a call with huge arguments) is stored in parts.
 */
export class MetaStore {
  readonly #sql: Sql;
  readonly #valueParts: TextParts;
  readonly #turns: TurnRows;
  /**
   * Told of each turn that ended or paused, in the synchronous step that stores its row (and
   * that wrote its last line): the Thread records its webhook events and delivery outcomes here.
   */
  onTurnEnded: ((row: TurnRow) => void) | undefined;

  constructor(sql: Sql) {
    this.#sql = sql;
    this.#valueParts = new TextParts(sql, "meta");
    this.#turns = new TurnRows(sql);
  }

  get<T>(key: string): T | undefined {
    const row = this.#sql<{
      value: string;
    }>`SELECT value FROM spindle_meta WHERE key = ${key}`.toArray()[0];
    return row === undefined ? undefined : (JSON.parse(this.#valueParts.join(key, row.value)) as T);
  }

  put(key: string, value: unknown): void {
    const first = this.#valueParts.split(key, JSON.stringify(value));
    this.#sql`INSERT INTO spindle_meta (key, value) VALUES (${key}, ${first})
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
  }

  thread(): ThreadMeta | undefined {
    return this.get<ThreadMeta>("thread");
  }

  config(): SessionConfiguration | undefined {
    return this.get<SessionConfiguration>("config");
  }

  putTurn(row: TurnRow): void {
    this.#turns.put(row);
  }

  /** Stores the row of a turn that just ended or paused, and tells `onTurnEnded`. */
  endTurn(row: TurnRow): void {
    this.putTurn(row);
    this.onTurnEnded?.(row);
  }

  turn(id: string): TurnRow | undefined {
    return this.#turns.get(id);
  }

  /** Up to `count` turns older than ordinal `before`, newest first (`TurnRows.newest`). */
  newestTurns(count: number, before?: number): TurnRow[] {
    return this.#turns.newest(count, before);
  }

  lastTurn(): TurnRow | undefined {
    return this.#turns.last();
  }

  /** Groups the rows of older finished turns (`TurnRows.pack`); off the request path. */
  packTurns(): void {
    this.#turns.pack();
  }
}
