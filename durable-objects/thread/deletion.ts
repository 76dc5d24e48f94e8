import type { AlarmSchedule } from "../common/alarms.ts";
import { type LiveThread, threadPrefix } from "./live-thread.ts";
import { migrateThread } from "./storage/schema.ts";
import { deleteOwnObjects, lendersOf, releaseLoans } from "./storage/segment-loans.ts";
import { sqlOf } from "./storage/sql.ts";
import { TenantSync } from "./tenancy/tenant-sync.ts";

/**
 * Deletes a thread's state: its R2 objects (all but the segments forks still borrow, see
 * `segment-loans.ts`; its own loans end), then every row of the object, except what must
 * outlive the thread: ledger entries the tenant has not acknowledged (usage stays counted), the
 * push version (it only ever grows, so the tenant never takes an old push for a newer one), the
 * deleted thread's creation time (a thread created here later is created after it, so its ledger
 * entries are told apart), the tenant's placement (for the push that tells the tenant the
 * thread is gone), and what webhooks still owe: events not handed to the queue yet, the
 * deliveries' dedup records and log entries (a redelivery still starts nothing), the known
 * subscriptions and the event sequence. Runs inside `blockConcurrencyWhile`: nothing else runs
 * meanwhile.
 */
export async function deleteThreadState(
  storage: DurableObjectStorage,
  bucket: R2Bucket,
  alarms: AlarmSchedule,
  live: LiveThread,
): Promise<void> {
  const prefix = threadPrefix(
    { tenant: live.meta.tenant, incarnation: live.parts.incarnation },
    live.meta.id,
  );
  // Its objects go, but for segments forks still borrow; then its own loans end (not before: a
  // delete that fails leaves a thread that still reads what it borrows).
  await deleteOwnObjects(bucket, prefix, live.meta.created_at);
  await releaseLoans(bucket, lendersOf(live.segments.manifest(), prefix), live.meta.id);
  await alarms.clear();
  const sql = sqlOf(storage.sql);
  const kept = TenantSync.survivingDelete(sql);
  const entries = sql<UsageRow>`SELECT incarnation, seq, body FROM spindle_usage`.toArray();
  const outbox = sql.tables.ifExists("spindle_outbox", [], () =>
    sql`SELECT * FROM spindle_outbox`.toArray(),
  );
  const deliveries = sql.tables.ifExists("spindle_deliveries", [], () =>
    sql`SELECT * FROM spindle_deliveries`.toArray(),
  );
  await storage.deleteAll();
  migrateThread(storage.sql);
  for (const { key, value } of kept) {
    sql`INSERT INTO spindle_sync (key, value) VALUES (${key}, ${value})`;
  }
  // A thread created here next is told apart by a later creation time (`creationTime`).
  sql`INSERT INTO spindle_sync (key, value)
    VALUES ('created_after', ${JSON.stringify(live.meta.created_at)})`;
  for (const { incarnation, seq, body } of entries) {
    sql`INSERT INTO spindle_usage (incarnation, seq, body) VALUES (${incarnation}, ${seq}, ${body})`;
  }
  if (outbox.length > 0) {
    sql.tables.ensuring("spindle_outbox", () => {
      sql`INSERT INTO spindle_outbox (id, endpoint_id, created_at, body)
        SELECT value ->> 'id', value ->> 'endpoint_id', value ->> 'created_at', value ->> 'body'
        FROM json_each(${JSON.stringify(outbox)})`;
    });
  }
  if (deliveries.length > 0) {
    sql.tables.ensuring("spindle_deliveries", () => {
      sql`INSERT INTO spindle_deliveries
        (id, hook_id, delivery_id, status, received_at, turn_id, final, rev, pushed_rev, body)
        SELECT value ->> 'id', value ->> 'hook_id', value ->> 'delivery_id', value ->> 'status',
          value ->> 'received_at', value ->> 'turn_id', value ->> 'final', value ->> 'rev',
          value ->> 'pushed_rev', value ->> 'body'
        FROM json_each(${JSON.stringify(deliveries)})`;
      // Turns that waited in the queue go with the thread: their deliveries end there.
      sql`UPDATE spindle_deliveries
        SET final = 1, rev = rev + 1, body = json_set(body, '$.turn_status', 'interrupted')
        WHERE status = 'accepted' AND final = 0`;
    });
  }
}

interface UsageRow extends Record<string, SqlStorageValue> {
  incarnation: string;
  seq: number;
  body: string;
}
