import {
  type CreateHookRequest,
  type DeliveryEntry,
  type DeliveryResource,
  type HookRecord,
  hookDedupOf,
  type ListQuery,
  type ListResource,
  type RpcResult,
} from "../../shared/api/index.ts";
import type { Clock } from "../../shared/ports/index.ts";
import { tablePage } from "../common/cursor.ts";
import { fail, ok } from "../common/results.ts";
import type { Sql } from "../common/sql.ts";
import { refusedByLimit } from "./limits.ts";
import { randomId } from "./random-ids.ts";
import { liveSecrets, rotated, type SecretColumns } from "./rotating-secrets.ts";

/** A hook's delivery log keeps entries this long. */
export const DELIVERY_LOG_RETENTION_MS = 7 * 24 * 60 * 60_000;

interface HookRow extends SecretColumns, Record<string, SqlStorageValue> {
  id: string;
  created_at: string;
  body: string;
}

interface LogRow extends Record<string, SqlStorageValue> {
  id: string;
  received_at: string;
  body: string;
}

/**
 * A tenant's inbound hooks and their delivery logs (design §12), in the tenant's object. A hook's
 * secret is kept as given: an HMAC needs the key itself (it is never shown again). The log holds
 * one entry per request: what the edge decided (ignored, rejected) as it answered, and what a
 * thread accepted (with its turn and how that turn ended) as the thread's pushes bring it.
 */
export class HookStore {
  readonly #sql: Sql;
  readonly #clock: Clock;

  constructor(sql: Sql, clock: Clock) {
    this.#sql = sql;
    this.#clock = clock;
  }

  /** The new hook; `hook_exists` when its id is taken, `limit_exceeded` past `hooks_per_tenant`. */
  create({ body }: CreateHookRequest): RpcResult<HookRecord> {
    const id = body.id ?? randomId("hook");
    if (this.#row(id)) return fail("hook_exists", `Hook "${id}" already exists.`);
    const refused = refusedByLimit(this.#sql, "hooks_per_tenant");
    if (refused) return refused;
    const record: HookRecord = {
      object: "hook",
      id,
      name: body.name ?? null,
      verify: { scheme: body.verify.scheme },
      thread: body.thread,
      input: body.input ?? null,
      on_busy: body.on_busy,
      dedup: hookDedupOf(body),
      thread_config: body.thread_config ?? null,
      events: body.events ?? null,
      created_at: new Date(this.#clock.nowMs()).toISOString(),
      secret_rotated_at: null,
    };
    this.#sql`INSERT INTO tenant_hooks (id, created_at, body, secret)
      VALUES (${id}, ${record.created_at}, ${JSON.stringify(record)}, ${body.verify.secret})`;
    return ok(record);
  }

  #row(id: string): HookRow | undefined {
    return this.#sql<HookRow>`SELECT * FROM tenant_hooks WHERE id = ${id}`.toArray()[0];
  }

  get(id: string): HookRecord | undefined {
    const row = this.#row(id);
    return row && (JSON.parse(row.body) as HookRecord);
  }

  /** The hook and the secrets that verify its deliveries now. */
  target(
    id: string,
  ): { hook: HookRecord; secrets: string[]; previousUntil: number | null } | undefined {
    const row = this.#row(id);
    if (!row) return undefined;
    return { hook: JSON.parse(row.body) as HookRecord, ...liveSecrets(row, this.#clock.nowMs()) };
  }

  /** Hooks oldest first; undefined for a cursor this store did not make. */
  list(query: ListQuery): ListResource<HookRecord> | undefined {
    return tablePage<HookRow, HookRecord>(
      this.#sql,
      { table: "tenant_hooks", time: "created_at" },
      query,
      (row) => JSON.parse(row.body) as HookRecord,
    );
  }

  /** False when there is no such hook. Its log goes with it. */
  delete(id: string): boolean {
    const deleted = this.#sql`DELETE FROM tenant_hooks WHERE id = ${id}`.rowsWritten > 0;
    if (deleted) this.#sql`DELETE FROM tenant_hook_deliveries WHERE hook_id = ${id}`;
    return deleted;
  }

  /** The hook after rotating to `secret`; undefined when there is none. */
  rotate(id: string, secret: string): HookRecord | undefined {
    const row = this.#row(id);
    if (!row) return undefined;
    const now = this.#clock.nowMs();
    const next = rotated(row, secret, now);
    const record: HookRecord = {
      ...(JSON.parse(row.body) as HookRecord),
      secret_rotated_at: new Date(now).toISOString(),
    };
    this.#sql`UPDATE tenant_hooks SET body = ${JSON.stringify(record)}, secret = ${next.secret},
      previous_secret = ${next.previous_secret}, previous_until = ${next.previous_until}
      WHERE id = ${id}`;
    return record;
  }

  /**
   * Keeps log entries (a push may repeat, or arrive after a newer one: an entry changes only to
   * a higher `rev`); entries of a hook that no longer exists are dropped. Entries older than the
   * retention go as their hook's log grows.
   */
  log(entries: readonly DeliveryEntry[]): void {
    const cutoff = new Date(this.#clock.nowMs() - DELIVERY_LOG_RETENTION_MS).toISOString();
    const pruned = new Set<string>();
    // A push's entries are mostly of a few hooks: each is looked up once.
    const exists = new Map<string, boolean>();
    for (const { delivery, rev } of entries) {
      let known = exists.get(delivery.hook_id);
      if (known === undefined) {
        known = this.#row(delivery.hook_id) !== undefined;
        exists.set(delivery.hook_id, known);
      }
      if (!known) continue;
      this.#sql`INSERT INTO tenant_hook_deliveries (id, hook_id, received_at, rev, body)
        VALUES (${delivery.id}, ${delivery.hook_id}, ${delivery.received_at}, ${rev},
          ${JSON.stringify(delivery)})
        ON CONFLICT (id) DO UPDATE SET rev = excluded.rev, body = excluded.body
        WHERE excluded.rev > tenant_hook_deliveries.rev`;
      if (pruned.has(delivery.hook_id)) continue;
      pruned.add(delivery.hook_id);
      this.#sql`DELETE FROM tenant_hook_deliveries
        WHERE hook_id = ${delivery.hook_id} AND received_at < ${cutoff}`;
    }
  }

  /** A hook's log, newest first; undefined for a cursor this store did not make. */
  deliveries(hookId: string, query: ListQuery): ListResource<DeliveryResource> | undefined {
    return tablePage<LogRow, DeliveryResource>(
      this.#sql,
      {
        table: "tenant_hook_deliveries",
        time: "received_at",
        scope: "hook_id",
        value: hookId,
        newestFirst: true,
      },
      query,
      (row) => JSON.parse(row.body) as DeliveryResource,
    );
  }
}
