import { utf8ByteLength } from "../context-manager/index.ts";
import { type FunctionTool, FunctionToolSchema } from "../protocol/index.ts";
import { qualifyMcpTools } from "./tool-names.ts";

/** The MCP servers' tools one step may offer, past the client's own (the provider's caps). */
export const MAX_MCP_TOOLS_PER_STEP = 128;
/** One MCP tool as the prompt carries it, as JSON: a schema past this is a server's mistake. */
export const MAX_MCP_TOOL_BYTES = 32 * 1024;

/** A tool as `tools/list` describes it, as far as the prompt reads it. */
export interface McpListedTool {
  readonly name: string;
  readonly description?: string | undefined;
  readonly inputSchema?: unknown;
}

/** What one reachable server listed, and which of its tools the thread may use (null: all). */
export interface McpServerListing {
  readonly label: string;
  readonly tools: readonly McpListedTool[];
  readonly allowedTools: readonly string[] | null;
}

/** A tool of the step's list that a server runs: its spec, and whom to call with which name. */
export interface McpStepTool {
  readonly label: string;
  /** The tool's own name, which the server is called with. */
  readonly tool: string;
  readonly spec: FunctionTool;
}

/** Why a server's tool is not in the step (the step goes on without it). */
export interface McpToolWarning {
  readonly label: string;
  readonly tool: string;
  readonly message: string;
}

/**
 * The MCP part of one step's tool list (design §16 capture per step): each server's allowed tools,
 * named as Codex names them, as `function` tools whose parameters are the tool's `inputSchema`
 * (an empty `properties` added when it has none, `strict: false`), bounded like a client's tool
 * (name, nesting) and in bytes. In raw-name order, so the list (and the prompt's bytes) does not
 * depend on the order servers answered or listed in.
 */
export function mcpStepTools(
  listings: readonly McpServerListing[],
  clientTools: readonly FunctionTool[],
): { tools: McpStepTool[]; warnings: McpToolWarning[] } {
  // The first listing of a name is the one offered; a second is reported by `qualifyMcpTools`.
  const listed = new Map<string, McpListedTool>();
  const key = (label: string, tool: string) => JSON.stringify([label, tool]);
  const identities: { label: string; tool: string }[] = [];
  for (const { label, tools, allowedTools } of listings) {
    const allowed = allowedTools === null ? undefined : new Set(allowedTools);
    for (const tool of tools) {
      if (allowed !== undefined && !allowed.has(tool.name)) continue;
      identities.push({ label, tool: tool.name });
      if (!listed.has(key(label, tool.name))) listed.set(key(label, tool.name), tool);
    }
  }
  const named = qualifyMcpTools(identities, new Set(clientTools.map((t) => t.name)));
  const warnings: McpToolWarning[] = named.skipped.map(({ label, tool, reason }) => ({
    label,
    tool,
    message: `left out: ${reason}`,
  }));
  const tools: McpStepTool[] = [];
  for (const { label, tool, name } of named.qualified) {
    const listedTool = listed.get(key(label, tool));
    const spec = listedTool && specOf(name, listedTool);
    if (typeof spec === "string") {
      warnings.push({ label, tool, message: `left out: ${spec}` });
    } else if (spec !== undefined && tools.length >= MAX_MCP_TOOLS_PER_STEP) {
      warnings.push({ label, tool, message: `left out: past ${MAX_MCP_TOOLS_PER_STEP} MCP tools` });
    } else if (spec !== undefined) {
      tools.push({ label, tool, spec });
    }
  }
  return { tools, warnings };
}

/** The tool's spec, or why it cannot be offered. */
function specOf(name: string, tool: McpListedTool): FunctionTool | string {
  const schema = tool.inputSchema;
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    return "its inputSchema is not a JSON object";
  }
  const parameters = "properties" in schema ? schema : { ...schema, properties: {} };
  const parsed = FunctionToolSchema.safeParse({
    type: "function",
    name,
    description: tool.description ?? "",
    parameters,
    strict: false,
  });
  if (!parsed.success) return "its inputSchema nests deeper than a tool's parameters may";
  const bytes = utf8ByteLength(JSON.stringify(parsed.data));
  if (bytes > MAX_MCP_TOOL_BYTES) {
    return `its description and schema are ${bytes} bytes of JSON; at most ${MAX_MCP_TOOL_BYTES}`;
  }
  return parsed.data;
}
