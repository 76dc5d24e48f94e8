import { describe, expect, it } from "vitest";
import { API_ROUTES, type OperationId } from "../../../worker/routes.ts";
import { api, importRollout, json, newThreadId } from "../helpers/api.ts";
import { tenantWithKey, threadObjectOf } from "../helpers/tenancy.ts";

interface Victim {
  tenant: string;
  key: string;
  keyId: string;
  thread: string;
  /** A second thread of the first tenant, whose id the second tenant's import takes. */
  other: string;
  turn: string;
  callTurn: string;
  callId: string;
  hook: string;
  endpoint: string;
  mcpServer: string;
}

/** What the second tenant's request does, and what it must get. */
interface Probe {
  path: (v: Victim) => string;
  body?: (v: Victim) => unknown;
  /** `denied`: 404 or 403. `own`: it acts on the caller's own tenant, and shows none of the victim. */
  expect: "denied" | "own";
}

const item = (v: Victim) => [{ type: "function_call_output", call_id: v.callId, output: "x" }];

/** A rollout of the second tenant's own, for its import. */
const OWN_ROLLOUT = `${JSON.stringify({
  timestamp: "2026-01-01T00:00:00.000Z",
  type: "session_meta",
  payload: { id: "b-own", cwd: "/b" },
})}\n`;

/** One probe per `/v1` route; the test checks that the table has no other. */
const PROBES: Record<Exclude<OperationId, "health" | "openApiDocument" | "deliverHook">, Probe> = {
  createThread: { path: () => "/v1/threads", body: (v) => ({ id: v.thread }), expect: "own" },
  importThread: { path: (v) => `/v1/threads/import?id=${v.other}`, expect: "own" },
  getThread: { path: (v) => `/v1/threads/${v.thread}`, expect: "denied" },
  listThreads: { path: () => "/v1/threads", expect: "own" },
  patchThread: {
    path: (v) => `/v1/threads/${v.thread}`,
    body: () => ({ metadata: { owner: "mallory" } }),
    expect: "denied",
  },
  deleteThread: { path: (v) => `/v1/threads/${v.thread}`, expect: "denied" },
  startTurn: {
    path: (v) => `/v1/threads/${v.thread}/turns`,
    body: () => ({ input: "hi" }),
    expect: "denied",
  },
  listTurns: { path: (v) => `/v1/threads/${v.thread}/turns`, expect: "denied" },
  getTurn: { path: (v) => `/v1/threads/${v.thread}/turns/${v.turn}`, expect: "denied" },
  listTurnRequests: {
    path: (v) => `/v1/threads/${v.thread}/turns/${v.turn}/requests`,
    expect: "denied",
  },
  submitOutputs: {
    path: (v) => `/v1/threads/${v.thread}/turns/${v.callTurn}/outputs`,
    body: (v) => ({ items: item(v) }),
    expect: "denied",
  },
  steerTurn: {
    path: (v) => `/v1/threads/${v.thread}/turns/${v.turn}/steer`,
    body: () => ({ input: "hi" }),
    expect: "denied",
  },
  interruptTurn: {
    path: (v) => `/v1/threads/${v.thread}/turns/${v.callTurn}/interrupt`,
    expect: "denied",
  },
  getEvents: { path: (v) => `/v1/threads/${v.thread}/events?after=0`, expect: "denied" },
  rollbackThread: {
    path: (v) => `/v1/threads/${v.thread}/rollback`,
    body: () => ({ turns: 1 }),
    expect: "denied",
  },
  forkThread: { path: (v) => `/v1/threads/${v.thread}/fork`, body: () => ({}), expect: "denied" },
  compactThread: { path: (v) => `/v1/threads/${v.thread}/compact`, expect: "denied" },
  injectItems: {
    path: (v) => `/v1/threads/${v.thread}/inject`,
    body: () => ({ text: "hi" }),
    expect: "denied",
  },
  listHistory: { path: (v) => `/v1/threads/${v.thread}/history`, expect: "denied" },
  getPrompt: { path: (v) => `/v1/threads/${v.thread}/prompt`, expect: "denied" },
  exportRollout: { path: (v) => `/v1/threads/${v.thread}/rollout`, expect: "denied" },
  restoreThread: { path: (v) => `/v1/threads/${v.thread}/restore`, expect: "denied" },
  getUsage: { path: () => "/v1/usage?group_by=thread", expect: "own" },
  createKey: { path: () => "/v1/keys", body: () => ({}), expect: "own" },
  listKeys: { path: () => "/v1/keys", expect: "own" },
  revokeKey: { path: (v) => `/v1/keys/${v.keyId}`, expect: "denied" },
  createTenant: {
    path: () => "/v1/admin/tenants",
    body: (v) => ({ id: `${v.tenant}x` }),
    expect: "denied",
  },
  listTenants: { path: () => "/v1/admin/tenants", expect: "denied" },
  getTenant: { path: (v) => `/v1/admin/tenants/${v.tenant}`, expect: "denied" },
  patchTenant: {
    path: (v) => `/v1/admin/tenants/${v.tenant}`,
    body: () => ({ name: "x" }),
    expect: "denied",
  },
  deleteTenant: { path: (v) => `/v1/admin/tenants/${v.tenant}`, expect: "denied" },
  createTenantKey: {
    path: (v) => `/v1/admin/tenants/${v.tenant}/keys`,
    body: () => ({}),
    expect: "denied",
  },
  listTenantKeys: { path: (v) => `/v1/admin/tenants/${v.tenant}/keys`, expect: "denied" },
  revokeTenantKey: {
    path: (v) => `/v1/admin/tenants/${v.tenant}/keys/${v.keyId}`,
    expect: "denied",
  },
  // A hook id is the tenant's own: the second tenant may create one of the same id.
  createHook: {
    path: () => "/v1/hooks",
    body: (v) => ({ id: v.hook, verify: { scheme: "github" }, thread: "x" }),
    expect: "own",
  },
  listHooks: { path: () => "/v1/hooks", expect: "own" },
  getHook: { path: (v) => `/v1/hooks/${v.hook}`, expect: "denied" },
  deleteHook: { path: (v) => `/v1/hooks/${v.hook}`, expect: "denied" },
  rotateHookSecret: { path: (v) => `/v1/hooks/${v.hook}/rotate-secret`, expect: "denied" },
  listHookDeliveries: { path: (v) => `/v1/hooks/${v.hook}/deliveries`, expect: "denied" },
  createEndpoint: {
    path: () => "/v1/webhook-endpoints",
    body: () => ({ url: "http://127.0.0.1:9/b", events: ["turn.completed"] }),
    expect: "own",
  },
  listEndpoints: { path: () => "/v1/webhook-endpoints", expect: "own" },
  getEndpoint: { path: (v) => `/v1/webhook-endpoints/${v.endpoint}`, expect: "denied" },
  patchEndpoint: {
    path: (v) => `/v1/webhook-endpoints/${v.endpoint}`,
    body: () => ({ disabled: true }),
    expect: "denied",
  },
  deleteEndpoint: { path: (v) => `/v1/webhook-endpoints/${v.endpoint}`, expect: "denied" },
  rotateEndpointSecret: {
    path: (v) => `/v1/webhook-endpoints/${v.endpoint}/rotate-secret`,
    expect: "denied",
  },
  testEndpoint: { path: (v) => `/v1/webhook-endpoints/${v.endpoint}/test`, expect: "denied" },
  listEndpointDeliveries: {
    path: (v) => `/v1/webhook-endpoints/${v.endpoint}/deliveries`,
    expect: "denied",
  },
  // A label is the tenant's own, like a hook id: the second tenant may register one of its own.
  createMcpServer: {
    path: () => "/v1/mcp-servers",
    body: (v) => ({ label: v.mcpServer, url: "http://127.0.0.1:9/b-mcp" }),
    expect: "own",
  },
  listMcpServers: { path: () => "/v1/mcp-servers", expect: "own" },
  getMcpServer: { path: (v) => `/v1/mcp-servers/${v.mcpServer}`, expect: "denied" },
  patchMcpServer: {
    path: (v) => `/v1/mcp-servers/${v.mcpServer}`,
    body: () => ({ timeout_ms: 1000 }),
    expect: "denied",
  },
  deleteMcpServer: { path: (v) => `/v1/mcp-servers/${v.mcpServer}`, expect: "denied" },
  createResponse: {
    path: () => "/v1/responses",
    body: (v) => ({ input: "hi", previous_response_id: responseOf(v) }),
    expect: "denied",
  },
  getResponse: { path: (v) => `/v1/responses/${responseOf(v)}`, expect: "denied" },
  deleteResponse: { path: (v) => `/v1/responses/${responseOf(v)}`, expect: "denied" },
  cancelResponse: { path: (v) => `/v1/responses/${responseOf(v)}/cancel`, expect: "denied" },
  listInputItems: { path: (v) => `/v1/responses/${responseOf(v)}/input_items`, expect: "denied" },
  createConversation: { path: () => "/v1/conversations", body: () => ({}), expect: "own" },
  getConversation: { path: (v) => `/v1/conversations/${v.thread}`, expect: "denied" },
  updateConversation: {
    path: (v) => `/v1/conversations/${v.thread}`,
    body: () => ({ metadata: { owner: "mallory" } }),
    expect: "denied",
  },
  deleteConversation: { path: (v) => `/v1/conversations/${v.thread}`, expect: "denied" },
  listConversationItems: { path: (v) => `/v1/conversations/${v.thread}/items`, expect: "denied" },
  addConversationItems: {
    path: (v) => `/v1/conversations/${v.thread}/items`,
    body: () => ({ items: [{ role: "user", content: "injected" }] }),
    expect: "denied",
  },
  getConversationItem: {
    path: (v) => `/v1/conversations/${v.thread}/items/item_0`,
    expect: "denied",
  },
  deleteConversationItem: {
    path: (v) => `/v1/conversations/${v.thread}/items/item_0`,
    expect: "denied",
  },
  listModels: { path: () => "/v1/models", expect: "own" },
  getModel: { path: () => "/v1/models/spindle-local", expect: "own" },
};

/** The victim's first turn, as the OpenAI surface names it. */
const responseOf = (v: Victim) => `resp_${v.thread}.${v.turn}.0.1`;

/** What the first tenant can see of itself, to compare before and after. */
async function snapshotOf(v: Victim) {
  const get = async (path: string) => (await api("GET", path, undefined, v.key)).text();
  return {
    thread: await get(`/v1/threads/${v.thread}`),
    rollout: await get(`/v1/threads/${v.thread}/rollout`),
    turn: await get(`/v1/threads/${v.thread}/turns/${v.turn}`),
    keys: await get("/v1/keys"),
    hooks: await get("/v1/hooks"),
    endpoints: await get("/v1/webhook-endpoints"),
    mcpServers: await get("/v1/mcp-servers"),
  };
}

describe("invariant 10: a second tenant's key against the first tenant's resources", () => {
  it("every /v1 route answers 404 or 403, or shows only the caller's own, and changes nothing", async () => {
    const a = await tenantWithKey();
    const b = await tenantWithKey();
    const thread = newThreadId();
    await json(
      await api(
        "POST",
        "/v1/threads",
        { id: thread, tools: [{ name: "lookup", description: "search" }], metadata: { team: "a" } },
        a.key,
      ),
      201,
    );
    const turn = await json<{ id: string }>(
      await api("POST", `/v1/threads/${thread}/turns`, { input: "a's secret" }, a.key),
    );
    const paused = await json<{ id: string; pending_calls: { call_id: string }[] }>(
      await api("POST", `/v1/threads/${thread}/turns`, { input: "/call lookup {}" }, a.key),
    );
    const other = newThreadId();
    await json(await api("POST", "/v1/threads", { id: other }, a.key), 201);
    const hook = await json<{ id: string }>(
      await api("POST", "/v1/hooks", { verify: { scheme: "github" }, thread: "gh" }, a.key),
      201,
    );
    const endpoint = await json<{ id: string }>(
      await api(
        "POST",
        "/v1/webhook-endpoints",
        { url: "http://127.0.0.1:9/a", events: ["thread.created"] },
        a.key,
      ),
      201,
    );
    const mcpServer = await json<{ label: string }>(
      await api(
        "POST",
        "/v1/mcp-servers",
        { label: "a-docs", url: "http://127.0.0.1:9/a-mcp", headers: { "X-Api-Key": "a-cred" } },
        a.key,
      ),
      201,
    );
    const victim: Victim = {
      tenant: a.tenant.id,
      key: a.key,
      keyId: a.keyId,
      thread,
      other,
      turn: turn.id,
      callTurn: paused.id,
      callId: paused.pending_calls[0]?.call_id ?? "",
      hook: hook.id,
      endpoint: endpoint.id,
      mcpServer: mcpServer.label,
    };
    const before = await snapshotOf(victim);

    const documented = Object.entries(API_ROUTES)
      .filter(([, route]) => route.access !== "public")
      .map(([id]) => id)
      .sort();
    expect(Object.keys(PROBES).sort()).toEqual(documented);

    const answers: Record<string, number> = {};
    // The denied ones first: afterwards the second tenant holds a thread of the same id, its own.
    const ordered = Object.entries(PROBES).sort(
      ([, x], [, y]) => Number(x.expect === "own") - Number(y.expect === "own"),
    );
    for (const [operation, probe] of ordered) {
      const route = API_ROUTES[operation as OperationId];
      const path = probe.path(victim);
      const res =
        operation === "importThread"
          ? await importRollout(victim.other, OWN_ROLLOUT, {}, { key: b.key })
          : await api(route.method.toUpperCase(), path, probe.body?.(victim), b.key);
      const text = await res.text();
      answers[operation] = res.status;
      if (probe.expect === "denied") {
        expect({ operation, status: res.status }).toEqual({
          operation,
          status: [403, 404].includes(res.status) ? res.status : "404 or 403",
        });
        expect(text).not.toContain("a's secret");
      } else {
        expect({ operation, ok: res.status < 300 }).toEqual({ operation, ok: true });
        // Nothing of the first tenant's: its texts, key, tenant, turns, endpoint, MCP server's
        // URL and credential (its hook id and server label are taken by the second tenant's own).
        for (const mark of [
          "a's secret",
          victim.keyId,
          victim.tenant,
          victim.turn,
          victim.callTurn,
          victim.endpoint,
          "127.0.0.1:9/a",
          "a-cred",
        ]) {
          expect({ operation, leaks: text.includes(mark) ? mark : null }).toEqual({
            operation,
            leaks: null,
          });
        }
        // The second tenant ran no turn: a usage answer with any bucket is the first's.
        if (operation === "getUsage") expect(JSON.parse(text).data).toEqual([]);
      }
    }
    // The caller's own collections hold none of the victim's.
    const bThreads = await json<{ data: { id: string; metadata: Record<string, string> }[] }>(
      await api("GET", "/v1/threads?metadata[team]=a", undefined, b.key),
    );
    expect(bThreads.data).toEqual([]);
    // A thread of the same id in the second tenant is the second tenant's own, not the first's.
    const bCopy = await json<{ turn_count: number; metadata: Record<string, string> }>(
      await api("GET", `/v1/threads/${victim.thread}`, undefined, b.key),
    );
    expect(bCopy.metadata).toEqual({});
    expect(await snapshotOf(victim)).toEqual(before);
    // The first tenant's objects are the ones named after it; the second's are apart.
    const stubA = await threadObjectOf(victim.tenant, victim.thread);
    expect(await stubA.getThread()).toMatchObject({ ok: true, value: { metadata: { team: "a" } } });
    expect(Object.values(answers).every((status) => status !== 500)).toBe(true);
  });
});
