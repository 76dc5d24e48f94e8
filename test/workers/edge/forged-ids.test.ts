/**
 * Design §18 invariant 20 in the `Tenant` object: asked about a key or a hook it does not have
 * (through identifiers the service tagged: a revoked key, a deleted hook, a key id or hook id it
 * never made), it answers as before and writes nothing. Forged identifiers, refused before any
 * object, are the unit suite's (`test/unit/worker/id-tags-routes.test.ts`) and the end-to-end
 * suite's (`test/e2e/forged-ids.test.ts`).
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { idTagsOf } from "../../../durable-objects/tenant/id-tags.ts";
import { api, json } from "../helpers/api.ts";
import { createHook, deliver, expectedHookUrl, signedHeaders } from "../helpers/hooks.ts";
import { ADMIN_KEY, createKey, tenantWithKey } from "../helpers/tenancy.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

/** Every row of every table of the tenant's object, blobs as bytes. */
function storedRows(tenant: string): Promise<string> {
  return runInDurableObject(env.TENANT.getByName(tenant), (_instance, state) => {
    const sql = state.storage.sql;
    const tables = sql
      .exec<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' ORDER BY name",
      )
      .toArray();
    return JSON.stringify(
      tables.map(({ name }) => [
        name,
        sql
          .exec(`SELECT * FROM "${name}"`)
          .toArray()
          .map((row) =>
            Object.values(row).map((v) => (v instanceof ArrayBuffer ? [...new Uint8Array(v)] : v)),
          ),
      ]),
    );
  });
}

describe("a tenant asked about what it does not have", () => {
  it("answers 401 and 404 as before, and writes no row", async () => {
    const { tenant, key, keyId } = await tenantWithKey();
    const revoked = await createKey(tenant.id);
    expect(
      (await api("DELETE", `/v1/admin/tenants/${tenant.id}/keys/${revoked.id}`, {}, ADMIN_KEY))
        .status,
    ).toBe(204);
    const kept = await createHook("github", {}, key);
    const deleted = await createHook("github", {}, key);
    expect((await api("DELETE", `/v1/hooks/${deleted.id}`, undefined, key)).status).toBe(204);
    // The key's first use writes its `last_used_at`: before the rows are read.
    expect((await api("GET", "/v1/threads", undefined, key)).status).toBe(200);
    const before = await storedRows(tenant.id);
    const rows = JSON.parse(before) as [string, unknown[]][];
    expect(rows.find(([name]) => name === "tenant_keys")?.[1]).toHaveLength(1);
    expect(rows.find(([name]) => name === "tenant_hooks")?.[1]).toHaveLength(1);

    const addressed = vi.spyOn(env.TENANT, "getByName");
    const neverMade = idTagsOf(env)?.newKeyId(null, tenant.id);
    const secretOf = (k: string) => k.slice(k.lastIndexOf(".") + 1);
    const keys = [
      revoked.key,
      `sk_g.${tenant.id}.${neverMade}.${secretOf(key)}`,
      `sk_g.${tenant.id}.${keyId}.${"A".repeat(43)}`,
    ];
    for (const presented of keys) {
      expect((await api("GET", "/v1/threads", undefined, presented)).status).toBe(401);
    }
    const body = JSON.stringify({ thread: "x" });
    const hooks = [deleted.url, expectedHookUrl(null, tenant.id, "hook_never")];
    for (const url of hooks) {
      expect((await deliver(url, body, signedHeaders("github", kept.secret, body))).status).toBe(
        404,
      );
    }
    // Each reached the tenant's object: its tag was the service's.
    expect(addressed.mock.calls.map(([name]) => name)).toEqual(
      Array.from({ length: keys.length + hooks.length }, () => tenant.id),
    );
    expect(await storedRows(tenant.id)).toBe(before);
    expect(await json(await api("GET", `/v1/hooks/${kept.id}`, undefined, key))).toMatchObject({
      url: kept.url,
    });
  });
});
