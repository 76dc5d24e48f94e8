import * as z from "../zod/index.ts";

/**
 * Remote MCP servers as a thread names them (design §16). The tenant registers a server once
 * (`/v1/mcp-servers`: label, URL, credentials); a thread's configuration only refers to it by
 * label, so no credential ever enters a configuration, a rollout or an export (invariant 16).
 */

/** A server's label: as Codex's `validate_mcp_server_name`, capped at 64 chars. */
export const McpServerLabelSchema = z.onFirstUse(() =>
  z
    .string()
    .check(z.regex(/^[A-Za-z0-9_-]{1,64}$/, "server labels are 1-64 chars of [A-Za-z0-9_-]")),
);

/** An MCP tool's own name, as the server lists it (1-128 chars, the 2025-11-25 guidance). */
export const McpToolNameSchema = z.onFirstUse(() =>
  z.string().check(z.minLength(1), z.maxLength(128)),
);

/** Which calls pause for approval: Responses' shape (`{never: {tool_names}}` exempts those tools). */
export const RequireApprovalSchema = z.onFirstUse(() =>
  z.union([
    z.enum(["always", "never"]),
    z.strictObject({
      never: z.strictObject({
        tool_names: z.array(McpToolNameSchema).check(z.maxLength(256)),
      }),
    }),
  ]),
);

/**
 * A thread's reference to a server it may use. `allowed_tools` and `require_approval`, when
 * set, narrow what the registration allows: a reference can hide tools and ask for approval,
 * never unhide or waive it.
 */
export const McpServerRefSchema = z.onFirstUse(() =>
  z.strictObject({
    label: McpServerLabelSchema,
    /** Set by an inline entry's `server_url`: the registration must have this URL. */
    url: z.optional(z.string().check(z.minLength(1), z.maxLength(2048))),
    allowed_tools: z.optional(z.array(McpToolNameSchema).check(z.maxLength(256))),
    require_approval: z.optional(RequireApprovalSchema),
  }),
);

/**
 * The Responses-style inline entry in a configuration's `tools`: the same thing as naming the
 * server in `mcp_servers`. `server_url`, when given, must be the registered server's URL.
 */
export const McpToolEntrySchema = z.onFirstUse(() =>
  z.strictObject({
    type: z.literal("mcp"),
    server_label: McpServerLabelSchema,
    server_url: z.optional(z.string().check(z.minLength(1), z.maxLength(2048))),
    allowed_tools: z.optional(z.array(McpToolNameSchema).check(z.maxLength(256))),
    require_approval: z.optional(RequireApprovalSchema),
  }),
);

export type RequireApproval = z.output<typeof RequireApprovalSchema>;
export type McpServerRef = z.output<typeof McpServerRefSchema>;
export type McpToolEntry = z.output<typeof McpToolEntrySchema>;

/**
 * A server as a thread uses it: its registration with the thread's narrowing applied, and its
 * credentials. Held in memory only; the thread never writes one anywhere (invariant 16).
 */
export interface McpServerDefinition {
  readonly label: string;
  readonly url: string;
  /** Sent on every request to the server; never returned, logged or persisted by the thread. */
  readonly headers: Readonly<Record<string, string>>;
  /** null: every tool the server lists. */
  readonly allowed_tools: readonly string[] | null;
  readonly require_approval: RequireApproval;
  readonly timeout_ms: number;
}

/**
 * A thread's references resolved against the tenant's registry (the Tenant's
 * `resolveMcpServers`): the servers it may use, and the labels it names that it cannot (a label
 * not registered, an inline `server_url` that is not the registered one), each left out of the
 * step with a warning on the turn.
 */
export interface McpServerResolution {
  readonly servers: readonly McpServerDefinition[];
  readonly unavailable: readonly { readonly label: string; readonly reason: string }[];
}

/**
 * A server tool call waiting for a person's yes or no (design §16 approvals): Responses'
 * `mcp_approval_request` item (`id`, `server_label`, `name`, `arguments`), plus the `call_id` of
 * the `function_call` it holds back. `name` is the tool's own name, as the server lists it.
 */
export const McpApprovalRequestSchema = z.onFirstUse(() =>
  z.strictObject({
    type: z.literal("mcp_approval_request"),
    id: z.string(),
    server_label: z.string(),
    name: z.string(),
    arguments: z.string(),
    call_id: z.string(),
  }),
);

export type McpApprovalRequest = z.output<typeof McpApprovalRequestSchema>;
