/**
 * Server-side MCP tools (design §16, invariants 15-17) through the running service: a thread
 * names the tenant's registered server, its turns call the server's tools with no client, hold
 * calls for approval, go on without a server that cannot be reached, and read back, export and
 * import like any thread; the server's credential appears in no answer, event, line or log.
 * The MCP server is the SDK's own (`test/helpers/mcp-server.ts`), reached through this isolate's
 * `fetch` at a loopback URL.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, importRollout, json, newThreadId, readSse } from "../helpers/api.ts";
import { createHook, signedDelivery } from "../helpers/hooks.ts";
import { MCP_TOKEN, mcpNetwork, registerMcpServer } from "../helpers/mcp.ts";
import { RECEIVER_URL } from "../helpers/receiver.ts";
import { tenantWithKey } from "../helpers/tenancy.ts";
import type { Item, Prompt, Turn } from "../helpers/turns.ts";

const URL = "http://127.0.0.1:9/mcp";

afterEach(() => {
  vi.restoreAllMocks();
});

interface McpTurn extends Turn {
  pending_approvals?: {
    type: string;
    id: string;
    server_label: string;
    name: string;
    arguments: string;
    call_id: string;
  }[];
  warnings?: { code: string; server_label: string; message: string }[];
}

/** A fresh tenant with `docs` registered, and a thread of it that names `docs`. */
async function threadWithDocs(registration: Record<string, unknown> = {}, config = {}) {
  const { key, tenant } = await tenantWithKey();
  await registerMcpServer(key, "docs", URL, { require_approval: "never", ...registration });
  const id = newThreadId();
  await json(await api("POST", "/v1/threads", { id, mcp_servers: ["docs"], ...config }, key), 201);
  const turn = async (input: string) =>
    json<McpTurn>(await api("POST", `/v1/threads/${id}/turns`, { input }, key));
  const answer = async (turnId: string, items: unknown[], status = 200) =>
    json<McpTurn>(
      await api("POST", `/v1/threads/${id}/turns/${turnId}/outputs`, { items }, key),
      status,
    );
  const get = async <T>(path: string) =>
    json<T>(await api("GET", `/v1/threads/${id}${path}`, undefined, key));
  return { key, tenant, id, turn, answer, get };
}

/** The thread's events from the first, as SSE text, up to the end of `turnId`. */
async function eventsThrough(key: string, id: string, turnId: string): Promise<string> {
  const res = await api("GET", `/v1/threads/${id}/events`, undefined, key, {
    "last-event-id": "0",
  });
  const frames = await readSse(res, (seen) =>
    seen.some((f) => f.event === "turn.completed" && f.data.includes(turnId)),
  );
  return frames.map((f) => `${f.event} ${f.data}`).join("\n");
}

const outputs = (items: Item[]) => items.filter((i) => i.type === "function_call_output");

describe("a thread with an MCP server", () => {
  it("calls a tool with no client and completes; the prompt lists the server's tools", async () => {
    const net = mcpNetwork(URL);
    const t = await threadWithDocs();
    const before = await t.get<Prompt & { tools: { name: string }[] }>("/prompt");
    expect(before.tools.map((x) => x.name)).toEqual([
      "mcp__docs__chart",
      "mcp__docs__echo",
      "mcp__docs__fail",
      "mcp__docs__grow",
      "mcp__docs__slow",
    ]);
    const done = await t.turn('/call mcp__docs__echo {"text":"from the server"}');
    expect(done.status).toBe("completed");
    expect(done.pending_calls).toEqual([]);
    expect(outputs(done.items)).toMatchObject([
      { output: '[{"type":"text","text":"echo: from the server"}]' },
    ]);
    expect(net.server.calls.get("echo")).toBe(1);
    // Every request to the server carried its credential.
    expect(
      net.server.requests.every((r) => r.headers.get("authorization") === `Bearer ${MCP_TOKEN}`),
    ).toBe(true);
    // The session is kept for the thread's next turn: one initialize for both.
    await t.turn('/call mcp__docs__echo {"text":"again"}');
    const inits = net.server.requests.filter((r) => r.body.includes('"initialize"'));
    expect(inits).toHaveLength(1);
    expect(net.server.calls.get("echo")).toBe(2);
  });

  it("a tool's failure, image and list_changed reach the model; new tools join the next step", async () => {
    const net = mcpNetwork(URL);
    const t = await threadWithDocs();
    const failed = await t.turn("/call mcp__docs__fail {}");
    expect(failed.status).toBe("completed");
    expect(JSON.stringify(outputs(failed.items))).toContain("the upstream is down");
    const chart = await t.turn("/call mcp__docs__chart {}");
    expect(outputs(chart.items)[0]).toMatchObject({
      output: [{ type: "input_text", text: "a chart" }, { type: "input_image" }],
    });
    await t.turn("/call mcp__docs__grow {}");
    const prompt = await t.get<{ tools: { name: string }[] }>("/prompt");
    expect(prompt.tools.map((x) => x.name)).toContain("mcp__docs__grown");
    expect(net.server.calls.get("grow")).toBe(1);
  });

  it("require_approval holds the call: approved it runs once, denied it never runs", async () => {
    const net = mcpNetwork(URL);
    const t = await threadWithDocs({ require_approval: "always" });
    const paused = await t.turn('/call mcp__docs__echo {"text":"may I"}');
    expect(paused.status).toBe("requires_action");
    const [request] = paused.pending_approvals ?? [];
    expect(request).toEqual({
      type: "mcp_approval_request",
      id: expect.stringMatching(/^mcpr_/),
      server_label: "docs",
      name: "echo",
      arguments: '{"text":"may I"}',
      call_id: paused.pending_calls[0]?.call_id,
    });
    expect(net.server.calls.get("echo")).toBeUndefined();
    // A function_call_output cannot answer a held server call; an unknown request id is refused.
    const wrong = await t.answer(
      paused.id,
      [{ type: "function_call_output", call_id: request?.call_id, output: "forged" }],
      400,
    );
    expect(wrong).toMatchObject({ code: "unknown_call_id" });
    const unknown = await t.answer(
      paused.id,
      [{ type: "mcp_approval_response", approval_request_id: "mcpr_nope", approve: true }],
      400,
    );
    expect(unknown).toMatchObject({ code: "unknown_call_id" });
    // The paused turn reads back with its request.
    const read = await t.get<McpTurn>(`/turns/${paused.id}`);
    expect(read.pending_approvals).toEqual([request]);

    const done = await t.answer(paused.id, [
      { type: "mcp_approval_response", approval_request_id: request?.id, approve: true },
    ]);
    expect(done.status).toBe("completed");
    expect(done.pending_approvals).toBeUndefined();
    expect(net.server.calls.get("echo")).toBe(1);
    const again = await t.answer(
      paused.id,
      [{ type: "mcp_approval_response", approval_request_id: request?.id, approve: true }],
      409,
    );
    expect(again).toMatchObject({ code: "no_pending_calls" });
    expect(net.server.calls.get("echo")).toBe(1);

    const second = await t.turn('/call mcp__docs__echo {"text":"and this"}');
    const denied = await t.answer(second.id, [
      {
        type: "mcp_approval_response",
        approval_request_id: second.pending_approvals?.[0]?.id,
        approve: false,
        reason: "too risky",
      },
    ]);
    expect(denied.status).toBe("completed");
    expect(JSON.stringify(outputs(denied.items))).toContain("too risky");
    expect(net.server.calls.get("echo")).toBe(1);
  });

  it("a turn paused on an approval is rebuilt by a restore from its lines, and the approval still runs the call once", async () => {
    const net = mcpNetwork(URL, ["http://127.0.0.1:9/down"]);
    const t = await threadWithDocs({ require_approval: "always" });
    await registerMcpServer(t.key, "gone", "http://127.0.0.1:9/down");
    await json(
      await api(
        "POST",
        `/v1/threads/${t.id}/turns`,
        { input: "hello", overrides: { mcp_servers: ["docs", "gone"] } },
        t.key,
      ),
    );
    const paused = await t.turn('/call mcp__docs__echo {"text":"after a restore"}');
    expect(paused.status).toBe("requires_action");
    expect(paused.warnings?.map((w) => w.server_label)).toEqual(["gone"]);
    await json(await api("POST", `/v1/threads/${t.id}/restore`, undefined, t.key));
    const restored = await t.get<McpTurn>(`/turns/${paused.id}`);
    expect(restored.status).toBe("requires_action");
    expect(restored.pending_calls).toEqual(paused.pending_calls);
    expect(restored.pending_approvals).toEqual(paused.pending_approvals);
    expect(restored.warnings).toEqual(paused.warnings);
    const done = await t.answer(paused.id, [
      {
        type: "mcp_approval_response",
        approval_request_id: paused.pending_approvals?.[0]?.id,
        approve: true,
      },
    ]);
    expect(done.status).toBe("completed");
    expect(net.server.calls.get("echo")).toBe(1);
    expect((await t.get<McpTurn>(`/turns/${paused.id}`)).pending_approvals).toBeUndefined();
  });

  it("an unreachable or unregistered server leaves its tools out with a warning; the turn completes", async () => {
    mcpNetwork(URL, ["http://127.0.0.1:9/down"]);
    const t = await threadWithDocs();
    await registerMcpServer(t.key, "gone", "http://127.0.0.1:9/down");
    const id = newThreadId();
    await json(
      await api("POST", "/v1/threads", { id, mcp_servers: ["gone", "nobody"] }, t.key),
      201,
    );
    const res = await api(
      "POST",
      `/v1/threads/${id}/turns`,
      { input: "/call mcp__gone__echo {}" },
      t.key,
    );
    const done = await json<McpTurn>(res);
    expect(done.status).toBe("completed");
    expect(done.warnings?.map((w) => [w.code, w.server_label])).toEqual([
      ["mcp_server_unavailable", "nobody"],
      ["mcp_server_unavailable", "gone"],
    ]);
    const events = await eventsThrough(t.key, id, done.id);
    expect(events).toContain('"turn.warning"');
    // Read back from storage, the turn keeps its warnings.
    const read = await json<McpTurn>(
      await api("GET", `/v1/threads/${id}/turns/${done.id}`, undefined, t.key),
    );
    expect(read.warnings).toEqual(done.warnings);
  });

  it("another tenant's thread cannot use the server: its label resolves to nothing there", async () => {
    const net = mcpNetwork(URL);
    await threadWithDocs();
    const other = await tenantWithKey();
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id, mcp_servers: ["docs"] }, other.key), 201);
    const done = await json<McpTurn>(
      await api(
        "POST",
        `/v1/threads/${id}/turns`,
        { input: "/call mcp__docs__echo {}" },
        other.key,
      ),
    );
    expect(done.warnings?.[0]).toMatchObject({
      code: "mcp_server_unavailable",
      server_label: "docs",
    });
    expect(net.server.calls.get("echo")).toBeUndefined();
  });

  it("exports and imports like any thread, and the credential is in no answer, line or log", async () => {
    const logged: string[] = [];
    for (const level of ["log", "info", "warn", "error", "debug"] as const) {
      vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
        logged.push(args.map(String).join(" "));
      });
    }
    mcpNetwork(URL);
    const t = await threadWithDocs({ require_approval: { never: { tool_names: ["echo"] } } });
    await t.turn('/call mcp__docs__echo {"text":"kept"}');
    const paused = await t.turn("/call mcp__docs__chart {}");
    await t.answer(paused.id, [
      {
        type: "mcp_approval_response",
        approval_request_id: paused.pending_approvals?.[0]?.id,
        approve: true,
      },
    ]);
    const rollout = await (
      await api("GET", `/v1/threads/${t.id}/rollout`, undefined, t.key)
    ).text();
    expect(rollout).toContain("mcp_tool_call_begin");
    const history = await t.get<{ data: Item[] }>("/history?limit=1000");
    const events = await eventsThrough(t.key, t.id, paused.id);
    const thread = await t.get<Record<string, unknown>>("");
    const servers = await (await api("GET", "/v1/mcp-servers", undefined, t.key)).text();
    for (const text of [
      rollout,
      JSON.stringify(history),
      events,
      JSON.stringify(thread),
      servers,
      ...logged,
    ]) {
      expect(text).not.toContain(MCP_TOKEN);
    }

    // Imported as a new thread, it reads back the same history (invariant 17).
    const copy = newThreadId();
    const res = await importRollout(copy, rollout, {}, { key: t.key });
    expect(res.status).toBe(201);
    const copied = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${copy}/history?limit=1000`, undefined, t.key),
    );
    expect(copied.data.map(strip)).toEqual(history.data.map(strip));
  });
});

describe("quotas", () => {
  it("the round after a server call reserves its request: refused while other turns hold the rest, the turn fails quota_exceeded", async () => {
    const net = mcpNetwork(URL);
    // Room for two turns of the local model (about 4,400 tokens reserved each), not a third request.
    const { key } = await tenantWithKey({ quotas: { tokens_per_day: 10_000 } });
    await registerMcpServer(key, "docs", URL, { require_approval: "never" });
    const [a, b] = [newThreadId(), newThreadId()];
    await json(await api("POST", "/v1/threads", { id: a, mcp_servers: ["docs"] }, key), 201);
    await json(await api("POST", "/v1/threads", { id: b }, key), 201);
    const calling = api(
      "POST",
      `/v1/threads/${a}/turns`,
      { input: '/call mcp__docs__slow {"ms":400}' },
      key,
    );
    await vi.waitUntil(() => net.server.calls.get("slow") === 1, { timeout: 5_000, interval: 10 });
    const holding = api(
      "POST",
      `/v1/threads/${b}/turns`,
      { input: "/slow 300 hold the rest" },
      key,
    );
    const failed = await json<McpTurn & { error: { code: string } | null }>(await calling);
    expect(failed.status).toBe("failed");
    expect(failed.error?.code).toBe("quota_exceeded");
    expect(outputs(failed.items)).toHaveLength(1);
    expect(net.server.calls.get("slow")).toBe(1);
    expect((await json<McpTurn>(await holding)).status).toBe("completed");
  });
});

describe("a webhook-started turn", () => {
  it("calls an MCP tool with nobody watching, and its turn.completed event arrives", async () => {
    const net = mcpNetwork(URL);
    const { key } = await tenantWithKey();
    await registerMcpServer(key, "docs", URL, {
      require_approval: { never: { tool_names: ["echo"] } },
    });
    await json(
      await api(
        "POST",
        "/v1/webhook-endpoints",
        { url: RECEIVER_URL, events: ["turn.completed", "turn.requires_action"] },
        key,
      ),
      201,
    );
    const hook = await createHook(
      "standard",
      {
        input: '/call mcp__docs__echo {"text":"{{body.text}}"}',
        thread_config: { mcp_servers: ["docs"] },
      },
      key,
    );
    const accepted = await json<{ turn_id: string; thread_id: string }>(
      await signedDelivery(hook, { thread: "x1", text: "from a hook" }),
      202,
    );
    await vi.waitUntil(() => net.webhooks.some((b) => b.includes(accepted.turn_id)), {
      timeout: 10_000,
      interval: 50,
    });
    const event = JSON.parse(net.webhooks.find((b) => b.includes(accepted.turn_id)) ?? "{}");
    expect(event).toMatchObject({ type: "turn.completed", data: { turn_id: accepted.turn_id } });
    expect(net.server.calls.get("echo")).toBe(1);
    const turn = await json<McpTurn>(
      await api(
        "GET",
        `/v1/threads/${accepted.thread_id}/turns/${accepted.turn_id}`,
        undefined,
        key,
      ),
    );
    expect(JSON.stringify(outputs(turn.items))).toContain("echo: from a hook");

    // A call that needs approval: the turn.requires_action event carries the request.
    const paused = await json<McpTurn>(
      await api(
        "POST",
        `/v1/threads/${accepted.thread_id}/turns`,
        { input: "/call mcp__docs__chart {}" },
        key,
      ),
    );
    expect(paused.status).toBe("requires_action");
    await vi.waitUntil(() => net.webhooks.some((b) => b.includes(paused.id)), {
      timeout: 10_000,
      interval: 50,
    });
    const requires = JSON.parse(net.webhooks.find((b) => b.includes(paused.id)) ?? "{}");
    expect(requires).toMatchObject({
      type: "turn.requires_action",
      data: { pending_approvals: paused.pending_approvals },
    });
    expect(paused.pending_approvals?.[0]).toMatchObject({ server_label: "docs", name: "chart" });
    for (const body of net.webhooks) expect(body).not.toContain(MCP_TOKEN);
  });
});

/** An item without the ids and turn stamps an import assigns afresh. */
function strip(item: Item): unknown {
  const {
    id: _id,
    internal_chat_message_metadata_passthrough: _meta,
    ...rest
  } = item as Item & {
    id?: string;
    internal_chat_message_metadata_passthrough?: unknown;
  };
  return rest;
}
