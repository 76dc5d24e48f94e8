/**
 * What the suites of the `Tenant` object's stores share: a fresh tenant object's SQLite with a
 * clock the test moves, a tenant record, index entries and thread pushes.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { migrate } from "../../../durable-objects/common/migrations.ts";
import { sqlOf } from "../../../durable-objects/common/sql.ts";
import { TENANT_MIGRATIONS } from "../../../durable-objects/tenant/schema.ts";
import type {
  LedgerEntry,
  TenantResource,
  ThreadResource,
  ThreadSync,
} from "../../../shared/api/index.ts";
import { NO_QUOTAS, NO_THREAD_DEFAULTS } from "../../../shared/api/index.ts";
import { newTenantId } from "./tenancy.ts";

/** Key ids are tagged with the development secret. */
export const DEV_ENV = { SPINDLE_ENV: "development" };

/** Runs `body` over the SQLite of a fresh tenant object, with a clock the test moves. */
export function withTenantStorage<T>(
  body: (parts: { sql: ReturnType<typeof sqlOf>; clock: { nowMs: () => number; at: number } }) => T,
): Promise<T> {
  return runInDurableObject(env.TENANT.getByName(newTenantId()), (_i, state) => {
    migrate(state.storage.sql, TENANT_MIGRATIONS);
    const clock = { at: Date.UTC(2026, 11, 1, 12), nowMs: () => clock.at };
    return body({ sql: sqlOf(state.storage.sql), clock });
  });
}

export const tenant: TenantResource = {
  object: "tenant",
  id: "acme",
  name: null,
  jurisdiction: "eu",
  quotas: NO_QUOTAS,
  thread_defaults: NO_THREAD_DEFAULTS,
  status: "active",
  created_at: "2026-12-01T00:00:00.000Z",
};

export function threadAt(id: string, updatedAt: string, extra: Partial<ThreadResource> = {}) {
  return { id, status: "idle", updated_at: updatedAt, metadata: {}, ...extra } as ThreadResource;
}

export const sync = (
  threadId: string,
  version: number,
  thread: ThreadResource | null,
  usage: LedgerEntry[] = [],
): ThreadSync => ({ threadId, incarnation: null, version, thread, usage });
