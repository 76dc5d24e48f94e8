// `npm run mcp:example`: a local MCP server for trying server-side tools with `npm start`. It is
// the official SDK's server the test suites use (tools echo, fail, slow, chart, grow), on
// http://127.0.0.1:8931/mcp, requiring `Authorization: Bearer mcp-token` (MCP_EXAMPLE_PORT and
// MCP_EXAMPLE_TOKEN change them).
import { listenOnLoopback } from "../test/helpers/mcp-http.ts";
import { testMcpServer } from "../test/helpers/mcp-server.ts";

const port = Number(process.env.MCP_EXAMPLE_PORT ?? 8931);
const token = process.env.MCP_EXAMPLE_TOKEN ?? "mcp-token";
const url = `http://127.0.0.1:${port}/mcp`;
const server = testMcpServer(url, token);
const listening = await listenOnLoopback((request) => {
  const path = new URL(request.url).pathname;
  if (path !== "/mcp") return Promise.resolve(new Response("not found", { status: 404 }));
  return server.fetch(request);
}, port);
console.log(`MCP server on ${url} (Authorization: Bearer ${token}); Ctrl-C stops it`);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => void listening.close().then(() => process.exit(0)));
}
