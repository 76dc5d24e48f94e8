import type { TurnResource, Warning } from "../shared/api/index.ts";
import type {
  ContentItem,
  ImportedFrom,
  SessionConfiguration,
  ThreadMetadata,
} from "../shared/protocol/index.ts";
import type { Sql } from "./sql.ts";
import { TextParts } from "./text-parts.ts";

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

/**
 * Keyed JSON values and turn rows in SQLite. All methods are synchronous. Values are usually
 * small; one longer than a row part (a configuration with megabytes of instructions, a turn
 * waiting on a call with huge arguments) is stored in parts.
 */
export class MetaStore {
  readonly #sql: Sql;
  readonly #valueParts: TextParts;
  readonly #turnParts: TextParts;
  /**
   * Told of each turn that ended or paused, in the synchronous step that stores its row (and
   * that wrote its last line): the Thread records its webhook events and delivery outcomes here.
   */
  onTurnEnded: ((row: TurnRow) => void) | undefined;

  constructor(sql: Sql) {
    this.#sql = sql;
    this.#valueParts = new TextParts(sql, "meta");
    this.#turnParts = new TextParts(sql, "turn");
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
    const first = this.#turnParts.split(row.id, encodeTurnRow(row));
    this.#sql`INSERT INTO spindle_turns (turn_id, ordinal, body)
      VALUES (${row.id}, ${row.ordinal}, ${first})
      ON CONFLICT (turn_id) DO UPDATE SET body = excluded.body`;
  }

  /** Stores the row of a turn that just ended or paused, and tells `onTurnEnded`. */
  endTurn(row: TurnRow): void {
    this.putTurn(row);
    this.onTurnEnded?.(row);
  }

  turn(id: string): TurnRow | undefined {
    const row = this.#sql<{ turn_id: string; ordinal: number; body: string }>`
      SELECT turn_id, ordinal, body FROM spindle_turns WHERE turn_id = ${id}`.toArray()[0];
    return row && this.#decodeTurn(row);
  }

  lastTurn(): TurnRow | undefined {
    const row = this.#sql<{ turn_id: string; ordinal: number; body: string }>`
      SELECT turn_id, ordinal, body FROM spindle_turns ORDER BY ordinal DESC LIMIT 1`.toArray()[0];
    return row && this.#decodeTurn(row);
  }

  #decodeTurn(row: { turn_id: string; ordinal: number; body: string }): TurnRow {
    return decodeTurnRow({ ...row, body: this.#turnParts.join(row.turn_id, row.body) });
  }
}

/**
 * A turn row's body, kept small (one per turn, forever): the id and ordinal live in their
 * columns, empty defaults are left out and usage is a five-number array.
 */
export function encodeTurnRow(row: TurnRow): string {
  const { id: _id, ordinal: _ordinal, pending_calls, usage, error, queued_input, ...rest } = row;
  return JSON.stringify({
    ...rest,
    ...(pending_calls.length > 0 ? { pending_calls } : {}),
    ...(usage
      ? {
          usage: [
            usage.input_tokens,
            usage.cached_input_tokens,
            usage.output_tokens,
            usage.reasoning_output_tokens,
            usage.total_tokens,
          ],
        }
      : {}),
    ...(error ? { error } : {}),
    ...(queued_input && queued_input.length > 0 ? { queued_input } : {}),
  });
}

export function decodeTurnRow(stored: { turn_id: string; ordinal: number; body: string }): TurnRow {
  const body = JSON.parse(stored.body) as Omit<TurnRow, "usage"> & { usage?: number[] };
  const [input = 0, cached = 0, output = 0, reasoning = 0, total = 0] = body.usage ?? [];
  return {
    ...body,
    id: stored.turn_id,
    ordinal: stored.ordinal,
    pending_calls: body.pending_calls ?? [],
    usage: body.usage
      ? {
          input_tokens: input,
          cached_input_tokens: cached,
          output_tokens: output,
          reasoning_output_tokens: reasoning,
          total_tokens: total,
        }
      : null,
    error: body.error ?? null,
  };
}
