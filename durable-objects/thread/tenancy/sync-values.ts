import { retryDelayMs } from "../../common/alarms.ts";
import type { Sql } from "../storage/sql.ts";

/** The `spindle_sync` keys of the webhook outbox, which outlive a delete of the thread. */
export const OUTBOX_SYNC_KEYS = ["webhooks", "webhook_sequence"] as const;

/**
 * Small JSON values of the object's tenancy state in `spindle_sync`: the ledger's ids and totals,
 * the tenant's placement and quotas, what was last pushed. Not rollout state: a restore keeps
 * them, and a delete keeps what must outlive the thread (see `thread/deletion.ts`).
 */
export class SyncValues {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  get<T>(key: string): T | undefined {
    const row = this.#sql<{ value: string }>`
      SELECT value FROM spindle_sync WHERE key = ${key}`.toArray()[0];
    return row === undefined ? undefined : (JSON.parse(row.value) as T);
  }

  put(key: string, value: unknown): void {
    this.#sql`INSERT INTO spindle_sync (key, value) VALUES (${key}, ${JSON.stringify(value)})
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
  }

  delete(key: string): void {
    this.#sql`DELETE FROM spindle_sync WHERE key = ${key}`;
  }
}

/**
 * The failures in a row of a duty the alarm retries (a push to the tenant, a hand-off of the
 * outbox), counted in `spindle_sync` under `key` so the backoff grows across instances.
 */
export class RetryCount {
  readonly #values: SyncValues;
  readonly #key: string;

  constructor(values: SyncValues, key: string) {
    this.#values = values;
    this.#key = key;
  }

  /** The duty succeeded: the next failure backs off from the start. */
  succeeded(): void {
    if ((this.#values.get<number>(this.#key) ?? 0) > 0) this.#values.put(this.#key, 0);
  }

  /** Counts a failure: how many in a row now, and how long to wait before the next attempt. */
  failed(): { attempts: number; delayMs: number } {
    const attempts = (this.#values.get<number>(this.#key) ?? 0) + 1;
    this.#values.put(this.#key, attempts);
    return { attempts, delayMs: retryDelayMs(attempts) };
  }
}
