import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  CreateMcpServerBodySchema,
  type McpServerRecord,
  mcpServerHeadersMaxBytes,
  mcpServerHeadersMaxCount,
  mcpServerTimeoutMsDefault,
  mcpServerTimeoutMsMax,
  mcpServerTimeoutMsMin,
  PatchMcpServerBodySchema,
  resolveMcpServerRef,
  stricterApproval,
} from "../../../shared/api/index.ts";
import type { RequireApproval } from "../../../shared/protocol/index.ts";

const record = (over: Partial<McpServerRecord["resource"]> = {}): McpServerRecord => ({
  resource: {
    object: "mcp_server",
    label: "docs",
    url: "https://mcp.example.com/mcp",
    header_names: ["authorization"],
    allowed_tools: null,
    require_approval: "always",
    timeout_ms: 30_000,
    created_at: "2026-01-01T00:00:00.000Z",
    updated_at: "2026-01-01T00:00:00.000Z",
    ...over,
  },
  headers: { authorization: "Bearer s3cret" },
});

/** Whether a call of `tool` pauses for approval under `policy`. */
function asks(policy: RequireApproval, tool: string): boolean {
  if (policy === "always") return true;
  if (policy === "never") return false;
  return !policy.never.tool_names.includes(tool);
}

const TOOLS = ["a", "b", "c", "d"];
const approval: fc.Arbitrary<RequireApproval> = fc.oneof(
  fc.constantFrom<RequireApproval>("always", "never"),
  fc.subarray(TOOLS).map((tool_names): RequireApproval => ({ never: { tool_names } })),
);

describe("the approval a reference and a registration give together", () => {
  it("asks for a call exactly when either one asks for it", () => {
    fc.assert(
      fc.property(approval, approval, (registered, referenced) => {
        const combined = stricterApproval(registered, referenced);
        for (const tool of [...TOOLS, "e"]) {
          expect(asks(combined, tool)).toBe(asks(registered, tool) || asks(referenced, tool));
        }
      }),
    );
  });

  it("writes the cases out: always wins, never gives way, two exemptions keep what both exempt", () => {
    const exempt = (...tool_names: string[]): RequireApproval => ({ never: { tool_names } });
    expect(stricterApproval("never", "always")).toBe("always");
    expect(stricterApproval("always", "never")).toBe("always");
    expect(stricterApproval("never", "never")).toBe("never");
    expect(stricterApproval("never", exempt("a"))).toEqual(exempt("a"));
    expect(stricterApproval(exempt("a", "b"), exempt("b", "c"))).toEqual(exempt("b"));
    expect(stricterApproval(exempt("a"), exempt("c"))).toBe("always");
  });
});

describe("a thread's reference against the registration", () => {
  it("with no narrowing: the registration, with its headers", () => {
    expect(resolveMcpServerRef({ label: "docs" }, record())).toEqual({
      server: {
        label: "docs",
        url: "https://mcp.example.com/mcp",
        headers: { authorization: "Bearer s3cret" },
        allowed_tools: null,
        require_approval: "always",
        timeout_ms: 30_000,
      },
    });
  });

  it("allowed_tools: the registration's that the reference names, in the registration's order", () => {
    const registered = record({ allowed_tools: ["search", "fetch", "delete"] });
    const narrowed = resolveMcpServerRef(
      { label: "docs", allowed_tools: ["delete", "search", "unknown"] },
      registered,
    );
    expect(narrowed).toMatchObject({ server: { allowed_tools: ["search", "delete"] } });
    // Every tool registered: the reference's own list, once each.
    expect(
      resolveMcpServerRef({ label: "docs", allowed_tools: ["x", "y", "x"] }, record()),
    ).toMatchObject({ server: { allowed_tools: ["x", "y"] } });
    // None left: the server cannot be used, and says why.
    expect(resolveMcpServerRef({ label: "docs", allowed_tools: ["unknown"] }, registered)).toEqual({
      unavailable: 'none of the allowed_tools is allowed by "docs"',
    });
  });

  it("require_approval: only stricter than the registration's", () => {
    const waived = record({ require_approval: "never" });
    expect(
      resolveMcpServerRef({ label: "docs", require_approval: "always" }, waived),
    ).toMatchObject({ server: { require_approval: "always" } });
    // A reference cannot waive what the registration asks.
    expect(
      resolveMcpServerRef({ label: "docs", require_approval: "never" }, record()),
    ).toMatchObject({ server: { require_approval: "always" } });
    const someExempt = record({ require_approval: { never: { tool_names: ["search", "fetch"] } } });
    expect(
      resolveMcpServerRef(
        { label: "docs", require_approval: { never: { tool_names: ["search", "delete"] } } },
        someExempt,
      ),
    ).toMatchObject({ server: { require_approval: { never: { tool_names: ["search"] } } } });
  });

  it("url: the registered one, however spelled; another one, or no registration, is unavailable", () => {
    const url = (value: string) => resolveMcpServerRef({ label: "docs", url: value }, record());
    expect(url("https://MCP.example.com:443/mcp")).toHaveProperty("server");
    expect(url("https://mcp.example.com/other")).toEqual({
      unavailable: 'server_url is not the URL registered for "docs"',
    });
    expect(url("not a url")).toHaveProperty("unavailable");
    expect(resolveMcpServerRef({ label: "docs" }, undefined)).toEqual({
      unavailable: 'no MCP server "docs" is registered',
    });
  });
});

describe("the registration's request bodies", () => {
  const base = { label: "docs", url: "https://mcp.example.com/mcp" };

  it("fills the defaults: no headers, every tool, approval always, 60 s", () => {
    expect(CreateMcpServerBodySchema.parse(base)).toEqual({
      ...base,
      headers: {},
      allowed_tools: null,
      require_approval: "always",
      timeout_ms: mcpServerTimeoutMsDefault,
    });
  });

  it("header names are case-insensitive: stored lowercase, one spelled twice refused", () => {
    const parsed = CreateMcpServerBodySchema.parse({
      ...base,
      headers: { Authorization: "Bearer x", "X-Org": "o" },
    });
    expect(parsed.headers).toEqual({ authorization: "Bearer x", "x-org": "o" });
    const twice = CreateMcpServerBodySchema.safeParse({
      ...base,
      headers: { Authorization: "a", authorization: "b" },
    });
    expect(twice.success).toBe(false);
  });

  it("refuses headers the transport sets, bad names and values, and past the limits", () => {
    const accepted = (headers: Record<string, string>) =>
      CreateMcpServerBodySchema.safeParse({ ...base, headers }).success;
    expect(accepted({ "Mcp-Session-Id": "x" })).toBe(false);
    expect(accepted({ "Content-Type": "text/plain" })).toBe(false);
    expect(accepted({ Host: "evil.example" })).toBe(false);
    expect(accepted({ "bad name": "x" })).toBe(false);
    expect(accepted(JSON.parse('{"__proto__": "x"}'))).toBe(false);
    expect(accepted({ authorization: "a\r\nx-injected: 1" })).toBe(false);
    const many = Object.fromEntries(
      Array.from({ length: mcpServerHeadersMaxCount + 1 }, (_, i) => [`x-h${i}`, "v"]),
    );
    expect(accepted(many)).toBe(false);
    const big = Object.fromEntries(
      Array.from({ length: 3 }, (_, i) => [`x-h${i}`, "v".repeat(mcpServerHeadersMaxBytes / 3)]),
    );
    expect(accepted(big)).toBe(false);
  });

  it("timeout_ms within its bounds; allowed_tools a non-empty list without repeats, or null", () => {
    const ok = (extra: Record<string, unknown>) =>
      CreateMcpServerBodySchema.safeParse({ ...base, ...extra }).success;
    expect(ok({ timeout_ms: mcpServerTimeoutMsMin })).toBe(true);
    expect(ok({ timeout_ms: mcpServerTimeoutMsMax })).toBe(true);
    expect(ok({ timeout_ms: mcpServerTimeoutMsMin - 1 })).toBe(false);
    expect(ok({ timeout_ms: mcpServerTimeoutMsMax + 1 })).toBe(false);
    expect(ok({ timeout_ms: 1500.5 })).toBe(false);
    expect(ok({ allowed_tools: [] })).toBe(false);
    expect(ok({ allowed_tools: ["a", "a"] })).toBe(false);
    expect(ok({ allowed_tools: null })).toBe(true);
    expect(ok({ label: "has space" })).toBe(false);
  });

  it("a patch's headers: a merge patch, null removes", () => {
    expect(
      PatchMcpServerBodySchema.parse({ headers: { Authorization: "Bearer y", "X-Org": null } }),
    ).toEqual({ headers: { authorization: "Bearer y", "x-org": null } });
    expect(PatchMcpServerBodySchema.safeParse({ label: "renamed" }).success).toBe(false);
  });
});
