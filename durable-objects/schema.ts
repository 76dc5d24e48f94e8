import { sqlOf } from "./sql.ts";

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
 * - spindle_turns: one row per turn for `GET …/turns/{turn}`.
 * - spindle_events: recent thread events, for `Last-Event-ID` replay (bounded by count and age;
 *   the newest one always stays, so a sequence number is never reused).
 * - spindle_queue: turns waiting for the running one (`on_busy: "queue"`), in order.
 * - spindle_parts: the rest of an event, a queued turn, a meta value or a turn row longer than
 *   one part (its own row holds the first part; see `text-parts.ts`), by kind and key.
 * - spindle_idempotency: `Idempotency-Key`s of recent requests and what each did (24 hours).
 * - spindle_sync: the object's tenancy state (`sync-values.ts`): ledger ids and totals, the
 *   tenant's placement and quotas, what the tenant's object last acknowledged.
 * - spindle_usage: usage-ledger entries the tenant's object has not acknowledged yet (the outbox).
 * - spindle_deliveries: hook deliveries this thread accepted (the dedup of the sender's id, 72
 *   hours) and duplicates of them, each the log entry the tenant is told of (`rev` grows with
 *   each change, `pushed_rev` is what the tenant acknowledged), with its turn's outcome.
 * - spindle_outbox: events for the tenant's webhook endpoints not yet handed to the queue, one
 *   row per event and endpoint (`endpoint_id` null: the endpoints are not known yet).
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS spindle_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE IF NOT EXISTS spindle_rollout (
     seq INTEGER NOT NULL, part INTEGER NOT NULL, line TEXT NOT NULL, PRIMARY KEY (seq, part));
   CREATE TABLE IF NOT EXISTS spindle_checkpoint (chunk INTEGER PRIMARY KEY, data BLOB NOT NULL);
   CREATE TABLE IF NOT EXISTS spindle_segments (
     first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, r2_key TEXT NOT NULL,
     bytes INTEGER NOT NULL, sha256 TEXT NOT NULL, state TEXT NOT NULL);
   CREATE TABLE IF NOT EXISTS spindle_turns (
     turn_id TEXT PRIMARY KEY, ordinal INTEGER NOT NULL, body TEXT NOT NULL);
   CREATE INDEX IF NOT EXISTS spindle_turns_ordinal ON spindle_turns (ordinal);`,
  `CREATE TABLE IF NOT EXISTS spindle_events (
     seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, body TEXT NOT NULL);
   CREATE TABLE IF NOT EXISTS spindle_queue (
     position INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL);`,
  `CREATE TABLE IF NOT EXISTS spindle_checkpoint_items (
     grp INTEGER NOT NULL, part INTEGER NOT NULL, first INTEGER NOT NULL, count INTEGER NOT NULL,
     data BLOB NOT NULL, PRIMARY KEY (grp, part));`,
  `CREATE TABLE IF NOT EXISTS spindle_parts (
     kind TEXT NOT NULL, key TEXT NOT NULL, part INTEGER NOT NULL, body TEXT NOT NULL,
     PRIMARY KEY (kind, key, part));`,
  `CREATE TABLE IF NOT EXISTS spindle_idempotency (
     key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, turn_id TEXT, event_seq INTEGER NOT NULL,
     at INTEGER NOT NULL);`,
  `CREATE TABLE IF NOT EXISTS spindle_checkpoint_runs (
     grp INTEGER NOT NULL, part INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (grp, part));`,
  `CREATE TABLE IF NOT EXISTS spindle_sync (key TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE IF NOT EXISTS spindle_usage (
     incarnation TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
     PRIMARY KEY (incarnation, seq));`,
  `CREATE TABLE IF NOT EXISTS spindle_deliveries (
     id TEXT PRIMARY KEY, hook_id TEXT NOT NULL, delivery_id TEXT NOT NULL, status TEXT NOT NULL,
     received_at INTEGER NOT NULL, turn_id TEXT, final INTEGER NOT NULL DEFAULT 0,
     rev INTEGER NOT NULL, pushed_rev INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL);
   CREATE INDEX IF NOT EXISTS spindle_deliveries_key ON spindle_deliveries (hook_id, delivery_id);
   CREATE INDEX IF NOT EXISTS spindle_deliveries_turn ON spindle_deliveries (turn_id);
   CREATE INDEX IF NOT EXISTS spindle_deliveries_received ON spindle_deliveries (received_at);
   CREATE INDEX IF NOT EXISTS spindle_deliveries_unpushed ON spindle_deliveries (received_at)
     WHERE pushed_rev < rev;
   CREATE TABLE IF NOT EXISTS spindle_outbox (
     id TEXT PRIMARY KEY, endpoint_id TEXT, created_at INTEGER NOT NULL, body TEXT NOT NULL);`,
];

/**
 * Empties the tables that hold the thread as its rollout defines it (identity, configuration,
 * turns, the rollout tail, checkpoints, the segment manifest), for a restore to rewrite from R2.
 * The rest is requests and their answers, and stays: events (so event ids never repeat), queued
 * turns, idempotency keys, and the tenancy state (the ledger and what was pushed).
 */
export function clearRolloutState(storage: SqlStorage): void {
  storage.exec(`DELETE FROM spindle_meta; DELETE FROM spindle_rollout;
    DELETE FROM spindle_checkpoint; DELETE FROM spindle_checkpoint_items;
    DELETE FROM spindle_checkpoint_runs;
    DELETE FROM spindle_segments; DELETE FROM spindle_turns;
    DELETE FROM spindle_parts WHERE kind IN ('meta', 'turn');`);
}

/**
 * Applies the numbered migration steps not yet applied (`steps`: the Thread's by default; the
 * tenancy objects have their own). Cheap when up to date.
 */
export function migrate(storage: SqlStorage, steps: readonly string[] = MIGRATIONS): void {
  const sql = sqlOf(storage);
  sql`CREATE TABLE IF NOT EXISTS spindle_schema (version INTEGER NOT NULL)`;
  const row = sql<{ version: number }>`SELECT version FROM spindle_schema`.toArray()[0];
  if (row === undefined) sql`INSERT INTO spindle_schema (version) VALUES (0)`;
  for (let version = row?.version ?? 0; version < steps.length; version++) {
    // A step may hold several statements; exec runs them all.
    storage.exec(steps[version] ?? "");
    sql`UPDATE spindle_schema SET version = ${version + 1}`;
  }
}
