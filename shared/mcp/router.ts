import type { Clock } from "../ports/index.ts";
import type {
  FunctionTool,
  McpServerDefinition,
  McpServerRef,
  McpServerResolution,
} from "../protocol/index.ts";
import { needsApproval } from "./approval.ts";
import { type FetchLike, McpConnection } from "./connection.ts";
import { McpListingCache } from "./listing-cache.ts";
import type {
  ServerToolCapture,
  ServerTools,
  ServerToolTarget,
  ServerToolWarning,
} from "./server-tools.ts";
import { type McpServerListing, mcpStepTools } from "./step-tools.ts";
import { type McpToolOutput, toolOutputOf } from "./tool-result.ts";

/**
 * How long a resolution of a thread's references against the tenant's registry is used: a
 * registry change (a new URL, new headers, a tool hidden) reaches a running thread within it,
 * and a busy thread asks the tenant's object at most this often.
 */
export const MCP_RESOLUTION_TTL_MS = 30 * 1000;

export interface McpToolRouterDeps {
  readonly clock: Clock;
  /** The references against the tenant's registry; rejects when the registry cannot answer. */
  readonly resolve: (refs: readonly McpServerRef[]) => Promise<McpServerResolution>;
  /** The network (the caller's, already bound by its outbound policy). */
  readonly fetch: FetchLike;
  /** Why a server's URL may not be sent to, or undefined (the outbound URL policy). */
  readonly refusal: (url: string) => string | undefined;
}

interface Connected {
  readonly key: string;
  readonly connection: McpConnection;
}

/**
 * One thread instance's MCP servers (`ServerTools`): the tenant's registrations resolved and
 * cached, a session per server kept while its URL, headers and timeout stay the same, and a
 * listing cache that `notifications/tools/list_changed` invalidates. All of it lives with the
 * instance: an evicted thread resolves, connects and lists again on its next step.
 */
export class McpToolRouter implements ServerTools {
  readonly #deps: McpToolRouterDeps;
  readonly #listings: McpListingCache;
  readonly #connections = new Map<string, Connected>();
  #resolved: { key: string; atMs: number; resolution: McpServerResolution } | undefined;

  constructor(deps: McpToolRouterDeps) {
    this.#deps = deps;
    this.#listings = new McpListingCache(deps.clock);
  }

  async capture(
    refs: readonly McpServerRef[],
    clientTools: readonly FunctionTool[],
    signal?: AbortSignal,
  ): Promise<ServerToolCapture> {
    if (refs.length === 0) return { tools: [], warnings: [] };
    let resolution: McpServerResolution;
    try {
      resolution = await this.#resolve(refs);
    } catch (err) {
      const message = `the MCP server registry could not be read: ${messageOf(err)}`;
      return { tools: [], warnings: refs.map((ref) => unavailable(ref.label, message)) };
    }
    const warnings: ServerToolWarning[] = resolution.unavailable.map((u) =>
      unavailable(u.label, u.reason),
    );
    const listed = await Promise.all(
      resolution.servers.map(async (server): Promise<McpServerListing | ServerToolWarning> => {
        const refused = this.#deps.refusal(server.url);
        if (refused !== undefined) {
          return unavailable(server.label, `its URL is refused (${refused})`);
        }
        try {
          return {
            label: server.label,
            tools: await this.#list(server, signal),
            allowedTools: server.allowed_tools,
          };
        } catch (err) {
          return unavailable(server.label, `its tools could not be listed: ${messageOf(err)}`);
        }
      }),
    );
    const listings: McpServerListing[] = [];
    for (const entry of listed) {
      if ("code" in entry) warnings.push(entry);
      else listings.push(entry);
    }
    const step = mcpStepTools(listings, clientTools);
    for (const w of step.warnings) {
      warnings.push({
        code: "mcp_tool_left_out",
        server_label: w.label,
        message: `${w.tool}: ${w.message}`,
      });
    }
    const policies = new Map(resolution.servers.map((s) => [s.label, s.require_approval]));
    const tools = step.tools.map((tool) => {
      const policy = policies.get(tool.label) ?? "always";
      return { ...tool, requireApproval: needsApproval(policy, tool.tool) };
    });
    return { tools, warnings };
  }

  async call(
    refs: readonly McpServerRef[],
    target: ServerToolTarget,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<McpToolOutput> {
    let server: McpServerDefinition | undefined;
    try {
      server = (await this.#resolve(refs)).servers.find((s) => s.label === target.label);
    } catch (err) {
      return failed(`the MCP server registry could not be read: ${messageOf(err)}`);
    }
    if (server === undefined) return failed(`MCP server "${target.label}" is not available.`);
    const connection = this.#connection(server);
    if (typeof connection === "string") {
      return failed(`MCP server "${server.label}" was not called: ${connection}`);
    }
    try {
      return toolOutputOf(await connection.callTool(target.tool, args, signal));
    } catch (err) {
      signal.throwIfAborted();
      // The server may have changed under the call: list it again next step.
      this.#listings.invalidate(server.label);
      return failed(`MCP server "${server.label}" failed the call: ${messageOf(err)}`);
    }
  }

  async #resolve(refs: readonly McpServerRef[]): Promise<McpServerResolution> {
    const key = JSON.stringify(refs);
    const now = this.#deps.clock.nowMs();
    const cached = this.#resolved;
    if (cached?.key === key && now - cached.atMs < MCP_RESOLUTION_TTL_MS) return cached.resolution;
    const resolution = await this.#deps.resolve(refs);
    this.#resolved = { key, atMs: now, resolution };
    return resolution;
  }

  async #list(server: McpServerDefinition, signal: AbortSignal | undefined) {
    const cached = this.#listings.get(server.label, server.url);
    if (cached !== undefined) return cached;
    const connection = this.#connection(server);
    if (typeof connection === "string") throw new Error(connection);
    const tools = await connection.listTools(signal);
    this.#listings.set(server.label, server.url, tools);
    return tools;
  }

  /** The server's session, a new one when its registration changed; or why none may be opened. */
  #connection(server: McpServerDefinition): McpConnection | string {
    const refused = this.#deps.refusal(server.url);
    if (refused !== undefined) return `its URL is refused (${refused})`;
    const key = JSON.stringify([server.url, server.headers, server.timeout_ms]);
    const current = this.#connections.get(server.label);
    if (current?.key === key) return current.connection;
    if (current) void current.connection.close();
    const connection = new McpConnection({
      url: server.url,
      headers: server.headers,
      fetch: this.#deps.fetch,
      timeoutMs: server.timeout_ms,
      onToolsChanged: () => this.#listings.invalidate(server.label),
    });
    this.#connections.set(server.label, { key, connection });
    return connection;
  }
}

function unavailable(label: string, reason: string): ServerToolWarning {
  return {
    code: "mcp_server_unavailable",
    server_label: label,
    message: `MCP server "${label}" is left out of this step: ${reason}`,
  };
}

function failed(message: string): McpToolOutput {
  return { output: message, success: false };
}

/** An error's message, for the model and the turn's warnings (never a server's headers). */
function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
