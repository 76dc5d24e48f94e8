/**
 * A revoked key fails everywhere within 30 s (design §11): each isolate trusts a verified key for
 * at most `KEY_CACHE_TTL_MS` from when it asked. Two apps with their own caches and clocks stand
 * for two isolates of the worker, over the same tenant objects.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createApp } from "../../../worker/app.ts";
import { KEY_CACHE_TTL_MS, KeyCache } from "../../../worker/key-cache.ts";
import { ADMIN_KEY, createTenant } from "../helpers/tenancy.ts";

/** An isolate: its own app and cache, with a clock the test moves. */
function isolate() {
  const clock = { now: 1_000_000 };
  const app = createApp({ keyCache: new KeyCache({ nowMs: () => clock.now }) });
  const request = (method: string, path: string, key: string, body?: unknown) =>
    app.fetch(
      new Request(`http://spindle.test${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
      env,
      {
        waitUntil: () => {},
        passThroughOnException: () => {},
        props: {},
      } as unknown as ExecutionContext,
    );
  return { clock, request };
}

describe("revocation", () => {
  it("takes effect at once in the isolate that revoked, and within the TTL in every other", async () => {
    const tenant = await createTenant();
    const a = isolate();
    const b = isolate();
    const created = (await (
      await a.request("POST", `/v1/admin/tenants/${tenant.id}/keys`, ADMIN_KEY, {})
    ).json()) as { id: string; key: string };
    // Both isolates verify the key (and cache it) at t = 0.
    expect((await a.request("GET", "/v1/threads", created.key)).status).toBe(200);
    expect((await b.request("GET", "/v1/threads", created.key)).status).toBe(200);

    a.clock.now += 1_000;
    b.clock.now += 1_000;
    const revoked = await a.request("DELETE", `/v1/keys/${created.id}`, created.key);
    expect(revoked.status).toBe(204);
    expect((await a.request("GET", "/v1/threads", created.key)).status).toBe(401);

    // B still trusts its answer from t = 0 until the TTL has run out, and not a moment longer.
    b.clock.now = 1_000_000 + KEY_CACHE_TTL_MS - 1;
    expect((await b.request("GET", "/v1/threads", created.key)).status).toBe(200);
    b.clock.now = 1_000_000 + KEY_CACHE_TTL_MS;
    expect((await b.request("GET", "/v1/threads", created.key)).status).toBe(401);
    expect(KEY_CACHE_TTL_MS).toBeLessThanOrEqual(30_000);
  });

  it("a deleted tenant's keys fail within the TTL (at once at its object), and quota changes reach every isolate as fast", async () => {
    const tenant = await createTenant();
    const a = isolate();
    const b = isolate();
    const created = (await (
      await a.request("POST", `/v1/admin/tenants/${tenant.id}/keys`, ADMIN_KEY, {})
    ).json()) as { key: string };
    expect((await b.request("POST", "/v1/threads", created.key, {})).status).toBe(201);
    const patched = await a.request("PATCH", `/v1/admin/tenants/${tenant.id}`, ADMIN_KEY, {
      quotas: { max_threads: 1 },
    });
    expect(patched.status).toBe(200);
    // B's cached view has no quota yet; after the TTL it has the new one.
    expect((await b.request("POST", "/v1/threads", created.key, {})).status).toBe(201);
    b.clock.now += KEY_CACHE_TTL_MS;
    expect((await b.request("POST", "/v1/threads", created.key, {})).status).toBe(429);

    expect((await a.request("DELETE", `/v1/admin/tenants/${tenant.id}`, ADMIN_KEY)).status).toBe(
      202,
    );
    // What the tenant's object answers refuses the cached key at once; the threads it reaches
    // by its cached view stay within the TTL.
    b.clock.now += 1_000;
    expect((await b.request("GET", "/v1/threads", created.key)).status).toBe(401);
    const hook = { thread: "x", verify: { scheme: "standard" } };
    expect((await b.request("POST", "/v1/hooks", created.key, hook)).status).toBe(401);
    b.clock.now += KEY_CACHE_TTL_MS;
    expect((await b.request("GET", "/v1/threads", created.key)).status).toBe(401);
    expect((await b.request("POST", "/v1/threads", created.key, {})).status).toBe(401);
  });
});
