/**
 * The tenancy layer over HTTP (design §11): the admin API, tenant keys and scopes, thread listing
 * and metadata, the usage ledger's route, and how the index follows threads. Quotas, residency,
 * revocation and the index's repairs have their own files.
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { idTagsOf } from "../../../durable-objects/tenant/id-tags.ts";
import { ACME_KEY, api, DEV_KEY, importRollout, json, newThreadId } from "../helpers/api.ts";
import {
  ADMIN_KEY,
  createKey,
  createTenant,
  newTenantId,
  type Tenant,
  tenantPath,
  tenantWithKey,
} from "../helpers/tenancy.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

interface ThreadItem {
  id: string;
  status: string;
  metadata: Record<string, string>;
  updated_at: string;
}
interface List<T> {
  object: "list";
  data: T[];
  next_cursor: string | null;
}

const UNAUTHORIZED = {
  type: "/problems/unauthorized",
  title: "Authentication is required",
  status: 401,
  detail: "The API key is not valid.",
  code: "unauthorized",
};

const NO_QUOTAS = {
  max_threads: null,
  max_running_turns: null,
  tokens_per_day: null,
  max_thread_bytes: null,
};

/** The tenant's listing once `done` holds for it (the index follows within moments). */
async function listedWhen(
  key: string,
  query: string,
  done: (list: List<ThreadItem>) => boolean,
): Promise<List<ThreadItem>> {
  return vi.waitFor(
    async () => {
      const list = await json<List<ThreadItem>>(
        await api("GET", `/v1/threads${query}`, undefined, key),
      );
      if (!done(list)) throw new Error(`not yet: ${JSON.stringify(list.data.map((t) => t.id))}`);
      return list;
    },
    { timeout: 5_000, interval: 10 },
  );
}

const ids = (list: List<ThreadItem>) => list.data.map((t) => t.id);

describe("the admin API", () => {
  it("creates a tenant, answers it with Location, and lists, gets and patches it", async () => {
    const id = newTenantId();
    const res = await api(
      "POST",
      "/v1/admin/tenants",
      { id, name: "Acme EU", quotas: { max_threads: 5 } },
      ADMIN_KEY,
    );
    expect(res.headers.get("location")).toBe(`/v1/admin/tenants/${id}`);
    const created = await json<Tenant>(res, 201);
    expect(created).toEqual({
      object: "tenant",
      id,
      name: "Acme EU",
      jurisdiction: null,
      quotas: { ...NO_QUOTAS, max_threads: 5 },
      thread_defaults: { idle_compaction: null },
      status: "active",
      created_at: expect.any(String),
    });
    expect(await json(await api("GET", `/v1/admin/tenants/${id}`, undefined, ADMIN_KEY))).toEqual(
      created,
    );
    const patched = await json<Tenant>(
      await api(
        "PATCH",
        `/v1/admin/tenants/${id}`,
        { name: null, quotas: { max_threads: null, tokens_per_day: 1000 } },
        ADMIN_KEY,
      ),
    );
    expect(patched).toEqual({
      ...created,
      name: null,
      quotas: { ...NO_QUOTAS, tokens_per_day: 1000 },
    });
    expect(await json(await api("GET", `/v1/admin/tenants/${id}`, undefined, ADMIN_KEY))).toEqual(
      patched,
    );
  });

  it("reads a record stored before thread_defaults existed as having none", async () => {
    const { id } = await json<Tenant>(
      await api("POST", "/v1/admin/tenants", { id: newTenantId() }, ADMIN_KEY),
      201,
    );
    // Both stores of the record, as a tenant created before the field was written them.
    await runInDurableObject(env.TENANT_DIRECTORY.getByName("directory"), (_, state) => {
      state.storage.sql.exec(
        "UPDATE directory_tenants SET body = json_remove(body, '$.thread_defaults') WHERE id = ?",
        id,
      );
    });
    await runInDurableObject(env.TENANT.getByName(id), (_, state) => {
      state.storage.sql.exec(
        "UPDATE tenant_meta SET value = json_remove(value, '$.thread_defaults') WHERE key = 'record'",
      );
    });
    await evictDurableObject(env.TENANT.getByName(id));
    const got = await json(await api("GET", `/v1/admin/tenants/${id}`, undefined, ADMIN_KEY));
    expect(got).toMatchObject({ id, thread_defaults: { idle_compaction: null } });
    const listed = await json<{ data: Tenant[] }>(
      await api("GET", "/v1/admin/tenants?limit=100", undefined, ADMIN_KEY),
    );
    for (const tenant of listed.data) expect(tenant).toHaveProperty("thread_defaults");
  });

  it("lists tenants in pages by id, every one once", async () => {
    const made = [await createTenant(), await createTenant(), await createTenant()];
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? "" : `&cursor=${cursor}`;
      const page: List<Tenant> = await json(
        await api("GET", `/v1/admin/tenants?limit=2${query}`, undefined, ADMIN_KEY),
      );
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((t) => t.id));
      cursor = page.next_cursor;
    } while (cursor !== null);
    expect(seen).toEqual([...seen].sort());
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(expect.arrayContaining(made.map((t) => t.id)));
  });

  it("refuses a taken id, an id of the static keys, and a jurisdiction the deployment lacks", async () => {
    const tenant = await createTenant();
    for (const id of [tenant.id, "acme", "local"]) {
      const res = await api("POST", "/v1/admin/tenants", { id }, ADMIN_KEY);
      expect(res.status).toBe(409);
      expect(await res.json()).toMatchObject({ code: "tenant_exists" });
    }
    const fedramp = await api(
      "POST",
      "/v1/admin/tenants",
      { id: newTenantId(), jurisdiction: "fedramp" },
      ADMIN_KEY,
    );
    expect(await json(fedramp, 400)).toMatchObject({
      code: "invalid_request",
      errors: [{ path: "/jurisdiction", message: "no bucket is configured for it" }],
    });
  });

  it("keeps the jurisdiction fixed and validates every body", async () => {
    const tenant = await createTenant({ jurisdiction: "eu" });
    const cases: [string, string, unknown, string][] = [
      ["PATCH", `/v1/admin/tenants/${tenant.id}`, { jurisdiction: null }, "/jurisdiction"],
      [
        "PATCH",
        `/v1/admin/tenants/${tenant.id}`,
        { quotas: { max_threads: 0 } },
        "/quotas/max_threads",
      ],
      ["POST", "/v1/admin/tenants", { id: "bad:id" }, "/id"],
      ["POST", "/v1/admin/tenants", { id: newTenantId(), jurisdiction: "mars" }, "/jurisdiction"],
      [
        "POST",
        `/v1/admin/tenants/${tenant.id}/keys`,
        { scopes: ["threads", "threads"] },
        "/scopes",
      ],
      ["POST", `/v1/admin/tenants/${tenant.id}/keys`, { scopes: ["admin"] }, "/scopes/0"],
    ];
    for (const [method, path, body, at] of cases) {
      const problem = await json<{ code: string; errors: { path: string }[] }>(
        await api(method, path, body, ADMIN_KEY),
        400,
      );
      expect({ code: problem.code, paths: problem.errors.map((e) => e.path) }).toEqual({
        code: "invalid_request",
        paths: [at],
      });
    }
    const after = await json<Tenant>(
      await api("GET", `/v1/admin/tenants/${tenant.id}`, undefined, ADMIN_KEY),
    );
    expect(after.jurisdiction).toBe("eu");
  });

  it("answers 404 for a tenant that does not exist, on every tenant route", async () => {
    const id = newTenantId();
    const routes: [string, string, unknown?][] = [
      ["GET", `/v1/admin/tenants/${id}`],
      ["PATCH", `/v1/admin/tenants/${id}`, { name: "x" }],
      ["DELETE", `/v1/admin/tenants/${id}`],
      ["POST", `/v1/admin/tenants/${id}/keys`, {}],
      ["GET", `/v1/admin/tenants/${id}/keys`],
      ["DELETE", `/v1/admin/tenants/${id}/keys/key_x`],
    ];
    for (const [method, path, body] of routes) {
      const res = await api(method, path, body, ADMIN_KEY);
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
    }
  });

  it("admin routes need an admin key, and an admin key reaches no tenant's threads", async () => {
    const { key } = await tenantWithKey();
    const asTenant = await api("GET", "/v1/admin/tenants", undefined, key);
    expect(await json(asTenant, 403)).toMatchObject({
      code: "forbidden",
      detail: "This route needs an admin key.",
    });
    expect((await api("GET", "/v1/admin/tenants", undefined, ACME_KEY)).status).toBe(403);
    expect((await api("GET", "/v1/admin/tenants", undefined, null)).status).toBe(401);
    const asAdmin = await api("GET", "/v1/threads", undefined, ADMIN_KEY);
    expect(await json(asAdmin, 403)).toMatchObject({ code: "forbidden" });
  });
});

describe("tenant keys", () => {
  it("a new key is shown once, works at once, and is listed without its secret", async () => {
    const tenant = await createTenant();
    const created = await json<Record<string, unknown>>(
      await api("POST", `/v1/admin/tenants/${tenant.id}/keys`, { name: "ci" }, ADMIN_KEY),
      201,
    );
    const key = created.key as string;
    expect(key).toMatch(
      new RegExp(`^sk_g\\.${tenant.id}\\.key_[A-Za-z0-9]{16}[0-9a-f]{32}\\.[A-Za-z0-9_-]{43}$`),
    );
    const listed = {
      object: "api_key",
      id: created.id,
      name: "ci",
      scopes: ["threads", "hooks", "keys", "usage", "tools"],
      redacted_key: `sk_g.${tenant.id}.${created.id}.…${key.slice(-4)}`,
      created_at: created.created_at,
      last_used_at: null,
    };
    expect(created).toEqual({ ...listed, key });
    expect(
      await json(await api("GET", `/v1/admin/tenants/${tenant.id}/keys`, undefined, ADMIN_KEY)),
    ).toEqual({
      object: "list",
      data: [listed],
      next_cursor: null,
    });
    // Used: its last use is recorded.
    await json(await api("GET", "/v1/threads", undefined, key));
    const page = await json<List<{ last_used_at: string | null; key?: string }>>(
      await api("GET", "/v1/keys", undefined, key),
    );
    expect(page.data).toHaveLength(1);
    expect(page.data[0]?.last_used_at).toEqual(expect.any(String));
    expect(JSON.stringify(page)).not.toContain(key.split(".")[3]);
  });

  it("a key's scopes decide its routes: 403 forbidden for any other", async () => {
    const tenant = await createTenant();
    const { key } = await createKey(tenant.id, { scopes: ["usage"] });
    expect((await api("GET", "/v1/usage", undefined, key)).status).toBe(200);
    const refused = [
      await api("POST", "/v1/threads", {}, key),
      await api("GET", "/v1/threads", undefined, key),
      await api("GET", "/v1/keys", undefined, key),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 403, 403]);
    expect(await refused[0]?.json()).toMatchObject({
      code: "forbidden",
      detail: "This route needs a key with the scope `threads`.",
    });
  });

  it("under /v1/keys a key gives only scopes it has, and by default its own", async () => {
    const tenant = await createTenant();
    const { key } = await createKey(tenant.id, { scopes: ["keys", "threads"] });
    const wider = await api("POST", "/v1/keys", { scopes: ["usage"] }, key);
    expect(await json(wider, 403)).toMatchObject({
      code: "forbidden",
      detail: "This key may not give scopes it lacks: usage.",
    });
    const inherited = await json<{ scopes: string[]; key: string }>(
      await api("POST", "/v1/keys", { name: "child" }, key),
      201,
    );
    expect(inherited.scopes).toEqual(["keys", "threads"]);
    expect((await api("GET", "/v1/threads", undefined, inherited.key)).status).toBe(200);
  });

  it("keys of the static secret manage no keys", async () => {
    const res = await api("GET", "/v1/keys", undefined, DEV_KEY);
    expect(await json(res, 403)).toMatchObject({ code: "forbidden" });
  });

  it("an unknown key, a revoked key and a key of a deleted tenant answer the same 401", async () => {
    const { tenant, key, keyId } = await tenantWithKey();
    const other = await tenantWithKey();
    // A key id the tenant's object never made, tagged as one it made would be: the object's 401.
    const made = idTagsOf(env)?.newKeyId(null, tenant.id);
    const unknown = `sk_g.${tenant.id}.${made}.${"A".repeat(43)}`;
    // Refused before any object: untagged, and the tenant's key moved to another tenant.
    const untagged = `sk_g.${tenant.id}.key_AAAAAAAAAAAAAAAA.${"A".repeat(43)}`;
    const moved = key.replace(`.${tenant.id}.`, `.${other.tenant.id}.`);
    const forged = `${key.slice(0, -4)}AAAA`;
    expect((await api("GET", "/v1/threads", undefined, key)).status).toBe(200);
    expect((await api("DELETE", `/v1/keys/${keyId}`, undefined, key)).status).toBe(204);
    expect((await api("GET", "/v1/threads", undefined, other.key)).status).toBe(200);
    expect(
      (await api("DELETE", `/v1/admin/tenants/${other.tenant.id}`, undefined, ADMIN_KEY)).status,
    ).toBe(202);
    const wrongPlace = key.replace("sk_g.", "sk_eu.");
    for (const presented of [unknown, untagged, moved, forged, key, other.key, wrongPlace]) {
      const res = await api("GET", "/v1/threads", undefined, presented);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual(UNAUTHORIZED);
    }
  });

  it("a key id of another tenant is 404 to revoke", async () => {
    const a = await tenantWithKey();
    const b = await tenantWithKey();
    const res = await api("DELETE", `/v1/keys/${a.keyId}`, undefined, b.key);
    expect(res.status).toBe(404);
    expect((await api("GET", "/v1/threads", undefined, a.key)).status).toBe(200);
    const admin = await api(
      "DELETE",
      `/v1/admin/tenants/${b.tenant.id}/keys/${a.keyId}`,
      undefined,
      ADMIN_KEY,
    );
    expect(admin.status).toBe(404);
  });
});

describe("thread listing and metadata", () => {
  it("lists the tenant's threads newest first, in pages, with metadata and status filters", async () => {
    const { key } = await tenantWithKey();
    const made: string[] = [];
    for (const team of ["core", "web", "core", "core"]) {
      const thread = await json<ThreadItem>(
        await api("POST", "/v1/threads", { metadata: { team, order: String(made.length) } }, key),
        201,
      );
      expect(thread.metadata).toEqual({ team, order: String(made.length) });
      made.push(thread.id);
    }
    const all = await listedWhen(key, "?limit=100", (l) => l.data.length === 4);
    expect(ids(all)).toEqual([...made].reverse());
    const asc = await json<List<ThreadItem>>(
      await api("GET", "/v1/threads?order=asc", undefined, key),
    );
    expect(ids(asc)).toEqual(made);

    const paged: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`;
      const page: List<ThreadItem> = await json(
        await api("GET", `/v1/threads?limit=3${query}`, undefined, key),
      );
      paged.push(...ids(page));
      cursor = page.next_cursor;
    } while (cursor !== null);
    expect(paged).toEqual(ids(all));

    const core = await json<List<ThreadItem>>(
      await api("GET", "/v1/threads?metadata[team]=core&limit=2", undefined, key),
    );
    expect(ids(core)).toEqual([made[3], made[2]]);
    const both = await json<List<ThreadItem>>(
      await api("GET", "/v1/threads?metadata[team]=core&metadata[order]=0", undefined, key),
    );
    expect(ids(both)).toEqual([made[0]]);
    const idle = await json<List<ThreadItem>>(
      await api("GET", "/v1/threads?status=idle", undefined, key),
    );
    expect(ids(idle)).toEqual(ids(all));
    const running = await json<List<ThreadItem>>(
      await api("GET", "/v1/threads?status=running", undefined, key),
    );
    expect(running.data).toEqual([]);
  });

  it("answers 400 with the path for bad metadata, filters and cursors", async () => {
    const { key } = await tenantWithKey();
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"]));
    const long = "k".repeat(65);
    const cases: [string, string, unknown, string][] = [
      ["POST", "/v1/threads", { metadata: { [long]: "v" } }, `/metadata/${long}`],
      ["POST", "/v1/threads", { metadata: { a: "v".repeat(513) } }, "/metadata/a"],
      ["POST", "/v1/threads", { metadata: many }, "/metadata"],
      ["POST", "/v1/threads", { metadata: { a: 1 } }, "/metadata/a"],
      ["GET", "/v1/threads?order=sideways", undefined, "order"],
      ["GET", "/v1/threads?limit=101", undefined, "limit"],
      ["GET", `/v1/threads?metadata[a]=${"v".repeat(513)}`, undefined, "metadata[a]"],
      ["GET", "/v1/threads?cursor=nonsense", undefined, "cursor"],
    ];
    for (const [method, path, body, at] of cases) {
      const problem = await json<{ errors: { path: string }[] }>(
        await api(method, path, body, key),
        400,
      );
      expect({ path, at: problem.errors.map((e) => e.path) }).toEqual({ path, at: [at] });
    }
    // A cursor made for one order is not one for the other.
    for (let i = 0; i < 3; i++) await json(await api("POST", "/v1/threads", {}, key), 201);
    const page = await listedWhen(key, "?limit=1", (l) => l.next_cursor !== null);
    const mixed = await api(
      "GET",
      `/v1/threads?order=asc&cursor=${page.next_cursor}`,
      undefined,
      key,
    );
    expect(await json(mixed, 400)).toMatchObject({ errors: [{ path: "cursor" }] });
  });

  it("refuses a filter or parameter it cannot apply instead of listing every thread", async () => {
    const { key } = await tenantWithKey();
    for (const team of ["core", "web"]) {
      await json(await api("POST", "/v1/threads", { metadata: { team } }, key), 201);
    }
    await listedWhen(key, "", (l) => l.data.length === 2);
    const refused: [string, string][] = [
      ["metadata[__proto__]=x", "metadata[__proto__]"],
      ["metadata[constructor]=x", "metadata[constructor]"],
      ["metadata[prototype]=x", "metadata[prototype]"],
      ["metadata[a][b]=c", "metadata[a][b]"],
      ["metadata[]=x", "metadata[]"],
      ["metadata[team]=core&metadata[team]=web", "metadata[team]"],
      ["status=idle&status=running", "status"],
      ["metadata=core", "metadata"],
      ["team=core", "team"],
      ["metadata[team]=core&limit=5&limit=6", "limit"],
    ];
    for (const [query, at] of refused) {
      const problem = await json<{ code: string; errors: { path: string }[] }>(
        await api("GET", `/v1/threads?${query}`, undefined, key),
        400,
      );
      expect({ query, code: problem.code, at: problem.errors.map((e) => e.path) }).toEqual({
        query,
        code: "invalid_request",
        at: [at],
      });
    }
    const core = await json<List<ThreadItem>>(
      await api("GET", "/v1/threads?metadata[team]=core", undefined, key),
    );
    expect(core.data.map((t) => t.metadata)).toEqual([{ team: "core" }]);
    // A create keeps no key a filter could not name: it refuses it instead of dropping it.
    for (const name of ["__proto__", "constructor", "prototype"]) {
      const metadata = Object.fromEntries([[name, "x"]]);
      const problem = await json<{ errors: { path: string }[] }>(
        await api("POST", "/v1/threads", { metadata }, key),
        400,
      );
      expect(problem.errors.map((e) => e.path)).toEqual([`/metadata/${name}`]);
    }
  });

  it("PATCH merges metadata (null removes a key), and the listing filters on the result", async () => {
    const { key } = await tenantWithKey();
    const id = newThreadId();
    await json(
      await api("POST", "/v1/threads", { id, metadata: { team: "core", env: "dev" } }, key),
      201,
    );
    const patched = await json<ThreadItem>(
      await api("PATCH", `/v1/threads/${id}`, { metadata: { env: null, owner: "ana" } }, key),
    );
    expect(patched.metadata).toEqual({ team: "core", owner: "ana" });
    expect(
      (await json<ThreadItem>(await api("GET", `/v1/threads/${id}`, undefined, key))).metadata,
    ).toEqual({
      team: "core",
      owner: "ana",
    });
    await listedWhen(key, "?metadata[owner]=ana", (l) => ids(l).includes(id));
    const none = await json<List<ThreadItem>>(
      await api("GET", "/v1/threads?metadata[env]=dev", undefined, key),
    );
    expect(none.data).toEqual([]);

    const sixteen = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, "v"]));
    const full = await api("PATCH", `/v1/threads/${id}`, { metadata: sixteen }, key);
    expect(await json(full, 400)).toMatchObject({
      code: "invalid_request",
      errors: [{ path: "/metadata", message: "more than 16 keys after the patch" }],
    });
    const missing = await api("PATCH", `/v1/threads/${newThreadId()}`, { metadata: {} }, key);
    expect(missing.status).toBe(404);
  });

  it("the metadata survives a restore from R2 and is copied by a fork unless the fork sets its own", async () => {
    const { key } = await tenantWithKey();
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id, metadata: { team: "core" } }, key), 201);
    await json(await api("PATCH", `/v1/threads/${id}`, { metadata: { stage: "2" } }, key));
    const restored = await json<ThreadItem>(
      await api("POST", `/v1/threads/${id}/restore`, undefined, key),
    );
    expect(restored.metadata).toEqual({ team: "core", stage: "2" });
    const copy = await json<ThreadItem>(await api("POST", `/v1/threads/${id}/fork`, {}, key), 201);
    expect(copy.metadata).toEqual({ team: "core", stage: "2" });
    const own = await json<ThreadItem>(
      await api("POST", `/v1/threads/${id}/fork`, { metadata: { team: "fork" } }, key),
      201,
    );
    expect(own.metadata).toEqual({ team: "fork" });
    await listedWhen(key, "?metadata[team]=fork", (l) => ids(l).includes(own.id));
  });

  it("the index follows creates, imports, forks, deletes and the status of a running turn", async () => {
    const { key } = await tenantWithKey();
    const source = newThreadId();
    await json(await api("POST", "/v1/threads", { id: source }, key), 201);
    await json(await api("POST", `/v1/threads/${source}/turns`, { input: "hello" }, key));
    const fork = await json<ThreadItem>(
      await api("POST", `/v1/threads/${source}/fork`, {}, key),
      201,
    );
    const exported = await (
      await api("GET", `/v1/threads/${source}/rollout`, undefined, key)
    ).text();
    const imported = await json<ThreadItem>(
      await importRollout(undefined, exported, {}, { key }),
      201,
    );
    await listedWhen(key, "", (l) => ids(l).length === 3);
    expect((await api("DELETE", `/v1/threads/${fork.id}`, undefined, key)).status).toBe(204);
    await listedWhen(key, "", (l) => !ids(l).includes(fork.id) && ids(l).includes(imported.id));

    const slow = api("POST", `/v1/threads/${source}/turns`, { input: "/slow 400 wait" }, key);
    const busy = await listedWhen(key, "?status=running", (l) => ids(l).includes(source));
    expect(busy.data.map((t) => t.status)).toEqual(["running"]);
    await json(await slow);
    await listedWhen(key, "?status=running", (l) => l.data.length === 0);
  });

  it("only the caller's tenant is listed", async () => {
    const a = await tenantWithKey();
    const b = await tenantWithKey();
    const made = await json<ThreadItem>(await api("POST", "/v1/threads", {}, a.key), 201);
    await listedWhen(a.key, "", (l) => ids(l).includes(made.id));
    const theirs = await json<List<ThreadItem>>(await api("GET", "/v1/threads", undefined, b.key));
    expect(theirs.data).toEqual([]);
  });
});

describe("usage", () => {
  it("sums every provider request by day, thread and model, as the threads and turns report", async () => {
    const { key } = await tenantWithKey();
    const [one, two] = [newThreadId(), newThreadId()];
    const turns: { usage: Record<string, number> }[] = [];
    for (const [id, model] of [
      [one, "spindle-local"],
      [two, "spindle-local-lite"],
    ] as const) {
      await json(await api("POST", "/v1/threads", { id, model }, key), 201);
      for (const input of ["first", "second"]) {
        turns.push(await json(await api("POST", `/v1/threads/${id}/turns`, { input }, key)));
      }
    }
    turns.push(await json(await api("POST", `/v1/threads/${one}/compact`, undefined, key)));
    const sum = (field: string) => turns.reduce((n, t) => n + (t.usage[field] ?? 0), 0);
    const threads = [
      await json<{ usage: Record<string, number> }>(
        await api("GET", `/v1/threads/${one}`, undefined, key),
      ),
      await json<{ usage: Record<string, number> }>(
        await api("GET", `/v1/threads/${two}`, undefined, key),
      ),
    ];
    const totals = {
      input_tokens: sum("input_tokens"),
      cached_input_tokens: sum("cached_input_tokens"),
      output_tokens: sum("output_tokens"),
      reasoning_tokens: sum("reasoning_output_tokens"),
      requests: 5,
      turns: 5,
    };
    expect(totals.input_tokens).toBeGreaterThan(0);
    const plus = (a: Record<string, number>, b: Record<string, number>) =>
      Object.fromEntries(Object.keys(totals).map((k) => [k, (a[k] ?? 0) + (b[k] ?? 0)]));
    expect(plus(threads[0]?.usage ?? {}, threads[1]?.usage ?? {})).toEqual(totals);

    const usage = async (query: string) =>
      json<List<Record<string, unknown>>>(await api("GET", `/v1/usage${query}`, undefined, key));
    const byDay = await vi.waitFor(
      async () => {
        const page = await usage("");
        expect(page.data.map(({ object: _, bucket: __, ...counts }) => counts)).toEqual([
          { ...totals, cache_hit_ratio: totals.cached_input_tokens / totals.input_tokens },
        ]);
        return page;
      },
      { timeout: 5_000, interval: 20 },
    );
    const today = new Date().toISOString().slice(0, 10);
    expect(byDay.data[0]).toMatchObject({ object: "usage_bucket", bucket: today });
    const byThread = await usage("?group_by=thread");
    expect(byThread.data.map((b) => b.bucket)).toEqual([one, two].sort());
    for (const [i, id] of [one, two].entries()) {
      const bucket = byThread.data.find((b) => b.bucket === id);
      expect({ ...bucket }).toEqual({ object: "usage_bucket", bucket: id, ...threads[i]?.usage });
    }
    const byModel = await usage("?group_by=model");
    expect(byModel.data.map((b) => b.bucket)).toEqual(["spindle-local", "spindle-local-lite"]);
    const paged = await usage("?group_by=thread&limit=1");
    expect(paged.data).toHaveLength(1);
    const rest = await usage(`?group_by=thread&limit=1&cursor=${paged.next_cursor}`);
    expect([...paged.data, ...rest.data]).toEqual(byThread.data);
    expect(rest.next_cursor).toBe(null);
    expect((await usage("?start=2000-01-01&end=2000-01-02")).data).toEqual([]);
  });

  it("refuses a range that ends before it starts, and a cursor of another grouping", async () => {
    const { key } = await tenantWithKey();
    const bad = await api("GET", "/v1/usage?start=2026-02-02&end=2026-02-01", undefined, key);
    expect(await json(bad, 400)).toMatchObject({ errors: [{ path: "end" }] });
    const notDay = await api("GET", "/v1/usage?start=yesterday", undefined, key);
    expect(await json(notDay, 400)).toMatchObject({ errors: [{ path: "start" }] });
  });
});

describe("deleting a tenant", () => {
  it("deletes its threads in the background, resuming after a failure, then forgets it", async () => {
    const { tenant, key } = await tenantWithKey();
    const threads = [newThreadId(), newThreadId(), newThreadId()];
    for (const id of threads) await json(await api("POST", "/v1/threads", { id }, key), 201);
    await listedWhen(key, "", (l) => l.data.length === 3);
    const tenantObject = env.TENANT.getByName(tenant.id);
    // The first attempt to delete one of them fails: the deletion goes on with the others and
    // comes back for it.
    const getByName = env.THREAD.getByName.bind(env.THREAD);
    let failures = 0;
    vi.spyOn(env.THREAD, "getByName").mockImplementation((name: string) => {
      const stub = getByName(name);
      if (!name.endsWith(`:${threads[1]}`) || failures > 0) return stub;
      failures += 1;
      return new Proxy(stub, {
        get: (target, prop, receiver) =>
          prop === "deleteThread"
            ? async () => {
                throw new Error("this delete fails once");
              }
            : Reflect.get(target, prop, receiver),
      });
    });
    const deleted = await json<Tenant>(
      await api("DELETE", `/v1/admin/tenants/${tenant.id}`, undefined, ADMIN_KEY),
      202,
    );
    expect(deleted).toEqual({ ...tenant, status: "deleting" });
    expect(
      await json(await api("GET", `/v1/admin/tenants/${tenant.id}`, undefined, ADMIN_KEY)),
    ).toEqual(deleted);
    // Its id is not free until the deletion is done.
    expect((await api("POST", "/v1/admin/tenants", { id: tenant.id }, ADMIN_KEY)).status).toBe(409);
    const path = await tenantPath(tenant.id);
    const threadObject = (id: string) => env.THREAD.getByName(`${path}:${id}`);
    await vi.waitFor(
      async () => {
        // The alarm's runs (here run by hand) go on until no thread is left, each in a new
        // instance of the tenant's object: the deletion resumes from what is stored.
        await evictDurableObject(tenantObject);
        await runDurableObjectAlarm(tenantObject);
        for (const id of threads) {
          expect(await threadObject(id).getThread()).toMatchObject({
            ok: false,
            error: { code: "not_found" },
          });
        }
        expect(
          (await api("GET", `/v1/admin/tenants/${tenant.id}`, undefined, ADMIN_KEY)).status,
        ).toBe(404);
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(failures).toBe(1);
    expect((await api("GET", "/v1/threads", undefined, key)).status).toBe(401);
    // The id may be taken again: a new tenant, with nothing of the old one.
    const again = await tenantWithKey({ id: tenant.id });
    const list = await json<List<ThreadItem>>(
      await api("GET", "/v1/threads", undefined, again.key),
    );
    expect(list.data).toEqual([]);
  });
});
