/**
 * Webhooks in and out (design §12), the pure part: the four signature schemes of inbound hooks
 * and the signing of outbound events, reading a verified delivery, the templates that map it to
 * a thread and an input, the outbound event types, payloads and retry schedule (the endpoint URL
 * policy is `shared/outbound/`'s). No Cloudflare or Hono import: Web Crypto and noble's hashes run in workerd
 * and Node alike.
 */
export * from "./delivery.ts";
export * from "./events.ts";
export * from "./signatures.ts";
export * from "./templates.ts";
