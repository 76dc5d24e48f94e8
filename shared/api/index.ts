/**
 * The contract of Spindle's API, below both `worker/` and `durable-objects/`: the wire shapes of
 * requests, resources and events (zod, the single definition), the problem codes, and the Thread
 * Durable Object's RPC contract. Pure TypeScript: no Cloudflare or Hono imports.
 */
export * from "./api-keys.ts";
export * from "./events.ts";
export * from "./ids.ts";
export * from "./limits.ts";
export * from "./mcp-servers.ts";
export * from "./model-requests.ts";
export * from "./previews.ts";
export * from "./problems.ts";
export * from "./requests.ts";
export * from "./resources.ts";
export * from "./tenancy.ts";
export * from "./tenant-rpc.ts";
export type * from "./thread-rpc.ts";
export type * from "./webhook-rpc.ts";
export * from "./webhooks.ts";
