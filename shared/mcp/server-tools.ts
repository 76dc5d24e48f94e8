import type { FunctionTool, McpServerRef } from "../protocol/index.ts";
import type { McpStepTool } from "./step-tools.ts";
import type { McpToolOutput } from "./tool-result.ts";

/**
 * The port through which a turn reaches its MCP servers (design §16). The engine is given one; it
 * never opens a connection itself. The Thread object's is an `McpToolRouter` over the tenant's
 * registry and the guarded network.
 */
export interface ServerTools {
  /**
   * The tools the servers `refs` name offer to one step, past `clientTools` (whose names win).
   * Never throws: a server that cannot be reached is a warning, and its tools are left out.
   */
  capture(
    refs: readonly McpServerRef[],
    clientTools: readonly FunctionTool[],
    signal?: AbortSignal,
  ): Promise<ServerToolCapture>;
  /**
   * Calls `target` once with `args`. A failure (the server's `isError`, a timeout, a server that
   * is gone) is an unsuccessful output for the model; only an abort of `signal` rejects.
   */
  call(
    refs: readonly McpServerRef[],
    target: ServerToolTarget,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<McpToolOutput>;
}

/** A tool of the step that a server runs, and whether a call of it waits for approval. */
export interface ServerTool extends McpStepTool {
  readonly requireApproval: boolean;
}

/** Whom a call goes to: the server's label and the tool's own name. */
export interface ServerToolTarget {
  readonly label: string;
  readonly tool: string;
}

/** Why a step went without some of a server's tools: the server, or one tool. */
export const SERVER_TOOL_WARNING_CODES = ["mcp_server_unavailable", "mcp_tool_left_out"] as const;
export type ServerToolWarningCode = (typeof SERVER_TOOL_WARNING_CODES)[number];

export function isServerToolWarningCode(code: unknown): code is ServerToolWarningCode {
  return (SERVER_TOOL_WARNING_CODES as readonly unknown[]).includes(code);
}

/** Why some tools are missing from a step; the turn goes on without them. */
export interface ServerToolWarning {
  readonly code: ServerToolWarningCode;
  readonly server_label: string;
  readonly message: string;
}

export interface ServerToolCapture {
  readonly tools: readonly ServerTool[];
  readonly warnings: readonly ServerToolWarning[];
}

export const NO_SERVER_TOOLS: ServerToolCapture = Object.freeze({ tools: [], warnings: [] });
