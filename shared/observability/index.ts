/**
 * What an operator reads: structured log lines and the request id that ties the lines of one
 * request together, at the edge, in the objects and in the webhook queue. Pure: no Cloudflare
 * import, no global console (the sink is passed in).
 */
export * from "./log.ts";
export * from "./request-id.ts";
