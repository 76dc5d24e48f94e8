import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { api, json } from "./api.ts";

/** The development admin key (vitest.workers.config.ts runs the worker as development). */
export const ADMIN_KEY = "sk-local-admin";

export function newTenantId(): string {
  return `ten_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
}

export interface Tenant {
  object: "tenant";
  id: string;
  name: string | null;
  jurisdiction: "eu" | "fedramp" | null;
  quotas: Record<string, number | null>;
  status: "active" | "deleting";
  created_at: string;
}

/** A new tenant through the admin API. */
export async function createTenant(body: Record<string, unknown> = {}): Promise<Tenant> {
  return json<Tenant>(
    await api("POST", "/v1/admin/tenants", { id: newTenantId(), ...body }, ADMIN_KEY),
    201,
  );
}

/** A new key of `tenant` through the admin API; its secret. */
export async function createKey(tenant: string, body: Record<string, unknown> = {}) {
  const created = await json<{ id: string; key: string }>(
    await api("POST", `/v1/admin/tenants/${tenant}/keys`, body, ADMIN_KEY),
    201,
  );
  return created;
}

/** A new tenant and a key with every scope: what most tests need. */
export async function tenantWithKey(
  body: Record<string, unknown> = {},
): Promise<{ tenant: Tenant; key: string; keyId: string }> {
  const tenant = await createTenant(body);
  const { id, key } = await createKey(tenant.id);
  return { tenant, key, keyId: id };
}

/** The incarnation a managed tenant's object holds: its thread objects' names carry it. */
export async function incarnationOf(tenant: string): Promise<string | null> {
  // By id, not by name: a test may have replaced `getByName` to inject faults.
  const rows = await runInDurableObject(env.TENANT.get(env.TENANT.idFromName(tenant)), (_, state) =>
    state.storage.sql
      .exec<{ value: string }>("SELECT value FROM tenant_meta WHERE key = 'incarnation'")
      .toArray(),
  );
  return rows[0] ? (JSON.parse(rows[0].value) as string) : null;
}

/** `{tenant}.{incarnation}` (or `{tenant}`): the tenant's part of thread names and R2 keys. */
export async function tenantPath(tenant: string): Promise<string> {
  const incarnation = await incarnationOf(tenant);
  return incarnation === null ? tenant : `${tenant}.${incarnation}`;
}

/** A managed tenant's thread object, by the name its incarnation gives it. */
export async function threadObjectOf(tenant: string, threadId: string) {
  return env.THREAD.get(env.THREAD.idFromName(`${await tenantPath(tenant)}:${threadId}`));
}
