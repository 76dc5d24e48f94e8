import { describe, expect, it } from "vitest";
import { MCP_LISTING_TTL_MS, McpListingCache } from "../../../shared/mcp/index.ts";

function clockAt(start: number) {
  let now = start;
  return { nowMs: () => now, advance: (ms: number) => (now += ms) };
}

const TOOLS = [{ name: "search", inputSchema: { type: "object" } }];

describe("the MCP listing cache", () => {
  it("answers from a listing until its TTL has passed", () => {
    const clock = clockAt(1_000);
    const cache = new McpListingCache(clock);
    expect(cache.get("docs", "https://mcp.example/docs")).toBeUndefined();
    cache.set("docs", "https://mcp.example/docs", TOOLS);
    clock.advance(MCP_LISTING_TTL_MS - 1);
    expect(cache.get("docs", "https://mcp.example/docs")).toBe(TOOLS);
    clock.advance(1);
    expect(cache.get("docs", "https://mcp.example/docs")).toBeUndefined();
  });

  it("lists again after list_changed, and for a server registered at another URL", () => {
    const cache = new McpListingCache(clockAt(0));
    cache.set("docs", "https://mcp.example/docs", TOOLS);
    expect(cache.get("docs", "https://mcp.example/v2")).toBeUndefined();
    expect(cache.get("docs", "https://mcp.example/docs")).toBe(TOOLS);
    cache.invalidate("docs");
    expect(cache.get("docs", "https://mcp.example/docs")).toBeUndefined();
  });
});
