/**
 * Every problem code of the one vocabulary (`shared/api/problems.ts`) is produced, over HTTP,
 * by the running service: one case per code, and a check that the cases cover the list exactly,
 * so a code cannot be advertised without being produced and tested.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import {
  PROBLEM_CODES,
  type ProblemCode,
  problemStatus,
  tenantLimits,
} from "../../../shared/api/index.ts";
import {
  api,
  DEV_KEY,
  importRollout,
  json,
  newThreadId,
  post,
  untilRunning,
} from "../helpers/api.ts";
import { createHook, deliver, signedHeaders } from "../helpers/hooks.ts";
import { ADMIN_KEY, createKey, createTenant, tenantWithKey } from "../helpers/tenancy.ts";

const covered = new Set<ProblemCode>();

/** Asserts `res` is the problem document of `code`, with the code's status. */
async function expectProblem(res: Response, code: ProblemCode): Promise<void> {
  const body = (await res.json()) as { code?: string; status?: number };
  expect({ status: res.status, code: body.code, bodyStatus: body.status }).toEqual({
    status: problemStatus(code),
    code,
    bodyStatus: problemStatus(code),
  });
  expect(res.headers.get("content-type")).toBe("application/problem+json");
  covered.add(code);
}

async function newThread(config: Record<string, unknown> = {}): Promise<string> {
  const id = newThreadId();
  await json(await post("/v1/threads", { id, ...config }), 201);
  return id;
}

interface Turn {
  id: string;
  status: string;
  pending_calls: { call_id: string }[];
  error: { code: string } | null;
}

const TOOL = { name: "lookup", description: "search", parameters: { type: "object" } };

/** A thread paused on a client tool call: its id and the paused turn. */
async function pausedThread(): Promise<{ id: string; turn: Turn }> {
  const id = await newThread({ tools: [TOOL] });
  const turn = await json<Turn>(
    await post(`/v1/threads/${id}/turns`, { input: "/call lookup {}" }),
  );
  expect(turn.status).toBe("requires_action");
  return { id, turn };
}

/** Resolves once the thread reports a running task. */
afterEach(() => {
  vi.restoreAllMocks();
});

describe("every problem code is produced by the service", () => {
  it("invalid_request: a body that fails its schema", async () => {
    await expectProblem(await post("/v1/threads", { model: 5 }), "invalid_request");
  });

  it("unauthorized: a request without an API key", async () => {
    await expectProblem(await api("GET", "/v1/threads/abc", undefined, null), "unauthorized");
  });

  it("invalid_signature: a hook delivery whose signature does not verify", async () => {
    const hook = await createHook("github");
    const body = JSON.stringify({ thread: "x" });
    const headers = signedHeaders("github", "not the hook's secret", body);
    await expectProblem(await deliver(hook.url, body, headers), "invalid_signature");
  });

  it("hook_exists: creating a hook under an id that is taken", async () => {
    const id = `hook_${crypto.randomUUID().slice(0, 8)}`;
    await json(await post("/v1/hooks", { id, verify: { scheme: "github" }, thread: "t" }), 201);
    await expectProblem(
      await post("/v1/hooks", { id, verify: { scheme: "github" }, thread: "t" }),
      "hook_exists",
    );
  });

  it("mcp_server_exists: registering an MCP server under a label that is taken", async () => {
    const label = `mcp_${crypto.randomUUID().slice(0, 8)}`;
    const body = { label, url: "http://127.0.0.1:9/mcp" };
    await json(await post("/v1/mcp-servers", body), 201);
    await expectProblem(await post("/v1/mcp-servers", body), "mcp_server_exists");
  });

  it("forbidden: a key without the scope the route needs", async () => {
    const tenant = await createTenant();
    const { key } = await createKey(tenant.id, { scopes: ["usage"] });
    await expectProblem(
      await api("GET", `/v1/threads/${newThreadId()}`, undefined, key),
      "forbidden",
    );
  });

  it("tenant_exists: creating a tenant under an id that is taken", async () => {
    const tenant = await createTenant();
    await expectProblem(
      await api("POST", "/v1/admin/tenants", { id: tenant.id }, ADMIN_KEY),
      "tenant_exists",
    );
  });

  it("quota_exceeded: a thread more than the tenant's max_threads", async () => {
    const { key } = await tenantWithKey({ quotas: { max_threads: 1 } });
    await json(await api("POST", "/v1/threads", {}, key), 201);
    const refused = await api("POST", "/v1/threads", {}, key);
    expect(refused.headers.get("retry-after")).toBe(null);
    await expectProblem(refused, "quota_exceeded");
  });

  it("limit_exceeded: a webhook endpoint more than a tenant may hold", async () => {
    const { key } = await tenantWithKey();
    const create = () =>
      api(
        "POST",
        "/v1/webhook-endpoints",
        { url: "http://127.0.0.1:9/events", events: ["turn.completed"] },
        key,
      );
    for (let i = 0; i < tenantLimits.webhook_endpoints_per_tenant; i++) {
      await json(await create(), 201);
    }
    await expectProblem(await create(), "limit_exceeded");
  });

  it("not_found: a thread that does not exist", async () => {
    await expectProblem(await api("GET", `/v1/threads/${newThreadId()}`), "not_found");
  });

  it("thread_exists: creating a thread under an id that is taken", async () => {
    const id = await newThread();
    await expectProblem(await post("/v1/threads", { id }), "thread_exists");
  });

  it("thread_busy: a turn while another one runs, with on_busy reject", async () => {
    const id = await newThread();
    const slow = post(`/v1/threads/${id}/turns`, { input: "/slow 200 take your time" });
    await untilRunning(id);
    await expectProblem(await post(`/v1/threads/${id}/turns`, { input: "now" }), "thread_busy");
    await slow;
  });

  it("turn_not_found: a turn id the thread never had", async () => {
    const id = await newThread();
    await expectProblem(await api("GET", `/v1/threads/${id}/turns/turn_nope`), "turn_not_found");
  });

  it("turn_mismatch: steering a turn that is not the running one", async () => {
    const id = await newThread();
    const done = await json<Turn>(await post(`/v1/threads/${id}/turns`, { input: "hi" }));
    await expectProblem(
      await post(`/v1/threads/${id}/turns/${done.id}/steer`, { input: "more" }),
      "turn_mismatch",
    );
  });

  it("turn_not_steerable: steering a turn that waits for tool outputs", async () => {
    const { id, turn } = await pausedThread();
    await expectProblem(
      await post(`/v1/threads/${id}/turns/${turn.id}/steer`, { input: "more" }),
      "turn_not_steerable",
    );
  });

  it("no_pending_calls: outputs for a turn that waits for none", async () => {
    const id = await newThread();
    const done = await json<Turn>(await post(`/v1/threads/${id}/turns`, { input: "hi" }));
    const items = [{ type: "function_call_output", call_id: "call_x", output: "42" }];
    await expectProblem(
      await post(`/v1/threads/${id}/turns/${done.id}/outputs`, { items }),
      "no_pending_calls",
    );
  });

  it("unknown_call_id: an output for a call the turn did not make", async () => {
    const { id, turn } = await pausedThread();
    const items = [{ type: "function_call_output", call_id: "call_unknown", output: "42" }];
    await expectProblem(
      await post(`/v1/threads/${id}/turns/${turn.id}/outputs`, { items }),
      "unknown_call_id",
    );
  });

  it("payload_too_large: a JSON body over its route's limit", async () => {
    const big = { id: newThreadId(), developer_instructions: "x".repeat(1024 * 1024 + 1) };
    await expectProblem(await post("/v1/threads", big), "payload_too_large");
  });

  it("unsupported_media_type: an import that is not sent as JSONL", async () => {
    const res = await api("POST", "/v1/threads/import", { not: "jsonl" });
    await expectProblem(res, "unsupported_media_type");
  });

  it("parent_rollout_required: a paginated Codex fork imported without its parent", async () => {
    const meta = {
      id: "child-session",
      cwd: "/repo",
      history_mode: "paginated",
      history_base: { thread_id: "parent-session", end_ordinal_exclusive: 4 },
    };
    const line = { timestamp: "2026-09-30T12:00:00.000Z", type: "session_meta", payload: meta };
    const res = await importRollout(newThreadId(), `${JSON.stringify(line)}\n`);
    await expectProblem(res, "parent_rollout_required");
  });

  it("event_expired: replaying from an event the thread no longer keeps", async () => {
    const id = await newThread();
    await json(await post(`/v1/threads/${id}/turns`, { input: "one" }));
    await json(await post(`/v1/threads/${id}/turns`, { input: "two" }));
    const stub = env.THREAD.getByName(`local:${id}`);
    await runInDurableObject(stub, (_i, state) => {
      state.storage.sql.exec("UPDATE spindle_events SET at = 0");
    });
    await runDurableObjectAlarm(stub);
    const res = await api("GET", `/v1/threads/${id}/events`, undefined, DEV_KEY, {
      "last-event-id": "1",
    });
    await expectProblem(res, "event_expired");
  });

  it("provider_error: a provider that fails during a turn, reported on the failed Turn", async () => {
    const id = await newThread({ model: "gpt-test" });
    vi.spyOn(globalThis, "fetch").mockResolvedValue(
      new Response(JSON.stringify({ error: { message: "bad request" } }), { status: 400 }),
    );
    const failed = await json<Turn>(await post(`/v1/threads/${id}/turns`, { input: "hi" }));
    expect({ status: failed.status, code: failed.error?.code }).toEqual({
      status: "failed",
      code: "provider_error",
    });
    covered.add("provider_error");
  });

  it("context_window_exceeded: an input that cannot fit the model's window even after compaction", async () => {
    const id = await newThread({ model: "spindle-local-lite" });
    const input = "lorem ipsum ".repeat(6_000);
    await expectProblem(
      await post(`/v1/threads/${id}/turns`, { input }),
      "context_window_exceeded",
    );
    const thread = await json<{ turn_count: number }>(await api("GET", `/v1/threads/${id}`));
    expect(thread.turn_count).toBe(0);
  });

  it("unknown_model: a model the catalog does not know", async () => {
    await expectProblem(await post("/v1/threads", { model: "no-such-model" }), "unknown_model");
  });

  it("rollout_incomplete: an export whose lines cannot all be read", async () => {
    const id = await newThread();
    await json(await post(`/v1/threads/${id}/turns`, { input: "hi" }));
    const stub = env.THREAD.getByName(`local:${id}`);
    // Flush to R2, then lose the stored segment's bytes and SQLite's copy of its lines.
    await runDurableObjectAlarm(stub);
    const listed = await env.ROLLOUT.list({ prefix: `threads/local/${id}/` });
    const key = listed.objects[0]?.key;
    if (!key) throw new Error("no segment was flushed");
    const stored = await env.ROLLOUT.get(key);
    await env.ROLLOUT.put(key, "damaged", { customMetadata: stored?.customMetadata ?? {} });
    await runInDurableObject(stub, (_i, state) => {
      state.storage.sql.exec("DELETE FROM spindle_rollout");
    });
    await expectProblem(await api("GET", `/v1/threads/${id}/rollout`), "rollout_incomplete");
  });

  it("idempotency_key_reused: one key with two different requests", async () => {
    const id = await newThread();
    const key = { "idempotency-key": `k-${crypto.randomUUID()}` };
    const first = await api("POST", `/v1/threads/${id}/turns`, { input: "a" }, DEV_KEY, key);
    await json(first);
    const other = await api("POST", `/v1/threads/${id}/turns`, { input: "b" }, DEV_KEY, key);
    await expectProblem(other, "idempotency_key_reused");
  });

  it("method_not_allowed: a method the path does not take", async () => {
    const res = await api("PUT", `/v1/threads/${newThreadId()}`);
    await expectProblem(res, "method_not_allowed");
    expect(res.headers.get("allow")).toBe("GET, PATCH, DELETE");
  });

  it("unsupported_parameter: a Responses setting the service cannot honour (OpenAI's error shape)", async () => {
    const res = await post("/v1/responses", {
      model: "spindle-local",
      input: "x",
      text: { format: { type: "json_schema", name: "x", schema: {} } },
    });
    const body = (await res.json()) as { error?: { code?: string; param?: string } };
    expect({ status: res.status, code: body.error?.code, param: body.error?.param }).toEqual({
      status: problemStatus("unsupported_parameter"),
      code: "unsupported_parameter",
      param: "text.format",
    });
    covered.add("unsupported_parameter");
  });

  it("internal: a failure the service did not expect, without its details", async () => {
    const id = await newThread();
    vi.spyOn(env.ROLLOUT, "list").mockRejectedValue(new Error("secret detail"));
    const res = await api("GET", `/v1/threads/${id}/rollout`);
    const text = await res.clone().text();
    expect(text).not.toContain("secret detail");
    await expectProblem(res, "internal");
  });
});

/**
 * Codes that no HTTP request can reach deterministically, and the suite that produces them. A
 * retry meets a request still being admitted only while that admission waits on I/O other than
 * this object's storage (storage closes the object's input gate), which no route does for long.
 */
const PRODUCED_ELSEWHERE: readonly { code: ProblemCode; suite: string }[] = [
  { code: "idempotency_key_in_use", suite: "test/workers/thread/keyed-requests.test.ts" },
];

afterAll(() => {
  // Every code of the vocabulary had its case, and no case used a code outside it.
  const all = [...covered, ...PRODUCED_ELSEWHERE.map((e) => e.code)];
  expect(all.sort()).toEqual([...PROBLEM_CODES].sort());
});
