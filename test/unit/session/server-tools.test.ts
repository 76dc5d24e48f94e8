import { describe, expect, it } from "vitest";
import { McpToolRouter, qualifiedToolName } from "../../../shared/mcp/index.ts";
import type {
  FunctionCallItem,
  McpServerDefinition,
  McpServerResolution,
  RolloutItem,
} from "../../../shared/protocol/index.ts";
import type { ModelClient, ModelEvent, ModelPrompt } from "../../../shared/providers/index.ts";
import { encodeRolloutJsonl } from "../../../shared/rollout/index.ts";
import {
  type EngineDeps,
  RoundNotAdmittedError,
  type TurnEvent,
} from "../../../shared/session/index.ts";
import { MCP_TOKEN, testMcpServer } from "../../helpers/mcp-server.ts";
import { drain, LOOKUP_TOOL, newSession, replayed, shapeOf, text } from "../helpers/engine.ts";

const ECHO = "mcp__docs__echo";

/** The test server registered as `docs`, with `overrides` on the registration. */
function registry(server = testMcpServer(), overrides: Partial<McpServerDefinition> = {}) {
  const definition: McpServerDefinition = {
    label: "docs",
    url: server.url,
    headers: { authorization: `Bearer ${MCP_TOKEN}` },
    allowed_tools: null,
    require_approval: "never",
    timeout_ms: 2_000,
    ...overrides,
  };
  let resolutions = 0;
  const resolve = async (): Promise<McpServerResolution> => {
    resolutions += 1;
    return { servers: [definition], unavailable: [] };
  };
  return { server, resolve, resolutions: () => resolutions };
}

/** A session whose thread names `docs`, reached through the router over the test server. */
function mcpSession(
  reg = registry(),
  options: {
    model?: ModelClient;
    tools?: boolean;
    truncation?: { tokens: number };
    refusal?: (url: string) => string | undefined;
  } = {},
) {
  const h = newSession(
    {
      mcp_servers: ["docs"],
      ...(options.tools ? { tools: [LOOKUP_TOOL] } : {}),
      ...(options.truncation ? { truncation: options.truncation } : {}),
    },
    1000,
    options.model ? { model: options.model } : {},
  );
  const router = new McpToolRouter({
    clock: h.deps.clock,
    resolve: reg.resolve,
    fetch: reg.server.fetch,
    refusal: options.refusal ?? (() => undefined),
  });
  (h.deps as { serverTools?: EngineDeps["serverTools"] }).serverTools = router;
  return { ...h, reg };
}

/** A model that makes `calls` on its first request and answers in text after outputs. */
class CallingClient implements ModelClient {
  readonly prompts: ModelPrompt[] = [];
  constructor(readonly calls: readonly FunctionCallItem[]) {}
  async *stream(prompt: ModelPrompt): AsyncIterable<ModelEvent> {
    this.prompts.push(prompt);
    const input = prompt.input.toArray();
    if (!input.some((i) => i.type === "function_call_output")) {
      for (const call of this.calls) {
        yield { type: "output_item_done", item: call };
      }
    } else {
      yield {
        type: "output_item_done",
        item: {
          type: "message",
          role: "assistant",
          content: [{ type: "output_text", text: "done" }],
        },
      };
    }
    yield {
      type: "completed",
      usage: {
        input_tokens: 10,
        cached_input_tokens: 0,
        output_tokens: 1,
        reasoning_output_tokens: 0,
        total_tokens: 11,
      },
    };
  }
}

function outputsOf(items: readonly RolloutItem[]) {
  return items.flatMap((l) =>
    l.type === "response_item" && l.payload.type === "function_call_output" ? [l.payload] : [],
  );
}

function eventsOf(items: readonly RolloutItem[], type: string) {
  return items.flatMap((l) =>
    l.type === "event_msg" && l.payload.type === type ? [l.payload as Record<string, unknown>] : [],
  );
}

describe("server-side MCP tools in a turn", () => {
  it("a turn calls an MCP tool and completes with no client; the call is on record before it is sent", async () => {
    const h = mcpSession();
    const { outcome } = await drain(h.session.runTurn(text(`/call ${ECHO} {"text":"hi"}`)));
    expect(outcome.status).toBe("completed");
    expect(h.reg.server.calls.get("echo")).toBe(1);
    // The step offered the server's tools, named as Codex names them, after the client's.
    const names = h.client.prompts[0]?.tools.map((t) => t.name);
    expect(names).toEqual(
      ["chart", "echo", "fail", "grow", "slow"].map((tool) =>
        qualifiedToolName({ label: "docs", tool }),
      ),
    );
    const shape = shapeOf(h.sink.items);
    const call = shape.indexOf("response_item/function_call");
    expect(shape.slice(call, call + 5)).toEqual([
      "response_item/function_call",
      "event_msg/token_count",
      "event_msg/mcp_tool_call_begin",
      "event_msg/mcp_tool_call_end",
      "response_item/function_call_output",
    ]);
    expect(outputsOf(h.sink.items)[0]?.output).toBe('[{"type":"text","text":"echo: hi"}]');
    expect(eventsOf(h.sink.items, "mcp_tool_call_begin")[0]).toMatchObject({
      invocation: { server: "docs", tool: "echo", arguments: { text: "hi" } },
    });
    expect(eventsOf(h.sink.items, "mcp_tool_call_end")[0]).toMatchObject({ success: true });
    // The second request of the turn has the output; the answer quotes it.
    expect(h.client.prompts).toHaveLength(2);
    if (outcome.status === "completed") expect(outcome.last_agent_message).toContain("echo: hi");
    // turn_context names the tools the turn's first step offered.
    const context = h.sink.items.find((l) => l.type === "turn_context");
    expect(context?.payload).toMatchObject({
      mcp_tools: expect.arrayContaining([{ name: ECHO, server: "docs", tool: "echo" }]),
    });
  });

  it("the tool list is the same bytes from turn to turn (one listing, cached)", async () => {
    const h = mcpSession();
    await drain(h.session.runTurn(text("one")));
    await drain(h.session.runTurn(text("two")));
    const [a, b] = h.client.prompts;
    expect(JSON.stringify(b?.tools)).toBe(JSON.stringify(a?.tools));
    const lists = h.reg.server.requests.filter((r) => r.body.includes('"tools/list"'));
    expect(lists).toHaveLength(1);
    expect(h.reg.resolutions()).toBe(1);
  });

  it("an isError result reaches the model as the server wrote it, recorded as unsuccessful", async () => {
    const h = mcpSession();
    const { outcome } = await drain(h.session.runTurn(text("/call mcp__docs__fail {}")));
    expect(outcome.status).toBe("completed");
    expect(outputsOf(h.sink.items)[0]?.output).toContain("the upstream is down");
    expect(eventsOf(h.sink.items, "mcp_tool_call_end")[0]).toMatchObject({ success: false });
  });

  it("a call past the server's timeout is answered as failed and the turn goes on", async () => {
    const h = mcpSession(registry(testMcpServer(), { timeout_ms: 200 }));
    const { outcome } = await drain(h.session.runTurn(text('/call mcp__docs__slow {"ms":5000}')));
    expect(outcome.status).toBe("completed");
    expect(String(outputsOf(h.sink.items)[0]?.output)).toMatch(/failed the call: .*timed out/i);
  });

  it("a large result is truncated in history by the thread's policy, kept whole in the rollout", async () => {
    const h = mcpSession(registry(), { truncation: { tokens: 50 } });
    const big = "x".repeat(20_000);
    const { outcome } = await drain(h.session.runTurn(text(`/call ${ECHO} {"text":"${big}"}`)));
    expect(outcome.status).toBe("completed");
    expect(String(outputsOf(h.sink.items)[0]?.output)).toContain(big);
    const stored = h.session.history.items.find((i) => i.type === "function_call_output");
    const kept = stored?.type === "function_call_output" ? String(stored.output) : "";
    expect(kept).toContain("tokens truncated");
    expect(kept.length).toBeLessThan(2_000);
  });

  it("arguments that are not a JSON object are not sent; the model is told", async () => {
    const h = mcpSession();
    const { outcome } = await drain(h.session.runTurn(text(`/call ${ECHO} [1,2]`)));
    expect(outcome.status).toBe("completed");
    expect(h.reg.server.calls.get("echo")).toBeUndefined();
    expect(String(outputsOf(h.sink.items)[0]?.output)).toContain("must be a JSON object");
  });

  it("parallel calls run concurrently, and a client call in the same step pauses the turn", async () => {
    const model = new CallingClient([
      {
        type: "function_call",
        name: "mcp__docs__slow",
        arguments: '{"ms":300}',
        call_id: "call_a",
      },
      {
        type: "function_call",
        name: "mcp__docs__slow",
        arguments: '{"ms":300}',
        call_id: "call_b",
      },
      { type: "function_call", name: "lookup", arguments: "{}", call_id: "call_c" },
    ]);
    const h = mcpSession(registry(), { model, tools: true });
    const started = Date.now();
    const { outcome } = await drain(h.session.runTurn(text("go")));
    // Both 300 ms calls were in flight at once (sequential would take 600 ms or more).
    expect(Date.now() - started).toBeLessThan(590);
    expect(outcome.status).toBe("requires_action");
    if (outcome.status !== "requires_action") return;
    expect(outcome.pending_calls.map((c) => c.call_id)).toEqual(["call_c"]);
    expect(outcome.pending_approvals).toBeUndefined();
    expect(
      outputsOf(h.sink.items)
        .map((o) => o.call_id)
        .sort(),
    ).toEqual(["call_a", "call_b"]);
    expect(h.reg.server.calls.get("slow")).toBe(2);
    const done = await drain(
      h.session.resumeTurn(outcome.turn_id, outcome.pending_calls, [
        { call_id: "call_c", output: "found" },
      ]),
    );
    expect(done.outcome.status).toBe("completed");
    expect(h.reg.server.calls.get("slow")).toBe(2);
  });

  it("require_approval pauses with an mcp_approval_request; approved, the call runs once", async () => {
    const h = mcpSession(registry(testMcpServer(), { require_approval: "always" }));
    const { outcome } = await drain(h.session.runTurn(text(`/call ${ECHO} {"text":"ok?"}`)));
    expect(outcome.status).toBe("requires_action");
    if (outcome.status !== "requires_action") return;
    const [request] = outcome.pending_approvals ?? [];
    expect(request).toMatchObject({
      type: "mcp_approval_request",
      id: expect.stringMatching(/^mcpr_/),
      server_label: "docs",
      name: "echo",
      arguments: '{"text":"ok?"}',
      call_id: outcome.pending_calls[0]?.call_id,
    });
    expect(h.reg.server.calls.get("echo")).toBeUndefined();
    expect(eventsOf(h.sink.items, "mcp_approval_request")).toHaveLength(1);
    if (request === undefined) return;
    const done = await drain(
      h.session.resumeTurn(outcome.turn_id, outcome.pending_calls, [
        { call_id: request.call_id, request, approve: true },
      ]),
    );
    expect(done.outcome.status).toBe("completed");
    expect(h.reg.server.calls.get("echo")).toBe(1);
    expect(outputsOf(h.sink.items)[0]?.output).toContain("echo: ok?");
  });

  it("a denied call is not run; the model is told, with the reason", async () => {
    const h = mcpSession(
      registry(testMcpServer(), { require_approval: { never: { tool_names: ["chart"] } } }),
    );
    const { outcome } = await drain(h.session.runTurn(text(`/call ${ECHO} {"text":"x"}`)));
    if (outcome.status !== "requires_action") throw new Error(outcome.status);
    const request = outcome.pending_approvals?.[0];
    if (request === undefined) throw new Error("no approval request");
    const done = await drain(
      h.session.resumeTurn(outcome.turn_id, outcome.pending_calls, [
        { call_id: request.call_id, request, approve: false, reason: "not today" },
      ]),
    );
    expect(done.outcome.status).toBe("completed");
    expect(h.reg.server.calls.get("echo")).toBeUndefined();
    const output = String(outputsOf(h.sink.items)[0]?.output);
    expect(output).toContain("did not approve");
    expect(output).toContain("not today");
  });

  it("an unreachable server leaves its tools out with one warning, and the turn completes", async () => {
    const reg = registry();
    const down = {
      ...reg,
      server: {
        ...reg.server,
        fetch: async () => {
          throw new TypeError("connect ECONNREFUSED");
        },
      },
    };
    const h = mcpSession(down as typeof reg);
    const first = await drain(h.session.runTurn(text(`/call ${ECHO} {}`)));
    expect(first.outcome.status).toBe("completed");
    const warnings = first.events.filter(
      (e): e is Extract<TurnEvent, { type: "turn.warning" }> => e.type === "turn.warning",
    );
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.warning).toMatchObject({
      code: "mcp_server_unavailable",
      server_label: "docs",
    });
    expect(h.client.prompts[0]?.tools).toEqual([]);
    expect(eventsOf(h.sink.items, "warning")).toHaveLength(1);
  });

  it("a URL the outbound policy refuses is never sent to: its tools are left out with a warning", async () => {
    const h = mcpSession(registry(), { refusal: () => "a loopback address" });
    const { outcome, events } = await drain(h.session.runTurn(text(`/call ${ECHO} {}`)));
    expect(outcome.status).toBe("completed");
    const warning = events.find((e) => e.type === "turn.warning");
    expect(warning?.type === "turn.warning" && warning.warning.message).toContain(
      "its URL is refused (a loopback address)",
    );
    expect(h.reg.server.requests).toEqual([]);
  });

  it("the round after server calls asks the quotas first: refused, the turn fails quota_exceeded with the outputs kept", async () => {
    const h = mcpSession();
    const asked: number[] = [];
    (h.deps as { admitRound?: EngineDeps["admitRound"] }).admitRound = () => {
      asked.push(h.client.prompts.length);
      return Promise.resolve(false);
    };
    await expect(drain(h.session.runTurn(text(`/call ${ECHO} {"text":"q"}`)))).rejects.toThrow(
      RoundNotAdmittedError,
    );
    // Asked once, after the first request; the second was never made.
    expect(asked).toEqual([1]);
    expect(h.client.prompts).toHaveLength(1);
    expect(h.reg.server.calls.get("echo")).toBe(1);
    expect(outputsOf(h.sink.items)).toHaveLength(1);
  });

  it("an interrupt cancels a running call: no output is recorded, the prompt pairs it with aborted", async () => {
    const h = mcpSession();
    const controller = new AbortController();
    const gen = h.session.runTurn(
      text('/call mcp__docs__slow {"ms":10000}'),
      undefined,
      controller.signal,
    );
    setTimeout(() => controller.abort(new Error("interrupted")), 200);
    const { outcome } = await drain(gen);
    expect(outcome.status).toBe("interrupted");
    expect(outputsOf(h.sink.items)).toEqual([]);
    expect(eventsOf(h.sink.items, "mcp_tool_call_begin")).toHaveLength(1);
    const input = h.session.previewPrompt().input;
    const call = input.findIndex((i) => i.type === "function_call");
    expect(input[call + 1]).toMatchObject({ type: "function_call_output", output: "aborted" });
    expect(h.reg.server.calls.get("slow")).toBe(1);
  });

  it("a thread that used server tools replays to the same history, and no line holds the credential", async () => {
    const h = mcpSession();
    await drain(h.session.runTurn(text(`/call ${ECHO} {"text":"a"}`)));
    await drain(h.session.runTurn(text("/call mcp__docs__chart {}")));
    const again = replayed(h);
    expect(again.session.history.toState().items).toEqual(h.session.history.toState().items);
    const jsonl = encodeRolloutJsonl(
      h.sink.items.map((i) => ({ timestamp: "2026-03-01T12:00:00.000Z", ...i }) as never),
    );
    expect(jsonl).not.toContain(MCP_TOKEN);
    expect(jsonl).toContain("mcp_tool_call_begin");
    // The image the chart tool returned is kept as an input_image for the model.
    expect(outputsOf(h.sink.items)[1]?.output).toEqual([
      { type: "input_text", text: "a chart" },
      expect.objectContaining({ type: "input_image" }),
    ]);
  });
});
