/**
 * Where the service may send a request a tenant configured (webhook endpoints; MCP servers):
 * one URL policy, checked when the URL is given and again before each request. Pure: the WHATWG
 * URL parser and the special-use address ranges (held equal to ipaddr.js's by the tests), no
 * Cloudflare import.
 */
export * from "./outbound-url.ts";
