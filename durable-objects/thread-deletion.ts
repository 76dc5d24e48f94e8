import type { AlarmSchedule } from "./alarms.ts";
import { type LiveThread, threadPrefix } from "./live-thread.ts";
import { migrate } from "./schema.ts";
import { SegmentStore } from "./segments.ts";
import { sqlOf } from "./sql.ts";
import { TenantSync } from "./tenant-sync.ts";

/**
 * Deletes a thread's state: its R2 objects, then every row of the object, except what must
 * outlive the thread: ledger entries the tenant has not acknowledged (usage stays counted), the
 * push version (it only ever grows, so the tenant never takes an old push for a newer one), the
 * deleted thread's creation time (a thread created here later is created after it, so its ledger
 * entries are told apart), and the tenant's placement (for the push that tells the tenant the
 * thread is gone). Runs inside `blockConcurrencyWhile`: nothing else runs meanwhile.
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
  const entries = sql<UsageRow>`SELECT incarnation, seq, body FROM spindle_usage`.toArray();
  await storage.deleteAll();
  migrate(storage.sql);
  for (const { key, value } of kept) {
    sql`INSERT INTO spindle_sync (key, value) VALUES (${key}, ${value})`;
  }
  // A thread created here next is told apart by a later creation time (`creationTime`).
  sql`INSERT INTO spindle_sync (key, value)
    VALUES ('created_after', ${JSON.stringify(live.meta.created_at)})`;
  for (const { incarnation, seq, body } of entries) {
    sql`INSERT INTO spindle_usage (incarnation, seq, body) VALUES (${incarnation}, ${seq}, ${body})`;
  }
}

interface UsageRow extends Record<string, SqlStorageValue> {
  incarnation: string;
  seq: number;
  body: string;
}
