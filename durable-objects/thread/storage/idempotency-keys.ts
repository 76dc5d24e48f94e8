import type { Clock } from "../../../shared/ports/index.ts";
import type { Sql } from "./sql.ts";

/** How long a key is remembered (the IETF draft leaves it to the server; Stripe keeps 24 h). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60_000;

/** What a request sent with an `Idempotency-Key` did, kept so a retry answers with it. */
export interface IdempotencyRecord {
  key: string;
  /**
   * The request it was first used with (route, parameters and body), as the worker hashed it; an
   * import's with its uploaded lines, hashed here (see `importFingerprint`).
   */
  fingerprint: string;
  /** The turn the request started, joined or queued (a compaction's included); null for the rest. */
  turnId: string | null;
  /** The newest event when the request was admitted: a streamed retry replays from there. */
  eventSeq: number;
  at: number;
}

/** Idempotency keys of one thread (design §6), in SQLite so they outlive the instance. */
export class IdempotencyKeys {
  readonly #sql: Sql;
  readonly #clock: Clock;

  constructor(sql: Sql, clock: Clock) {
    this.#sql = sql;
    this.#clock = clock;
  }

  /** The record of `key`, unless it has expired. */
  find(key: string): IdempotencyRecord | undefined {
    const row = this.#sql.tables.ifExists("spindle_idempotency", undefined, () =>
      this.#sql<{
        fingerprint: string;
        turn_id: string | null;
        event_seq: number;
        at: number;
      }>`SELECT fingerprint, turn_id, event_seq, at FROM spindle_idempotency WHERE key = ${key}`
        .toArray()
        .at(0),
    );
    if (row === undefined || row.at <= this.#clock.nowMs() - IDEMPOTENCY_TTL_MS) return undefined;
    return {
      key,
      fingerprint: row.fingerprint,
      turnId: row.turn_id,
      eventSeq: row.event_seq,
      at: row.at,
    };
  }

  record(key: string, fingerprint: string, turnId: string | null, eventSeq: number): void {
    this.#sql.tables.ensuring("spindle_idempotency", () => {
      this
        .#sql`INSERT OR REPLACE INTO spindle_idempotency (key, fingerprint, turn_id, event_seq, at)
        VALUES (${key}, ${fingerprint}, ${turnId}, ${eventSeq}, ${this.#clock.nowMs()})`;
    });
  }

  forget(key: string): void {
    this.#sql.tables.ifExists("spindle_idempotency", undefined, () => {
      this.#sql`DELETE FROM spindle_idempotency WHERE key = ${key}`;
    });
  }

  /** Drops expired keys (from the alarm, off the request path). */
  prune(): void {
    const expired = this.#clock.nowMs() - IDEMPOTENCY_TTL_MS;
    this.#sql.tables.ifExists("spindle_idempotency", undefined, () => {
      this.#sql`DELETE FROM spindle_idempotency WHERE at <= ${expired}`;
    });
  }
}
