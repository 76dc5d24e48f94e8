/**
 * Residency (design §11): a tenant's jurisdiction picks the namespace of its Durable Objects and
 * the R2 bucket of its rollouts. Local workerd cannot place objects (its `jurisdiction()`
 * throws), so these tests watch the choice through the bindings, and check where the R2 objects
 * land (an R2 binding with a jurisdiction does work locally).
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, json, newThreadId } from "../helpers/api.ts";
import { tenantPath, tenantWithKey, threadObjectOf } from "../helpers/tenancy.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

/** Records each `jurisdiction()` asked of a namespace, answering with the plain namespace. */
function watchJurisdictions(namespace: DurableObjectNamespace): string[] {
  const asked: string[] = [];
  vi.spyOn(namespace, "jurisdiction").mockImplementation((jurisdiction) => {
    asked.push(jurisdiction);
    return namespace;
  });
  return asked;
}

async function keysUnder(bucket: R2Bucket, prefix: string): Promise<string[]> {
  return (await bucket.list({ prefix })).objects.map((o) => o.key);
}

describe("an EU tenant", () => {
  it("has keys that name the EU, threads and a tenant object in the EU namespace, rollouts in the EU bucket", async () => {
    const threads = watchJurisdictions(env.THREAD as unknown as DurableObjectNamespace);
    const tenants = watchJurisdictions(env.TENANT);
    const { tenant, key } = await tenantWithKey({ jurisdiction: "eu" });
    expect(key.startsWith(`sk_eu.${tenant.id}.`)).toBe(true);
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id }, key), 201);
    await json(await api("POST", `/v1/threads/${id}/turns`, { input: "hello" }, key));
    await runDurableObjectAlarm(await threadObjectOf(tenant.id, id));
    const prefix = `threads/${await tenantPath(tenant.id)}/${id}/`;
    expect((await keysUnder(env.ROLLOUT_EU as R2Bucket, prefix)).length).toBeGreaterThan(0);
    expect(await keysUnder(env.ROLLOUT, prefix)).toEqual([]);
    // Every object of the tenant was asked for in the EU: by the worker, and by the objects.
    expect(new Set(threads)).toEqual(new Set(["eu"]));
    expect(new Set(tenants)).toEqual(new Set(["eu"]));
    expect(threads.length).toBeGreaterThanOrEqual(2);
    expect(tenants.length).toBeGreaterThanOrEqual(2);
    // A thread deleted goes from the EU bucket.
    expect((await api("DELETE", `/v1/threads/${id}`, undefined, key)).status).toBe(204);
    expect(await keysUnder(env.ROLLOUT_EU as R2Bucket, prefix)).toEqual([]);
  });

  it("works end to end in development, where workerd places objects in the plain namespace", async () => {
    const { key } = await tenantWithKey({ jurisdiction: "eu" });
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id, metadata: { where: "eu" } }, key), 201);
    const turn = await json<{ status: string }>(
      await api("POST", `/v1/threads/${id}/turns`, { input: "hello" }, key),
    );
    expect(turn.status).toBe("completed");
    await vi.waitFor(
      async () => {
        const list = await json<{ data: { id: string }[] }>(
          await api("GET", "/v1/threads?metadata[where]=eu", undefined, key),
        );
        expect(list.data.map((t) => t.id)).toEqual([id]);
      },
      { timeout: 5_000, interval: 20 },
    );
  });
});

describe("a tenant without a jurisdiction", () => {
  it("uses the plain namespaces and the default bucket, asking for no jurisdiction", async () => {
    const threads = watchJurisdictions(env.THREAD as unknown as DurableObjectNamespace);
    const tenants = watchJurisdictions(env.TENANT);
    const { tenant, key } = await tenantWithKey();
    expect(key.startsWith(`sk_g.${tenant.id}.`)).toBe(true);
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id }, key), 201);
    await json(await api("POST", `/v1/threads/${id}/turns`, { input: "hello" }, key));
    await runDurableObjectAlarm(await threadObjectOf(tenant.id, id));
    const prefix = `threads/${await tenantPath(tenant.id)}/${id}/`;
    expect((await keysUnder(env.ROLLOUT, prefix)).length).toBeGreaterThan(0);
    expect(await keysUnder(env.ROLLOUT_EU as R2Bucket, prefix)).toEqual([]);
    expect([...threads, ...tenants]).toEqual([]);
  });
});
