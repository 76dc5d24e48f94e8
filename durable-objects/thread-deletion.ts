import type { AlarmSchedule } from "./alarms.ts";
import { type LiveThread, threadPrefix } from "./live-thread.ts";
import { migrate } from "./schema.ts";
import { SegmentStore } from "./segments.ts";
import { type Sql, sqlOf } from "./sql.ts";
import { TenantSync } from "./tenant-sync.ts";

/**
 * Deletes a thread's state: its R2 objects, then every row of the object, except what must
 * outlive the thread: ledger entries the tenant has not acknowledged (usage stays counted), the
 * push version and the ledger's next id (both only ever grow, so the tenant never mistakes a new
 * thread of the same id for an old push), and the tenant's placement (for the push that tells
 * the tenant the thread is gone). Runs inside `blockConcurrencyWhile`: nothing else runs meanwhile.
 */
export async function deleteThreadState(
  storage: DurableObjectStorage,
  bucket: R2Bucket,
  alarms: AlarmSchedule,
  live: LiveThread,
): Promise<void> {
  await SegmentStore.deleteAll(bucket, threadPrefix(live.meta.tenant, live.meta.id));
  await alarms.clear();
  const sql = sqlOf(storage.sql);
  const kept = TenantSync.survivingDelete(sql);
  const entries = sql<{ id: number; body: string }>`SELECT id, body FROM spindle_usage`.toArray();
  await storage.deleteAll();
  migrate(storage.sql);
  restoreRows(sql, kept, entries);
}

function restoreRows(
  sql: Sql,
  kept: readonly { key: string; value: string }[],
  entries: readonly { id: number; body: string }[],
): void {
  for (const { key, value } of kept) {
    sql`INSERT INTO spindle_sync (key, value) VALUES (${key}, ${value})`;
  }
  for (const { id, body } of entries)
    sql`INSERT INTO spindle_usage (id, body) VALUES (${id}, ${body})`;
}
