/**
 * Where the service may send a request a tenant configured (webhook endpoints; MCP servers):
 * one URL policy, checked when the URL is given and again before each request. Pure: the WHATWG
 * URL parser and ipaddr.js, no Cloudflare import.
 */
export * from "./outbound-url.ts";
