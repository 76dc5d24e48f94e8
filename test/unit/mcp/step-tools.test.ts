import { describe, expect, it } from "vitest";
import {
  MAX_MCP_TOOL_BYTES,
  MAX_MCP_TOOLS_PER_STEP,
  type McpServerListing,
  mcpStepTools,
} from "../../../shared/mcp/index.ts";

const object = (properties: Record<string, unknown> = {}) => ({ type: "object", properties });

function nested(levels: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < levels; i++) schema = object({ inner: schema });
  return schema;
}

describe("a step's MCP tools", () => {
  it("offers each server's allowed tools as function tools, in raw-name order", () => {
    const listings: McpServerListing[] = [
      {
        label: "gh",
        allowedTools: ["issues"],
        tools: [
          { name: "issues", description: "List issues", inputSchema: object({ q: {} }) },
          { name: "delete_repo", inputSchema: object() },
        ],
      },
      {
        label: "docs",
        allowedTools: null,
        tools: [{ name: "search", inputSchema: { type: "object" } }],
      },
    ];
    const { tools, warnings } = mcpStepTools(listings, []);
    expect(warnings).toEqual([]);
    expect(tools).toEqual([
      {
        label: "docs",
        tool: "search",
        spec: {
          type: "function",
          name: "mcp__docs__search",
          description: "",
          parameters: { type: "object", properties: {} },
          strict: false,
        },
      },
      {
        label: "gh",
        tool: "issues",
        spec: {
          type: "function",
          name: "mcp__gh__issues",
          description: "List issues",
          parameters: object({ q: {} }),
          strict: false,
        },
      },
    ]);
    // Another answer order gives the same list, byte for byte.
    expect(JSON.stringify(mcpStepTools([...listings].reverse(), []).tools)).toBe(
      JSON.stringify(tools),
    );
  });

  it("leaves out, with a warning each, what a client tool names, a duplicate, a bad or deep or huge schema", () => {
    const { tools, warnings } = mcpStepTools(
      [
        {
          label: "s",
          allowedTools: null,
          tools: [
            { name: "taken", inputSchema: object() },
            { name: "twice", inputSchema: object() },
            { name: "twice", inputSchema: object({ other: {} }) },
            { name: "no_schema" },
            { name: "deep", inputSchema: nested(40) },
            { name: "huge", description: "x".repeat(MAX_MCP_TOOL_BYTES), inputSchema: object() },
            { name: "fine", inputSchema: nested(8) },
          ],
        },
      ],
      [{ type: "function", name: "mcp__s__taken", description: "", parameters: object() }],
    );
    expect(tools.map((t) => t.tool)).toEqual(["fine", "twice"]);
    // The first listing of a name is the one offered.
    expect(tools[1]?.spec.parameters).toEqual(object());
    expect(warnings.map((w) => [w.tool, w.message.split(":")[1]?.trim().split(" ")[0]])).toEqual([
      ["taken", "a"],
      ["twice", "server"],
      ["deep", "its"],
      ["huge", "its"],
      ["no_schema", "its"],
    ]);
    expect(warnings.find((w) => w.tool === "huge")?.message).toContain(`${MAX_MCP_TOOL_BYTES}`);
  });

  it(`offers at most ${MAX_MCP_TOOLS_PER_STEP} MCP tools in a step`, () => {
    const many = Array.from({ length: MAX_MCP_TOOLS_PER_STEP + 3 }, (_, i) => ({
      name: `t${String(i).padStart(3, "0")}`,
      inputSchema: object(),
    }));
    const { tools, warnings } = mcpStepTools([{ label: "m", allowedTools: null, tools: many }], []);
    expect(tools).toHaveLength(MAX_MCP_TOOLS_PER_STEP);
    expect(warnings.map((w) => w.tool)).toEqual(["t128", "t129", "t130"]);
  });
});
