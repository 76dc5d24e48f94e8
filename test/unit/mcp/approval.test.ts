import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { narrowedTools, needsApproval, stricterApproval } from "../../../shared/mcp/index.ts";
import type { RequireApproval } from "../../../shared/protocol/index.ts";

const TOOLS = ["read", "write", "delete", "list"];
const tools = fc.subarray(TOOLS);
const policy: fc.Arbitrary<RequireApproval> = fc.oneof(
  fc.constant("always" as const),
  fc.constant("never" as const),
  tools.map((tool_names) => ({ never: { tool_names } })),
);

describe("MCP approvals", () => {
  it("reads Responses' require_approval shapes", () => {
    expect(needsApproval("always", "read")).toBe(true);
    expect(needsApproval("never", "delete")).toBe(false);
    const some: RequireApproval = { never: { tool_names: ["read"] } };
    expect(needsApproval(some, "read")).toBe(false);
    expect(needsApproval(some, "delete")).toBe(true);
  });

  it("a reference can ask for approval, never waive one the registration asks for", () => {
    fc.assert(
      fc.property(policy, fc.option(policy, { nil: undefined }), (registered, requested) => {
        const combined = stricterApproval(registered, requested);
        for (const tool of TOOLS) {
          const either =
            needsApproval(registered, tool) ||
            (requested !== undefined && needsApproval(requested, tool));
          expect(needsApproval(combined, tool), tool).toBe(either);
        }
      }),
    );
  });

  it("a reference can hide tools, never unhide one", () => {
    expect(narrowedTools(null, undefined)).toBeNull();
    expect(narrowedTools(null, ["read"])).toEqual(["read"]);
    expect(narrowedTools(["read", "list"], undefined)).toEqual(["read", "list"]);
    expect(narrowedTools(["read", "list"], ["list", "delete"])).toEqual(["list"]);
  });
});
