/**
 * The tenant's MCP servers (design §16) through the running service: the `/v1/mcp-servers`
 * routes (scope `tools`), what they refuse (the outbound URL policy, the headers' limits, the
 * per-tenant count), that no answer ever carries a header's value (invariant 16), that one
 * tenant's servers are invisible to another, what `resolveMcpServers` gives a thread, the
 * `tools` scope given to the keys that held every scope before it, and a hook's
 * `thread_config` naming servers. Every URL here is a loopback or private literal: nothing is
 * sent to any of them, registration only checks.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { migrate } from "../../../durable-objects/common/migrations.ts";
import { TENANT_MIGRATIONS } from "../../../durable-objects/tenant/schema.ts";
import {
  mcpServerHeadersMaxCount,
  SCOPES,
  type TenantRpc,
  tenantLimits,
} from "../../../shared/api/index.ts";
import { ACME_KEY, api, GLOBEX_KEY, json } from "../helpers/api.ts";
import { createHook, signedDelivery } from "../helpers/hooks.ts";
import {
  ADMIN_KEY,
  createKey,
  createTenant,
  incarnationOf,
  tenantWithKey,
} from "../helpers/tenancy.ts";

const URL_A = "http://127.0.0.1:9/mcp";
const SECRET = "Bearer mcp-secret-value-0123456789";

interface Server {
  object: "mcp_server";
  label: string;
  url: string;
  header_names: string[];
  allowed_tools: string[] | null;
  require_approval: unknown;
  timeout_ms: number;
  created_at: string;
  updated_at: string;
}

interface Problem {
  code: string;
  errors?: { path: string; message: string }[];
  limit?: string;
  max?: number;
}

/** The tenant's object, as a thread calls it. */
const tenantObject = (tenant: string) => env.TENANT.getByName(tenant) as unknown as TenantRpc;

const register = (key: string, body: Record<string, unknown>) =>
  api("POST", "/v1/mcp-servers", body, key);

describe("the MCP server routes", () => {
  it("create, get, list, patch and delete; the defaults; header names only, never values", async () => {
    const { key } = await tenantWithKey();
    const res = await register(key, {
      label: "docs",
      url: URL_A,
      headers: { Authorization: SECRET, "X-Org": "org-value-42" },
    });
    expect(res.headers.get("location")).toBe("/v1/mcp-servers/docs");
    const created = await json<Server>(res, 201);
    expect(created).toEqual({
      object: "mcp_server",
      label: "docs",
      url: URL_A,
      header_names: ["authorization", "x-org"],
      allowed_tools: null,
      require_approval: "always",
      timeout_ms: 60_000,
      created_at: expect.any(String),
      updated_at: created.created_at,
    });
    expect(await json(await api("GET", "/v1/mcp-servers/docs", undefined, key))).toEqual(created);
    const listed = await json<{ data: Server[]; next_cursor: null }>(
      await api("GET", "/v1/mcp-servers", undefined, key),
    );
    expect(listed).toEqual({ object: "list", data: [created], next_cursor: null });

    const patched = await json<Server>(
      await api(
        "PATCH",
        "/v1/mcp-servers/docs",
        {
          url: "http://localhost:9/v2/mcp",
          headers: { "X-Org": null, "X-Api-Key": "another-secret-value" },
          allowed_tools: ["search"],
          require_approval: { never: { tool_names: ["search"] } },
          timeout_ms: 5_000,
        },
        key,
      ),
    );
    expect(patched).toEqual({
      ...created,
      url: "http://localhost:9/v2/mcp",
      header_names: ["authorization", "x-api-key"],
      allowed_tools: ["search"],
      require_approval: { never: { tool_names: ["search"] } },
      timeout_ms: 5_000,
      updated_at: expect.any(String),
    });
    // Back to every tool.
    const reset = await json<Server>(
      await api("PATCH", "/v1/mcp-servers/docs", { allowed_tools: null }, key),
    );
    expect(reset.allowed_tools).toBe(null);

    for (const text of [JSON.stringify(created), JSON.stringify(listed), JSON.stringify(reset)]) {
      expect(text).not.toContain("mcp-secret-value");
      expect(text).not.toContain("org-value-42");
      expect(text).not.toContain("another-secret-value");
    }
    expect((await api("DELETE", "/v1/mcp-servers/docs", undefined, key)).status).toBe(204);
    for (const [method, body] of [
      ["GET", undefined],
      ["PATCH", { timeout_ms: 2_000 }],
      ["DELETE", undefined],
    ] as const) {
      const gone = await api(method, "/v1/mcp-servers/docs", body, key);
      expect(await json<Problem>(gone, 404)).toMatchObject({ code: "not_found" });
    }
  });

  it("lists oldest first in keyset pages", async () => {
    const { key } = await tenantWithKey();
    const labels = ["s0", "s1", "s2", "s3", "s4"];
    for (const label of labels) await json(await register(key, { label, url: URL_A }), 201);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? "" : `&cursor=${cursor}`;
      const page: { data: Server[]; next_cursor: string | null } = await json(
        await api("GET", `/v1/mcp-servers?limit=2${query}`, undefined, key),
      );
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((s) => s.label));
      cursor = page.next_cursor;
    } while (cursor !== null);
    expect(seen).toEqual(labels);
    const bad = await api("GET", "/v1/mcp-servers?cursor=nope", undefined, key);
    expect(await json<Problem>(bad, 400)).toMatchObject({ code: "invalid_request" });
  });

  it("a label taken is 409 mcp_server_exists, and the first registration stays as it was", async () => {
    const { key } = await tenantWithKey();
    await json(await register(key, { label: "docs", url: URL_A, headers: { "X-K": "one" } }), 201);
    const again = await register(key, { label: "docs", url: "http://127.0.0.2:9/x" });
    expect(await json<Problem>(again, 409)).toMatchObject({ code: "mcp_server_exists" });
    const kept = await json<Server>(await api("GET", "/v1/mcp-servers/docs", undefined, key));
    expect(kept).toMatchObject({ url: URL_A, header_names: ["x-k"] });
  });

  it("refuses bad bodies at their field: label, timeout, tools, approval, headers", async () => {
    const { key } = await tenantWithKey();
    const refusedAt = async (body: Record<string, unknown>, path: string) => {
      const problem = await json<Problem>(await register(key, { url: URL_A, ...body }), 400);
      expect(problem.code).toBe("invalid_request");
      expect(problem.errors?.map((e) => e.path)).toContain(path);
    };
    await refusedAt({ label: "no spaces" }, "/label");
    await refusedAt({ label: "x".repeat(65) }, "/label");
    await refusedAt({ label: "t", timeout_ms: 999 }, "/timeout_ms");
    await refusedAt({ label: "t", timeout_ms: 300_001 }, "/timeout_ms");
    await refusedAt({ label: "t", allowed_tools: [] }, "/allowed_tools");
    await refusedAt({ label: "t", require_approval: "sometimes" }, "/require_approval");
    await refusedAt({ label: "t", headers: { "Mcp-Session-Id": "x" } }, "/headers");
    await refusedAt({ label: "t", headers: { Authorization: "a\nb" } }, "/headers/Authorization");
    await refusedAt({ label: "t", unknown: 1 }, "/unknown");
    // Nothing of a refused create is kept.
    const page = await json<{ data: unknown[] }>(
      await api("GET", "/v1/mcp-servers", undefined, key),
    );
    expect(page.data).toEqual([]);
  });

  it("a patch's headers are merged, and refused as a whole when the result passes the limits", async () => {
    const { key } = await tenantWithKey();
    const max = mcpServerHeadersMaxCount;
    const headers = Object.fromEntries(Array.from({ length: max }, (_, i) => [`x-h${i}`, "v"]));
    await json(await register(key, { label: "full", url: URL_A, headers }), 201);
    const over = await api("PATCH", "/v1/mcp-servers/full", { headers: { "x-more": "v" } }, key);
    expect(await json<Problem>(over, 400)).toMatchObject({
      code: "invalid_request",
      errors: [{ path: "/headers", message: `at most ${max} headers` }],
    });
    // One replaced by another fits; the stored set is what the merge gives.
    const swapped = await json<Server>(
      await api("PATCH", "/v1/mcp-servers/full", { headers: { "x-h0": null, "x-more": "v" } }, key),
    );
    expect(swapped.header_names).toHaveLength(max);
    expect(swapped.header_names).toContain("x-more");
    expect(swapped.header_names).not.toContain("x-h0");
  });
});

describe("the outbound URL policy at registration", () => {
  it("development: http to a loopback host; never a private, link-local or CGNAT literal or a special-use name", async () => {
    const { key } = await tenantWithKey();
    for (const [i, url] of [
      "http://127.0.0.1:9/mcp",
      "http://[::1]:9/mcp",
      "http://localhost:9/mcp",
    ].entries()) {
      await json(await register(key, { label: `ok${i}`, url }), 201);
    }
    for (const [i, url] of [
      "https://10.0.0.1/mcp",
      "https://192.168.1.10/mcp",
      "https://169.254.169.254/latest",
      "https://100.64.0.1/mcp",
      "https://[fd00::1]/mcp",
      "https://[::ffff:10.0.0.1]/mcp",
      "https://mcp.internal/mcp",
      "https://printer.local/mcp",
      "http://mcp.example.com/mcp",
      "https://user:pass@mcp.example.com/mcp",
      "ftp://127.0.0.1/mcp",
      "not a url",
    ].entries()) {
      const problem = await json<Problem>(await register(key, { label: `no${i}`, url }), 400);
      expect({ url, problem }).toMatchObject({
        url,
        problem: { code: "invalid_request", errors: [{ path: "/url" }] },
      });
    }
    // And on a patch of the URL.
    const patched = await api("PATCH", "/v1/mcp-servers/ok0", { url: "https://10.1.2.3/mcp" }, key);
    expect(await json<Problem>(patched, 400)).toMatchObject({ errors: [{ path: "/url" }] });
  });
});

describe("scope and tenancy", () => {
  it("a key without `tools` gets 403 on every MCP server route; one with only `tools` manages them", async () => {
    const tenant = await createTenant();
    const { key: noTools } = await createKey(tenant.id, {
      scopes: ["threads", "hooks", "keys", "usage"],
    });
    const { key: toolsOnly } = await createKey(tenant.id, { scopes: ["tools"] });
    await json(await register(toolsOnly, { label: "docs", url: URL_A }), 201);
    for (const [method, path, body] of [
      ["POST", "/v1/mcp-servers", { label: "x", url: URL_A }],
      ["GET", "/v1/mcp-servers", undefined],
      ["GET", "/v1/mcp-servers/docs", undefined],
      ["PATCH", "/v1/mcp-servers/docs", { timeout_ms: 2_000 }],
      ["DELETE", "/v1/mcp-servers/docs", undefined],
    ] as const) {
      const res = await api(method, path, body, noTools);
      expect({ method, path, problem: await json<Problem>(res, 403) }).toMatchObject({
        problem: { code: "forbidden" },
      });
    }
    expect((await api("GET", "/v1/threads", undefined, toolsOnly)).status).toBe(403);
    // A key made without scopes has every one, `tools` included.
    const { key: every } = await createKey(tenant.id);
    const keys = await json<{ data: { scopes: string[] }[] }>(
      await api("GET", "/v1/keys", undefined, every),
    );
    expect(keys.data.at(-1)?.scopes).toEqual([...SCOPES]);
    expect(SCOPES).toContain("tools");
  });

  it("one tenant's servers are invisible to another, even under the same label", async () => {
    const label = `iso_${crypto.randomUUID().slice(0, 8)}`;
    await json(
      await register(ACME_KEY, { label, url: URL_A, headers: { "X-Api-Key": "acme-cred" } }),
      201,
    );
    expect((await api("GET", `/v1/mcp-servers/${label}`, undefined, GLOBEX_KEY)).status).toBe(404);
    expect(
      (await api("PATCH", `/v1/mcp-servers/${label}`, { timeout_ms: 1_000 }, GLOBEX_KEY)).status,
    ).toBe(404);
    expect((await api("DELETE", `/v1/mcp-servers/${label}`, undefined, GLOBEX_KEY)).status).toBe(
      404,
    );
    const globexList = await (
      await api("GET", "/v1/mcp-servers?limit=100", undefined, GLOBEX_KEY)
    ).text();
    expect(globexList).not.toContain(label);
    // Globex registers its own under the label; acme's is unchanged.
    await json(await register(GLOBEX_KEY, { label, url: "http://127.0.0.2:9/g" }), 201);
    const acme = await json<Server>(
      await api("GET", `/v1/mcp-servers/${label}`, undefined, ACME_KEY),
    );
    expect(acme).toMatchObject({ url: URL_A, header_names: ["x-api-key"], timeout_ms: 60_000 });
    // Globex's threads resolve globex's registration: its URL, none of acme's headers.
    const resolved = await tenantObject("globex").resolveMcpServers({ incarnation: null }, [
      { label },
    ]);
    expect(resolved).toEqual({
      ok: true,
      value: {
        servers: [expect.objectContaining({ url: "http://127.0.0.2:9/g", headers: {} })],
        unavailable: [],
      },
    });
  });
});

describe("per-tenant limit", () => {
  it("mcp_servers_per_tenant: up to the limit, then 409 naming it; a delete frees a place", async () => {
    const max = tenantLimits.mcp_servers_per_tenant;
    const { key } = await tenantWithKey();
    const statuses = await Promise.all(
      Array.from({ length: max + 4 }, async (_, i) => {
        const res = await register(key, { label: `s${i}`, url: URL_A });
        await res.body?.cancel();
        return res.status;
      }),
    );
    expect(statuses.filter((s) => s === 201)).toHaveLength(max);
    expect(statuses.filter((s) => s === 409)).toHaveLength(4);
    const over = await register(key, { label: "over", url: URL_A });
    expect(await json<Problem>(over, 409)).toMatchObject({
      code: "limit_exceeded",
      limit: "mcp_servers_per_tenant",
      max,
    });
    const page = await json<{ data: Server[] }>(
      await api("GET", "/v1/mcp-servers?limit=100", undefined, key),
    );
    expect(page.data).toHaveLength(max);
    const first = page.data[0]?.label ?? "";
    expect((await api("DELETE", `/v1/mcp-servers/${first}`, undefined, key)).status).toBe(204);
    await json(await register(key, { label: "again", url: URL_A }), 201);
  });
});

describe("resolveMcpServers: what a thread of the tenant gets", () => {
  it("each reference narrowed in its order; unknown labels and other URLs unavailable with why", async () => {
    const { tenant, key } = await tenantWithKey();
    await json(
      await register(key, {
        label: "docs",
        url: URL_A,
        headers: { Authorization: SECRET },
        allowed_tools: ["search", "fetch"],
        require_approval: { never: { tool_names: ["search", "fetch"] } },
        timeout_ms: 10_000,
      }),
      201,
    );
    await json(
      await register(key, {
        label: "ops",
        url: "http://127.0.0.3:9/ops",
        require_approval: "never",
      }),
      201,
    );
    const incarnation = await incarnationOf(tenant.id);
    const stub = tenantObject(tenant.id);
    const resolved = await stub.resolveMcpServers({ incarnation }, [
      { label: "ops", require_approval: { never: { tool_names: ["read"] } } },
      { label: "docs", allowed_tools: ["fetch", "delete"], require_approval: "never" },
      { label: "missing" },
      { label: "ops", url: "http://127.0.0.3:9/elsewhere" },
    ]);
    expect(resolved).toEqual({
      ok: true,
      value: {
        servers: [
          {
            label: "ops",
            url: "http://127.0.0.3:9/ops",
            headers: {},
            allowed_tools: null,
            require_approval: { never: { tool_names: ["read"] } },
            timeout_ms: 60_000,
          },
          {
            label: "docs",
            url: URL_A,
            headers: { authorization: SECRET },
            allowed_tools: ["fetch"],
            // The reference's `never` cannot waive what the registration asks for.
            require_approval: { never: { tool_names: ["search", "fetch"] } },
            timeout_ms: 10_000,
          },
        ],
        unavailable: [
          { label: "missing", reason: 'no MCP server "missing" is registered' },
          { label: "ops", reason: 'server_url is not the URL registered for "ops"' },
        ],
      },
    });
    // A caller of another incarnation (a stale key or thread) resolves nothing.
    const stale = await stub.resolveMcpServers({ incarnation: "old" }, [{ label: "docs" }]);
    expect(stale).toMatchObject({ ok: false, error: { code: "unauthorized" } });
  });

  it("a deleted tenant's servers go with it: the id created again resolves none and lists none", async () => {
    const { tenant, key } = await tenantWithKey();
    await json(
      await register(key, { label: "docs", url: URL_A, headers: { "X-K": "gone-cred" } }),
      201,
    );
    const before = await incarnationOf(tenant.id);
    await json(await api("DELETE", `/v1/admin/tenants/${tenant.id}`, undefined, ADMIN_KEY), 202);
    const object = env.TENANT.getByName(tenant.id);
    const stub = object as unknown as TenantRpc;
    // Refused while it is being deleted, to its own incarnation too.
    const deleting = await stub.resolveMcpServers({ incarnation: before }, [{ label: "docs" }]);
    expect(deleting).toMatchObject({ ok: false, error: { code: "unauthorized" } });
    // No thread to delete: the deletion's first alarm run ends it.
    await vi.waitFor(
      async () => {
        await runDurableObjectAlarm(object);
        const tenantNow = await api("GET", `/v1/admin/tenants/${tenant.id}`, undefined, ADMIN_KEY);
        expect(tenantNow.status).toBe(404);
      },
      { timeout: 10_000, interval: 50 },
    );
    const rows = await runInDurableObject(object, (_, state) =>
      state.storage.sql.exec("SELECT * FROM tenant_mcp_servers").toArray(),
    );
    expect(rows).toEqual([]);
    await json(await api("POST", "/v1/admin/tenants", { id: tenant.id }, ADMIN_KEY), 201);
    const { key: again } = await createKey(tenant.id);
    const page = await json<{ data: unknown[] }>(
      await api("GET", "/v1/mcp-servers", undefined, again),
    );
    expect(page.data).toEqual([]);
    const now = await incarnationOf(tenant.id);
    expect(now).not.toBe(before);
    const resolved = await stub.resolveMcpServers({ incarnation: now }, [{ label: "docs" }]);
    expect(resolved).toMatchObject({
      ok: true,
      value: { servers: [], unavailable: [{ label: "docs" }] },
    });
  });
});

describe("the tenant schema step that added the MCP servers", () => {
  it("gave `tools` to the keys that held every scope before it, and to no other", async () => {
    const { tenant } = await tenantWithKey();
    const scopes = await runInDurableObject(env.TENANT.getByName(tenant.id), (_, state) => {
      const sql = state.storage.sql;
      // The object as it was before the step: its table absent, keys of the four scopes.
      const step = TENANT_MIGRATIONS.length - 1;
      sql.exec("DROP TABLE tenant_mcp_servers");
      sql.exec("UPDATE spindle_schema SET version = ?", step);
      sql.exec("DELETE FROM tenant_keys");
      const put = (id: string, keyScopes: string[]) =>
        sql.exec(
          "INSERT INTO tenant_keys (id, digest, body, created_at) VALUES (?, ?, ?, ?)",
          id,
          new Uint8Array(32),
          JSON.stringify({ object: "api_key", id, name: null, scopes: keyScopes }),
          `2026-01-01T00:00:0${id.length}.000Z`,
        );
      put("k_all", ["threads", "hooks", "keys", "usage"]);
      put("k_shuffled", ["usage", "keys", "threads", "hooks"]);
      put("k_some", ["threads", "usage"]);
      migrate(sql, TENANT_MIGRATIONS);
      return Object.fromEntries(
        sql
          .exec<{ id: string; body: string }>("SELECT id, body FROM tenant_keys")
          .toArray()
          .map((row) => [row.id, (JSON.parse(row.body) as { scopes: string[] }).scopes]),
      );
    });
    expect(scopes).toEqual({
      k_all: ["threads", "hooks", "keys", "usage", "tools"],
      k_shuffled: ["usage", "keys", "threads", "hooks", "tools"],
      k_some: ["threads", "usage"],
    });
  });
});

describe("a hook's thread_config", () => {
  it("names MCP servers, by label, by reference and inline; the thread it creates has them", async () => {
    const thread_config = {
      mcp_servers: [
        "docs",
        { label: "ops", allowed_tools: ["status"], require_approval: "always" },
      ],
      tools: [{ type: "mcp", server_label: "inline", server_url: URL_A, allowed_tools: ["a"] }],
    };
    const hook = await createHook("standard", { thread: "mcp-{{body.thread}}", thread_config });
    const stored = await json<{ thread_config: unknown }>(await api("GET", `/v1/hooks/${hook.id}`));
    expect(stored.thread_config).toMatchObject(thread_config);
    const thread = `t${crypto.randomUUID().slice(0, 8)}`;
    const accepted = await json<{ thread_id: string }>(await signedDelivery(hook, { thread }), 202);
    const created = await json<{ config: { mcp_servers?: unknown; tools: unknown[] } }>(
      await api("GET", `/v1/threads/${accepted.thread_id}`),
    );
    expect(created.config.mcp_servers).toEqual([
      { label: "docs" },
      { label: "ops", allowed_tools: ["status"], require_approval: "always" },
      { label: "inline", url: URL_A, allowed_tools: ["a"] },
    ]);
    expect(created.config.tools).toEqual([]);
    // A reference the schema refuses is refused at the hook's create, at its field.
    const bad = await api("POST", "/v1/hooks", {
      verify: { scheme: "standard" },
      thread: "x",
      thread_config: { mcp_servers: ["not a label"] },
    });
    expect(await json<Problem>(bad, 400)).toMatchObject({ code: "invalid_request" });
  });
});
