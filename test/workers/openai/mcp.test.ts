/**
 * Server-side MCP tools (design §16) through the OpenAI surface: an `mcp` tool naming a
 * registered server, its calls shown as `mcp_call` items, a held call as `mcp_approval_request`
 * answered with `mcp_approval_response`.
 */
import { exports } from "cloudflare:workers";
import OpenAI from "openai";
import { afterEach, describe, expect, it, vi } from "vitest";
import { BASE } from "../helpers/api.ts";
import { mcpNetwork, registerMcpServer } from "../helpers/mcp.ts";
import { tenantWithKey } from "../helpers/tenancy.ts";

const URL = "http://127.0.0.1:9/mcp";
const MODEL = "spindle-local";

const clientFor = (key: string) =>
  new OpenAI({
    apiKey: key,
    baseURL: `${BASE}/v1`,
    maxRetries: 0,
    fetch: (url, init) => exports.default.fetch(url as string, init as RequestInit),
  });

afterEach(() => {
  vi.restoreAllMocks();
});

describe("MCP tools through /v1/responses", () => {
  it("runs a server's tool in the response: one mcp_call with its output, then the answer", async () => {
    const net = mcpNetwork(URL);
    const { key } = await tenantWithKey();
    // The tenant's registration decides approvals; a thread's entry may only narrow them.
    await registerMcpServer(key, "docs", URL, { require_approval: "never" });
    const client = clientFor(key);
    const tools: OpenAI.Responses.Tool[] = [
      { type: "mcp", server_label: "docs", require_approval: "never" },
    ];
    const response = await client.responses.create({
      model: MODEL,
      tools,
      input: '/call mcp__docs__echo {"text":"hi"}',
    });
    expect(response.status).toBe("completed");
    expect(response.output.map((i) => i.type)).toEqual(["mcp_call", "message"]);
    expect(response.output[0]).toMatchObject({
      type: "mcp_call",
      server_label: "docs",
      name: "echo",
      arguments: '{"text":"hi"}',
      output: "echo: hi",
    });
    expect(net.server.calls.get("echo")).toBe(1);

    // Streamed, the call is one item too, added and done once its output is in.
    const stream = await client.responses.create({
      model: MODEL,
      tools,
      input: '/call mcp__docs__echo {"text":"again"}',
      stream: true,
    });
    const items: string[] = [];
    let final: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      if (event.type === "response.output_item.done") items.push(event.item.type);
      if (event.type === "response.completed") final = event.response;
    }
    expect(items).toEqual(["mcp_call", "message"]);
    expect(final?.output.map((i) => i.type)).toEqual(["mcp_call", "message"]);
  });

  it("holds a call for approval; mcp_approval_response runs it once and the turn goes on", async () => {
    const net = mcpNetwork(URL);
    const { key } = await tenantWithKey();
    await registerMcpServer(key, "docs", URL);
    const client = clientFor(key);
    const tools: OpenAI.Responses.Tool[] = [
      { type: "mcp", server_label: "docs", require_approval: "always" },
    ];
    const held = await client.responses.create({
      model: MODEL,
      tools,
      input: '/call mcp__docs__echo {"text":"may I"}',
    });
    expect(held.status).toBe("completed");
    expect(held.output).toEqual([
      {
        type: "mcp_approval_request",
        id: expect.stringMatching(/^mcpr_/),
        server_label: "docs",
        name: "echo",
        arguments: '{"text":"may I"}',
      },
    ]);
    expect(net.server.calls.get("echo")).toBeUndefined();
    const request = held.output[0] as { id: string };

    const approved = await client.responses.create({
      model: MODEL,
      tools,
      previous_response_id: held.id,
      input: [{ type: "mcp_approval_response", approval_request_id: request.id, approve: true }],
    });
    expect(approved.status).toBe("completed");
    expect(approved.output.map((i) => i.type)).toEqual(["mcp_call", "message"]);
    expect(approved.output[0]).toMatchObject({ name: "echo", output: "echo: may I" });
    expect(net.server.calls.get("echo")).toBe(1);
  });
});
