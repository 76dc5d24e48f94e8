import { describe, expect, it } from "vitest";
import { MAX_MCP_RESPONSE_BYTES, McpConnection, toolOutputOf } from "../../../shared/mcp/index.ts";
import { MCP_TOKEN, PNG_BASE64, testMcpServer } from "../../helpers/mcp-server.ts";

function connect(server = testMcpServer(), extra: { onToolsChanged?: () => void } = {}) {
  const connection = new McpConnection({
    url: server.url,
    headers: { authorization: `Bearer ${MCP_TOKEN}` },
    fetch: server.fetch,
    timeoutMs: 2_000,
    ...extra,
  });
  return { server, connection };
}

describe("an MCP connection (official SDK client against the SDK's server)", () => {
  it("negotiates a version, lists the tools and calls one, with the credential on every request", async () => {
    const { server, connection } = connect();
    const tools = await connection.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["chart", "echo", "fail", "grow", "slow"]);
    expect(tools.find((t) => t.name === "echo")?.inputSchema).toMatchObject({
      type: "object",
      properties: { text: { type: "string" } },
    });
    expect(connection.protocolVersion).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    const result = await connection.callTool("echo", { text: "hi" });
    expect(toolOutputOf(result)).toEqual({
      output: '[{"type":"text","text":"echo: hi"}]',
      success: true,
    });
    expect(server.requests.length).toBeGreaterThan(2);
    for (const request of server.requests) {
      expect(request.headers.get("authorization")).toBe(`Bearer ${MCP_TOKEN}`);
    }
    // No standalone GET stream was opened: the guard answers it without the network.
    expect(server.requests.some((r) => r.method === "GET")).toBe(false);
    await connection.close();
  });

  it("gives isError results and images to the caller as the server sent them", async () => {
    const { connection } = connect();
    expect(toolOutputOf(await connection.callTool("fail", {})).success).toBe(false);
    const chart = toolOutputOf(await connection.callTool("chart", {}));
    expect(chart.output).toEqual([
      { type: "input_text", text: "a chart" },
      { type: "input_image", image_url: `data:image/png;base64,${PNG_BASE64}` },
    ]);
  });

  it("times a call out and tells the server, and never sends it twice", async () => {
    const { server, connection } = connect();
    await expect(
      connection.callTool("slow", { ms: 60_000 }, AbortSignal.timeout(100)),
    ).rejects.toThrow();
    await expect
      .poll(() => server.requests.filter((r) => r.body.includes("notifications/cancelled")).length)
      .toBe(1);
    expect(server.calls.get("slow")).toBe(1);
  });

  it("hears list_changed on a call's answer", async () => {
    let changed = 0;
    const { connection } = connect(undefined, { onToolsChanged: () => changed++ });
    await connection.listTools();
    await connection.callTool("grow", {});
    expect(changed).toBe(1);
    expect((await connection.listTools()).map((t) => t.name)).toContain("grown");
  });

  it("opens a new session for a listing after the server forgot its session, not for a call", async () => {
    const { server, connection } = connect();
    await connection.listTools();
    server.restart();
    expect((await connection.listTools()).length).toBe(5);
    server.restart();
    await expect(connection.callTool("echo", { text: "once" })).rejects.toThrow();
    expect(server.calls.get("echo")).toBeUndefined();
    // The next call runs on a new session.
    await connection.callTool("echo", { text: "again" });
    expect(server.calls.get("echo")).toBe(1);
  });

  it("refuses a redirect and an answer past the byte cap", async () => {
    const redirecting = new McpConnection({
      url: "http://127.0.0.1:9/mcp",
      headers: {},
      fetch: async () =>
        new Response(null, { status: 307, headers: { location: "http://127.0.0.1:9/x" } }),
      timeoutMs: 1_000,
    });
    await expect(redirecting.listTools()).rejects.toThrow(/redirect/);
    const huge = new McpConnection({
      url: "http://127.0.0.1:9/mcp",
      headers: {},
      fetch: async () =>
        new Response(new Uint8Array(MAX_MCP_RESPONSE_BYTES + 1), {
          headers: { "content-type": "application/json" },
        }),
      timeoutMs: 1_000,
    });
    await expect(huge.listTools()).rejects.toThrow();
  });

  it("a server that refuses the credential fails the listing with its status, and no error holds the secret", async () => {
    const server = testMcpServer();
    const connection = new McpConnection({
      url: server.url,
      headers: { authorization: "Bearer wrong-secret-xyz" },
      fetch: server.fetch,
      timeoutMs: 1_000,
    });
    const error = await connection.listTools().catch((err: unknown) => err as Error);
    expect((error as Error & { code?: number }).code).toBe(401);
    expect(String(error)).not.toContain("wrong-secret-xyz");
  });
});
