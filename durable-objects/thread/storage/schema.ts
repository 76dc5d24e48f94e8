import { migrate } from "../../common/migrations.ts";

/**
 * Persisted table names (design §6). They are stable: never rename one; add a migration step.
 * - spindle_meta: small key → JSON values (identity, configuration, status, counters).
 * - spindle_rollout: rollout lines after the newest checkpoint that R2 may not hold yet; a line
 *   longer than a row may hold is split into numbered parts.
 * - spindle_checkpoint: the newest checkpoint without its history, gzip-compressed, split into
 *   chunks under the 2 MB value limit.
 * - spindle_checkpoint_items: that checkpoint's history in groups of consecutive items (`first`,
 *   `count`), each gzip-compressed and split into parts the same way.
 * - spindle_checkpoint_runs: per item group, its run summary and the SHA-256 of its compressed
 *   bytes (gzip JSON, in parts), so that a load need not inflate the group (see checkpoint-store).
 * - spindle_segments: the manifest of R2 segment objects (contiguous, immutable seq ranges).
 * - spindle_turns: one row per recent turn (and per long or unfinished one) for
 *   `GET …/turns/{turn}`.
 * - spindle_turn_groups: the rows of older finished turns, 256 a row, compressed by column, with
 *   a 4-byte hash of each turn id to find a turn's group (`thread/storage/turn-rows.ts`).
 * - spindle_events: recent thread events, for `Last-Event-ID` replay (bounded by count, bytes and
 *   age; the newest one always stays, so a sequence number is never reused).
 * - spindle_queue: turns waiting for the running one (`on_busy: "queue"`), in order.
 * - spindle_parts: the rest of an event, a queued turn, a meta value or a turn row longer than
 *   one part (its own row holds the first part; see `thread/storage/text-parts.ts`), by kind and key.
 * - spindle_idempotency: `Idempotency-Key`s of recent requests and what each did (24 hours).
 * - spindle_sync: the object's tenancy state (`thread/tenancy/sync-values.ts`): ledger ids and totals, the
 *   tenant's placement and quotas, what the tenant's object last acknowledged.
 * - spindle_usage: usage-ledger entries the tenant's object has not acknowledged yet (the outbox).
 * - spindle_deliveries: hook deliveries this thread accepted (the dedup of the sender's id, 72
 *   hours) and duplicates of them, each the log entry the tenant is told of (`rev` grows with
 *   each change, `pushed_rev` is what the tenant acknowledged), with its turn's outcome.
 * - spindle_request_parts: the newest provider request's parts (instructions, tools, each input
 *   item, as JSON), whose head is `last_request` in spindle_meta: the next request's cache report
 *   compares with them (`thread/storage/request-memory.ts`).
 * - spindle_outbox: events for the tenant's webhook endpoints not yet handed to the tenant, one
 *   row per event and endpoint (`endpoint_id` null: the endpoints are not known yet).
 *
 * Every table costs a database page or more even while empty, and a table with a rowid and a
 * TEXT or composite primary key two (the rowid b-tree and the key's index). So tables of small
 * rows keyed that way are `WITHOUT ROWID` (one b-tree, ordered by the key), and the tables a new
 * thread rarely needs are created on first use (`LAZY_TABLES`, through `Tables`).
 *
 * A database created by an earlier release ran older forms of steps 1-8 (schema version 7 or 8):
 * the same tables, columns, keys and indexes, but each with a rowid, `spindle_turns_ordinal` (an
 * index of `spindle_turns` by ordinal), AUTOINCREMENT on `spindle_queue`, and every table created
 * at once. Every statement reads and writes both forms.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS spindle_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spindle_rollout (seq INTEGER NOT NULL, part INTEGER NOT NULL, line TEXT NOT NULL, PRIMARY KEY (seq, part)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spindle_segments (first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, r2_key TEXT NOT NULL, bytes INTEGER NOT NULL, sha256 TEXT NOT NULL, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spindle_turns (turn_id TEXT PRIMARY KEY, ordinal INTEGER NOT NULL, body TEXT NOT NULL) WITHOUT ROWID;`,
  `CREATE TABLE IF NOT EXISTS spindle_events (seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, body TEXT NOT NULL);`,
  // Empty: the older forms of steps 3 to 6 created tables that are created on first use.
  "",
  "",
  "",
  "",
  `CREATE TABLE IF NOT EXISTS spindle_sync (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spindle_usage (incarnation TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (incarnation, seq)) WITHOUT ROWID;`,
  // Empty: the older form of step 8 created the webhook tables, created on first use.
  "",
];

/**
 * The tables created on first use, with their definitions. Checkpoint item groups and parts hold
 * large values, and deliveries are found by several indexes, so they keep their rowid.
 */
export const LAZY_TABLES = {
  spindle_checkpoint: `CREATE TABLE IF NOT EXISTS spindle_checkpoint (chunk INTEGER PRIMARY KEY, data BLOB NOT NULL)`,
  spindle_checkpoint_items: `CREATE TABLE IF NOT EXISTS spindle_checkpoint_items (grp INTEGER NOT NULL, part INTEGER NOT NULL, first INTEGER NOT NULL, count INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (grp, part))`,
  spindle_checkpoint_runs: `CREATE TABLE IF NOT EXISTS spindle_checkpoint_runs (grp INTEGER NOT NULL, part INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (grp, part)) WITHOUT ROWID`,
  spindle_parts: `CREATE TABLE IF NOT EXISTS spindle_parts (kind TEXT NOT NULL, key TEXT NOT NULL, part INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, key, part))`,
  spindle_queue: `CREATE TABLE IF NOT EXISTS spindle_queue (position INTEGER PRIMARY KEY, body TEXT NOT NULL)`,
  spindle_idempotency: `CREATE TABLE IF NOT EXISTS spindle_idempotency (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, turn_id TEXT, event_seq INTEGER NOT NULL, at INTEGER NOT NULL) WITHOUT ROWID`,
  spindle_turn_groups: `CREATE TABLE IF NOT EXISTS spindle_turn_groups (grp INTEGER PRIMARY KEY, hashes BLOB NOT NULL, data BLOB NOT NULL)`,
  spindle_deliveries: `CREATE TABLE IF NOT EXISTS spindle_deliveries (id TEXT PRIMARY KEY, hook_id TEXT NOT NULL, delivery_id TEXT NOT NULL, status TEXT NOT NULL, received_at INTEGER NOT NULL, turn_id TEXT, final INTEGER NOT NULL DEFAULT 0, rev INTEGER NOT NULL, pushed_rev INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS spindle_deliveries_key ON spindle_deliveries (hook_id, delivery_id);
CREATE INDEX IF NOT EXISTS spindle_deliveries_turn ON spindle_deliveries (turn_id);
CREATE INDEX IF NOT EXISTS spindle_deliveries_received ON spindle_deliveries (received_at);
CREATE INDEX IF NOT EXISTS spindle_deliveries_unpushed ON spindle_deliveries (received_at) WHERE pushed_rev < rev`,
  spindle_request_parts: `CREATE TABLE IF NOT EXISTS spindle_request_parts (idx INTEGER PRIMARY KEY, body TEXT NOT NULL)`,
  spindle_outbox: `CREATE TABLE IF NOT EXISTS spindle_outbox (id TEXT PRIMARY KEY, endpoint_id TEXT, created_at INTEGER NOT NULL, body TEXT NOT NULL) WITHOUT ROWID`,
} as const;

export type LazyTable = keyof typeof LAZY_TABLES;

const missingTable = (err: unknown, table: string) =>
  err instanceof Error && err.message.startsWith(`no such table: ${table}:`);

/** The checkpoint's tables, created together on its first save. */
export const CHECKPOINT_TABLES = [
  "spindle_checkpoint",
  "spindle_checkpoint_items",
  "spindle_checkpoint_runs",
] as const satisfies readonly LazyTable[];

/**
 * Which of the lazily created tables exist, read from `sqlite_master` once (per object: every
 * `Sql` of one storage shares it, see `tablesOf`), then kept up to date by the creations made
 * through it. A creation that a rolled-back transaction undid is noticed by the next statement on
 * the table ("no such table"): `ifExists` then answers as for a missing table, `ensuring` creates
 * it and runs the statement again.
 */
export class Tables {
  readonly #storage: SqlStorage;
  #existing: Set<string> | undefined;

  constructor(storage: SqlStorage) {
    this.#storage = storage;
  }

  #names(): Set<string> {
    this.#existing ??= new Set(
      this.#storage
        .exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
        .toArray()
        .map((row) => row.name),
    );
    return this.#existing;
  }

  has(table: LazyTable): boolean {
    return this.#names().has(table);
  }

  /** Creates `table` unless it exists. */
  ensure(table: LazyTable): void {
    if (this.has(table)) return;
    this.#storage.exec(LAZY_TABLES[table]);
    this.#names().add(table);
  }

  /** Runs `statement` (a write) on `table`, creating the table first when it does not exist. */
  ensuring<T>(table: LazyTable, statement: () => T): T {
    this.ensure(table);
    try {
      return statement();
    } catch (err) {
      if (!missingTable(err, table)) throw err;
      this.#names().delete(table);
      this.ensure(table);
      return statement();
    }
  }

  /**
   * What `query` (a read, or a delete) answers, or `none` while `table` does not exist: it holds
   * no rows then.
   */
  ifExists<T>(table: LazyTable, none: T, query: () => T): T {
    if (!this.has(table)) return none;
    try {
      return query();
    } catch (err) {
      if (!missingTable(err, table)) throw err;
      this.#names().delete(table);
      return none;
    }
  }

  /** Empties those of `tables` that exist. */
  clear(...tables: readonly LazyTable[]): void {
    for (const table of tables) {
      this.ifExists(table, undefined, () => this.#storage.exec(`DELETE FROM ${table}`));
    }
  }

  /** Forgets what it read (the storage was wiped). */
  reset(): void {
    this.#existing = undefined;
  }
}

const tablesByStorage = new WeakMap<SqlStorage, Tables>();

/** The one `Tables` of a storage (an object's `ctx.storage.sql` is one object for its lifetime). */
export function tablesOf(storage: SqlStorage): Tables {
  let tables = tablesByStorage.get(storage);
  if (tables === undefined) {
    tables = new Tables(storage);
    tablesByStorage.set(storage, tables);
  }
  return tables;
}

/**
 * Empties the tables that hold the thread as its rollout defines it (identity, configuration,
 * turns, the rollout tail, checkpoints, the segment manifest, the newest request), for a restore
 * to rewrite from R2.
 * The rest is requests and their answers, and stays: events (so event ids never repeat), queued
 * turns, idempotency keys, and the tenancy state (the ledger and what was pushed).
 */
export function clearRolloutState(storage: SqlStorage): void {
  storage.exec(`DELETE FROM spindle_meta; DELETE FROM spindle_rollout;
    DELETE FROM spindle_segments; DELETE FROM spindle_turns;`);
  const tables = tablesOf(storage);
  tables.clear(...CHECKPOINT_TABLES, "spindle_turn_groups", "spindle_request_parts");
  tables.ifExists("spindle_parts", undefined, () =>
    storage.exec("DELETE FROM spindle_parts WHERE kind IN ('meta', 'turn', 'request')"),
  );
}

/** Brings the Thread's tables up to date (`migrate`); after a wipe the lazy ones are gone. */
export function migrateThread(storage: SqlStorage): void {
  tablesOf(storage).reset();
  migrate(storage, MIGRATIONS);
}
