import { vi } from "vitest";
import { MCP_TOKEN, type TestMcpServer, testMcpServer } from "../../helpers/mcp-server.ts";
import { api, json } from "./api.ts";
import { RECEIVER_URL } from "./receiver.ts";

export { MCP_TOKEN };

/** What the isolate sent to an MCP server or the webhook receiver, by URL. */
export interface McpNetwork {
  readonly server: TestMcpServer;
  /** Bodies of the outbound webhook requests (RECEIVER_URL), in order. */
  readonly webhooks: string[];
}

/**
 * Stands in for the network of this isolate (the Thread objects run here): requests to `url`
 * reach a fresh test MCP server, requests to the webhook receiver are answered 200 and kept,
 * and `down` URLs fail as a refused connection does. Anything else is not expected: 599.
 */
export function mcpNetwork(
  url = "http://127.0.0.1:9/mcp",
  down: readonly string[] = [],
): McpNetwork {
  const server = testMcpServer(url);
  const webhooks: string[] = [];
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const request = new Request(input, init);
    if (down.some((d) => request.url.startsWith(d))) {
      throw new TypeError("Network connection lost.");
    }
    if (request.url.startsWith(url)) return server.fetch(request);
    if (request.url.startsWith(RECEIVER_URL)) {
      webhooks.push(await request.text());
      return new Response("ok");
    }
    return new Response("unexpected request", { status: 599 });
  });
  return { server, webhooks };
}

/** Registers `url` as the MCP server `label` of `key`'s tenant, with the test server's token. */
export async function registerMcpServer(
  key: string,
  label: string,
  url: string,
  extra: Record<string, unknown> = {},
): Promise<void> {
  await json(
    await api(
      "POST",
      "/v1/mcp-servers",
      { label, url, headers: { authorization: `Bearer ${MCP_TOKEN}` }, ...extra },
      key,
    ),
    201,
  );
}
