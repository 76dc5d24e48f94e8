import { sha1 } from "@noble/hashes/legacy.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";

/**
 * The names the model sees for MCP tools, as Codex gives them: `mcp__{label}__{tool}`, every char
 * outside `[A-Za-z0-9_-]` replaced by `_`, and a name past 64 chars cut to its first 24 followed
 * by the 40 hex digits of the SHA-1 of the raw (unsanitized) name, so a long name stays unique
 * and the same on every step. The server is always called with the tool's own name: the model's
 * name is only looked up, never parsed back.
 */
export const MCP_TOOL_NAME_DELIMITER = "__";
/** The longest tool name providers take (Responses and Chat Completions both cap it at 64). */
export const MAX_TOOL_NAME_CHARS = 64;
/** What a name cut for length keeps of itself before the SHA-1 suffix (24 + 40 = 64). */
const KEPT_PREFIX_CHARS = 24;

/** One tool a server lists, under the label the thread knows the server by. */
export interface McpToolIdentity {
  readonly label: string;
  readonly tool: string;
}

export interface QualifiedMcpTool extends McpToolIdentity {
  /** The name in the step's tool list and in the model's `function_call`. */
  readonly name: string;
}

export interface SkippedMcpTool extends McpToolIdentity {
  readonly reason: string;
}

/** `mcp__{label}__{tool}` before sanitizing: what the SHA-1 of a cut name is taken of. */
export function rawToolName({ label, tool }: McpToolIdentity): string {
  return `mcp${MCP_TOOL_NAME_DELIMITER}${label}${MCP_TOOL_NAME_DELIMITER}${tool}`;
}

/** The model-visible name of one tool, alone (collisions are `qualifyMcpTools`' matter). */
export function qualifiedToolName(identity: McpToolIdentity): string {
  const raw = rawToolName(identity);
  const sanitized = raw.replace(/[^A-Za-z0-9_-]/g, "_") || "_";
  if (sanitized.length <= MAX_TOOL_NAME_CHARS) return sanitized;
  return sanitized.slice(0, KEPT_PREFIX_CHARS) + bytesToHex(sha1(utf8ToBytes(raw)));
}

/**
 * Names a step's MCP tools. Tools are taken in the order of their raw names, so the outcome does
 * not depend on the order servers answered in: the first of two tools with one name keeps it,
 * the other is skipped, as is a tool whose name a client tool (`reserved`) already has.
 */
export function qualifyMcpTools(
  tools: readonly McpToolIdentity[],
  reserved: ReadonlySet<string> = new Set(),
): { qualified: QualifiedMcpTool[]; skipped: SkippedMcpTool[] } {
  const byRaw = [...tools].sort((a, b) => compare(rawToolName(a), rawToolName(b)));
  const owners = new Map<string, McpToolIdentity>();
  const qualified: QualifiedMcpTool[] = [];
  const skipped: SkippedMcpTool[] = [];
  for (const tool of byRaw) {
    const identity = { label: tool.label, tool: tool.tool };
    const name = qualifiedToolName(identity);
    const owner = owners.get(name);
    if (reserved.has(name)) {
      skipped.push({ ...identity, reason: `a client tool is already named "${name}"` });
    } else if (owner !== undefined) {
      const same = owner.label === tool.label && owner.tool === tool.tool;
      skipped.push({
        ...identity,
        reason: same
          ? `server "${tool.label}" lists tool "${tool.tool}" twice`
          : `its name "${name}" is also the name of tool "${owner.tool}" of server "${owner.label}"`,
      });
    } else {
      owners.set(name, identity);
      qualified.push({ ...identity, name });
    }
  }
  return { qualified, skipped };
}

/** Code-unit order: the same in every runtime and locale. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
