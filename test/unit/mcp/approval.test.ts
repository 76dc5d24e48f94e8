import { describe, expect, it } from "vitest";
import { needsApproval } from "../../../shared/mcp/index.ts";
import type { RequireApproval } from "../../../shared/protocol/index.ts";

describe("MCP approvals", () => {
  it("reads Responses' require_approval shapes", () => {
    expect(needsApproval("always", "read")).toBe(true);
    expect(needsApproval("never", "delete")).toBe(false);
    const some: RequireApproval = { never: { tool_names: ["read"] } };
    expect(needsApproval(some, "read")).toBe(false);
    expect(needsApproval(some, "delete")).toBe(true);
  });
});
