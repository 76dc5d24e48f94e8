/**
 * A real MCP server for the suites, built with the official SDK's `McpServer` and its Web-standard
 * Streamable HTTP transport, reached through a `fetch` (no socket): text, failing, slow, image
 * and counting tools, one that changes the tool list, a bearer token it requires, sessions, and a
 * restart that forgets them (requests of an old session are answered 404, as the SDK's examples do).
 */
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import * as z from "zod";

export const MCP_TOKEN = "mcp-secret-token-7f3a";
export const PNG_BASE64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

export interface TestMcpServer {
  readonly url: string;
  readonly fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
  /** Calls each tool received (a duplicate execution shows). */
  readonly calls: Map<string, number>;
  /** Every request's method and headers, as received. */
  readonly requests: { method: string; headers: Headers; body: string }[];
  /** Forgets every session, as a restarted server does. */
  restart(): void;
}

/**
 * `token`: the bearer token every request must carry (default `MCP_TOKEN`); `jsonAnswers`: answer
 * each request with one JSON body instead of an SSE stream (both are Streamable HTTP).
 */
export function testMcpServer(
  url = "http://127.0.0.1:9/mcp",
  token = MCP_TOKEN,
  jsonAnswers = false,
): TestMcpServer {
  const calls = new Map<string, number>();
  const requests: TestMcpServer["requests"] = [];
  let sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const count = (tool: string) => calls.set(tool, (calls.get(tool) ?? 0) + 1);

  const newServer = () => {
    const server = new McpServer({ name: "spindle-test", version: "1.0.0" });
    server.registerTool(
      "echo",
      { description: "Echoes its text", inputSchema: { text: z.string() } },
      async ({ text }) => {
        count("echo");
        return { content: [{ type: "text", text: `echo: ${text}` }] };
      },
    );
    server.registerTool("fail", { description: "Always fails" }, async () => {
      count("fail");
      return { content: [{ type: "text", text: "the upstream is down" }], isError: true };
    });
    server.registerTool(
      "slow",
      { description: "Answers after ms", inputSchema: { ms: z.number() } },
      async ({ ms }, extra) => {
        count("slow");
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, ms);
          extra.signal.addEventListener("abort", () => {
            clearTimeout(timer);
            resolve();
          });
        });
        return { content: [{ type: "text", text: `slept ${ms}` }] };
      },
    );
    server.registerTool("chart", { description: "An image" }, async () => {
      count("chart");
      return {
        content: [
          { type: "text", text: "a chart" },
          { type: "image", data: PNG_BASE64, mimeType: "image/png" },
        ],
      };
    });
    server.registerTool("grow", { description: "Adds a tool" }, async (extra) => {
      count("grow");
      if (calls.get("grow") === 1) {
        server.registerTool("grown", { description: "Added later" }, async () => {
          count("grown");
          return { content: [{ type: "text", text: "new" }] };
        });
      }
      // On this request's stream: a client without the standalone GET stream still hears it.
      await extra.sendNotification({ method: "notifications/tools/list_changed" });
      return { content: [{ type: "text", text: "grew" }] };
    });
    return server;
  };

  const fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    requests.push({
      method: request.method,
      headers: new Headers(request.headers),
      body: request.method === "POST" ? await request.clone().text() : "",
    });
    if (request.headers.get("authorization") !== `Bearer ${token}`) {
      return new Response("unauthorized", { status: 401 });
    }
    const sessionId = request.headers.get("mcp-session-id");
    if (sessionId !== null) {
      const transport = sessions.get(sessionId);
      if (transport === undefined) return new Response("session not found", { status: 404 });
      return transport.handleRequest(request);
    }
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: jsonAnswers,
      onsessioninitialized: (id) => {
        sessions.set(id, transport);
      },
    });
    await newServer().connect(transport);
    return transport.handleRequest(request);
  };

  return {
    url,
    fetch,
    calls,
    requests,
    restart: () => {
      sessions = new Map();
    },
  };
}
