import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  MAX_TOOL_NAME_CHARS,
  qualifiedToolName,
  qualifyMcpTools,
} from "../../../shared/mcp/index.ts";
import { FunctionToolSchema } from "../../../shared/protocol/index.ts";

const sha1Hex = (text: string) => createHash("sha1").update(text, "utf8").digest("hex");

describe("MCP tool names", () => {
  it("joins label and tool as Codex does, replacing what a tool name may not hold", () => {
    expect(qualifiedToolName({ label: "docs", tool: "search" })).toBe("mcp__docs__search");
    expect(qualifiedToolName({ label: "gh", tool: "issues.list" })).toBe("mcp__gh__issues_list");
    expect(qualifiedToolName({ label: "x", tool: "naïve tool/2" })).toBe("mcp__x__na_ve_tool_2");
  });

  it("cuts a name past 64 chars to 24 and the SHA-1 of the raw name", () => {
    const tool = `read.${"a".repeat(70)}`;
    const name = qualifiedToolName({ label: "files", tool });
    expect(name).toHaveLength(MAX_TOOL_NAME_CHARS);
    expect(name).toBe(`mcp__files__read_aaaaaaa${sha1Hex(`mcp__files__${tool}`)}`);
    // Exactly 64 is kept as it is.
    const fits = "t".repeat(64 - "mcp__s__".length);
    expect(qualifiedToolName({ label: "s", tool: fits })).toBe(`mcp__s__${fits}`);
  });

  it("skips a second tool of one name, across servers and against client tools", () => {
    const { qualified, skipped } = qualifyMcpTools(
      [
        { label: "a", tool: "b__c" },
        { label: "a__b", tool: "c" },
        { label: "docs", tool: "search" },
        { label: "docs", tool: "search" },
        { label: "docs", tool: "fetch" },
      ],
      new Set(["mcp__docs__fetch"]),
    );
    expect(qualified.map((t) => [t.name, t.label, t.tool])).toEqual([
      ["mcp__a__b__c", "a", "b__c"],
      ["mcp__docs__search", "docs", "search"],
    ]);
    expect(skipped.map((t) => [t.label, t.tool])).toEqual([
      ["a__b", "c"],
      ["docs", "fetch"],
      ["docs", "search"],
    ]);
    expect(skipped[0]?.reason).toContain('tool "b__c" of server "a"');
    expect(skipped[1]?.reason).toContain("client tool");
    expect(skipped[2]?.reason).toContain("twice");
  });

  it("gives every tool a valid, unique name, whatever order the servers listed them in", () => {
    const label = fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/);
    const identity = fc.record({ label, tool: fc.string({ minLength: 1, maxLength: 128 }) });
    fc.assert(
      fc.property(fc.array(identity, { maxLength: 12 }), fc.nat(), (tools, seed) => {
        const first = qualifyMcpTools(tools);
        const shuffled = [...tools].sort(
          (a, b) => ((a.tool.length * 31 + seed) % 7) - ((b.tool.length * 31 + seed) % 7),
        );
        expect(qualifyMcpTools(shuffled)).toEqual(first);
        const names = first.qualified.map((t) => t.name);
        expect(new Set(names).size).toBe(names.length);
        expect(first.qualified.length + first.skipped.length).toBe(tools.length);
        for (const name of names) {
          expect(FunctionToolSchema.safeParse({ name }).success, name).toBe(true);
        }
      }),
    );
  });
});
