import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ListeningServer, listenOnLoopback } from "../helpers/mcp-http.ts";
import { MCP_TOKEN, type TestMcpServer, testMcpServer } from "../helpers/mcp-server.ts";
import { call, eventually, text } from "./local-worker.ts";
import { persistedWorker } from "./persisted-worker.ts";

/**
 * A server tool call through a kill of the runtime (design §16, invariant 15): the workerd
 * process running a turn's MCP call is stopped while the server works on it; after the restart
 * the turn reads as interrupted, the call is answered `aborted` in the next prompt, and the
 * server (a real socket on 127.0.0.1) never receives it a second time.
 */

let mcp: TestMcpServer;
let listening: ListeningServer | undefined;

beforeAll(async () => {
  let origin = "";
  listening = await listenOnLoopback((request) => mcp.fetch(request));
  origin = listening.origin;
  mcp = testMcpServer(`${origin}/mcp`);
});
afterAll(async () => {
  await listening?.close();
});

const { base, restart } = persistedWorker("spindle-e2e-mcp-");

interface Turn {
  id: string;
  status: string;
}

async function turnOf(thread: string, turn: string): Promise<Turn> {
  return JSON.parse(await text(await call(base(), "GET", `/v1/threads/${thread}/turns/${turn}`)));
}

describe("an MCP call when the runtime dies", () => {
  it("is never sent twice: the turn ends interrupted and the call is answered aborted", async () => {
    const label = `srv${crypto.randomUUID().slice(0, 8)}`;
    await text(
      await call(base(), "POST", "/v1/mcp-servers", {
        label,
        url: mcp.url,
        headers: { authorization: `Bearer ${MCP_TOKEN}` },
        require_approval: "never",
      }),
      201,
    );
    const id = `e2e_${crypto.randomUUID().replaceAll("-", "")}`;
    await text(await call(base(), "POST", "/v1/threads", { id, mcp_servers: [label] }), 201);
    // Streamed: the first event names the turn; the stream is left open while it runs.
    const stream = await fetch(new URL(`/v1/threads/${id}/turns`, base()), {
      method: "POST",
      headers: { authorization: "Bearer sk-local-dev", "content-type": "application/json" },
      body: JSON.stringify({ input: `/call mcp__${label}__slow {"ms":20000}`, stream: true }),
    });
    const reader = stream.body?.pipeThrough(new TextDecoderStream()).getReader();
    let head = "";
    while (!/"turn_id":"(turn_[^"]+)"/.test(head)) {
      const chunk = await reader?.read();
      if (!chunk || chunk.done) throw new Error(`the stream ended: ${head}`);
      head += chunk.value;
    }
    const started = { id: /"turn_id":"(turn_[^"]+)"/.exec(head)?.[1] ?? "" };
    await eventually(
      async () => (mcp.calls.get("slow") === 1 ? true : undefined),
      "the server receiving the call",
    );

    await restart();
    await reader?.cancel().catch(() => {});

    const settled = await eventually(async () => {
      const turn = await turnOf(id, started.id);
      return turn.status === "in_progress" ? undefined : turn;
    }, "the turn settling after the restart");
    expect(settled.status).toBe("interrupted");
    const prompt = JSON.parse(
      await text(await call(base(), "GET", `/v1/threads/${id}/prompt`)),
    ) as {
      input: { type: string; call_id?: string; output?: unknown }[];
    };
    const at = prompt.input.findIndex((i) => i.type === "function_call");
    expect(prompt.input[at + 1]).toMatchObject({ type: "function_call_output", output: "aborted" });
    const rollout = await text(await call(base(), "GET", `/v1/threads/${id}/rollout`));
    expect(rollout).toContain("mcp_tool_call_begin");

    const next = JSON.parse(
      await text(await call(base(), "POST", `/v1/threads/${id}/turns`, { input: "go on" })),
    ) as Turn;
    expect(next.status).toBe("completed");
    expect(mcp.calls.get("slow")).toBe(1);
  });
});
