import type { Clock } from "../../shared/ports/index.ts";
import { DEDUP_WINDOW_MS } from "../../shared/webhooks/index.ts";
import type { Sql } from "../common/sql.ts";

/** Expired claims dropped per claim made, so the table stays bounded without a sweep. */
const PRUNE_PER_CLAIM = 16;

/**
 * The hooks' dedup (design §15 invariant 11), per hook: a delivery's key (the sender's delivery
 * id, or its body's digest) is claimed in the tenant's object before its thread is chosen, and
 * pinned to the thread its first copy went to. A copy that a template would send elsewhere (the
 * thread read from an unsigned header) goes to that same thread, whose own record of the key
 * answers it as a duplicate, so one delivery is one turn whatever the template. The first copy
 * may not have reached its thread (the edge died after the claim): the copy then starts the one
 * turn there. Claims last the 72-hour dedup window.
 */
export class DeliveryClaims {
  readonly #sql: Sql;
  readonly #clock: Clock;

  constructor(sql: Sql, clock: Clock) {
    this.#sql = sql;
    this.#clock = clock;
  }

  /** The thread the delivery `key` of `hookId` goes to: `threadId` unless a copy came before. */
  claim(hookId: string, key: string, threadId: string): string {
    const now = this.#clock.nowMs();
    const since = now - DEDUP_WINDOW_MS;
    this.#sql`DELETE FROM tenant_delivery_claims WHERE rowid IN (
      SELECT rowid FROM tenant_delivery_claims WHERE claimed_at < ${since} LIMIT ${PRUNE_PER_CLAIM})`;
    this.#sql`INSERT INTO tenant_delivery_claims (hook_id, key, thread_id, claimed_at)
      VALUES (${hookId}, ${key}, ${threadId}, ${now})
      ON CONFLICT (hook_id, key) DO UPDATE SET thread_id = excluded.thread_id,
        claimed_at = excluded.claimed_at
      WHERE tenant_delivery_claims.claimed_at < ${since}`;
    const row = this.#sql<{ thread_id: string }>`SELECT thread_id FROM tenant_delivery_claims
      WHERE hook_id = ${hookId} AND key = ${key}`.toArray()[0];
    return row?.thread_id ?? threadId;
  }

  /** A deleted hook's claims go with it. */
  forget(hookId: string): void {
    this.#sql`DELETE FROM tenant_delivery_claims WHERE hook_id = ${hookId}`;
  }
}
