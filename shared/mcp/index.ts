/**
 * Server-side tools from remote MCP servers (design §16): pure parts, no network of their own.
 */

export * from "./approval.ts";
export * from "./connection.ts";
export * from "./listing-cache.ts";
export * from "./router.ts";
export * from "./server-tools.ts";
export * from "./step-tools.ts";
export * from "./tool-names.ts";
export * from "./tool-result.ts";
