/**
 * The parts of the official MCP SDK the client uses, bundled on install into `bundle.js` (with
 * the zod the SDK brings) by `scripts/bundle-mcp-sdk.mjs`. Loaded by a dynamic import on a
 * thread's first MCP request; bundled apart so that the SDK shares no module with the rest of
 * the worker, which the worker's bundler would otherwise initialize lazily for both.
 */
export { Client } from "@modelcontextprotocol/sdk/client/index.js";
export {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
export { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
export { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
