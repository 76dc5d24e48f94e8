import * as z from "../zod/index.ts";
import { MAX_TOOL_PARAMETERS_DEPTH, nestedWithin } from "./json-nesting.ts";
import { recordOf } from "./json-record.ts";
import { McpServerLabelSchema, McpServerRefSchema, McpToolEntrySchema } from "./mcp.ts";

/**
 * Thread configuration as the API accepts it (design §8). The same shape serves thread creation
 * and per-turn `overrides`: every field is optional, and what a request sets becomes the
 * thread's new default. `null` clears a clearable field (agents_md, personality, a custom section).
 */

export const SandboxModeSchema = z.onFirstUse(() =>
  z.enum(["read-only", "workspace-write", "danger-full-access"]),
);
export const ApprovalPolicySchema = z.onFirstUse(() =>
  z.enum(["never", "on-request", "on-failure", "untrusted"]),
);

export const PermissionsConfigSchema = z.onFirstUse(() =>
  z.strictObject({
    sandbox: SandboxModeSchema,
    approval_policy: ApprovalPolicySchema,
    writable_roots: z._default(z.array(z.string().check(z.minLength(1))), []),
    network_access: z._default(z.boolean(), false),
  }),
);

export const EnvironmentConfigSchema = z.onFirstUse(() =>
  z.strictObject({
    id: z.string().check(z.minLength(1), z.maxLength(128)),
    cwd: z.string().check(z.minLength(1)),
    shell: z.optional(z.string().check(z.minLength(1))),
    status: z.optional(z.enum(["available", "starting"])),
  }),
);

export const CollaborationModeConfigSchema = z.onFirstUse(() =>
  z.strictObject({
    mode: z.string().check(z.minLength(1)),
    instructions: z.optional(z.string()),
  }),
);

export const AgentsMdConfigSchema = z.onFirstUse(() =>
  z.strictObject({
    text: z.string(),
    directory: z.string().check(z.minLength(1)),
  }),
);

export const ContextSectionIdSchema = z.onFirstUse(() =>
  z
    .string()
    .check(z.regex(/^[A-Za-z0-9_.-]{1,64}$/, "section ids are 1-64 chars of [A-Za-z0-9_.-]")),
);
export const ContextSectionConfigSchema = z.onFirstUse(() =>
  z.strictObject({
    role: z.enum(["user", "developer"]),
    text: z.string(),
  }),
);

export const FunctionToolSchema = z.onFirstUse(() =>
  z.strictObject({
    type: z._default(z.literal("function"), "function"),
    name: z
      .string()
      .check(z.regex(/^[A-Za-z0-9_-]{1,64}$/, "tool names are 1-64 chars of [A-Za-z0-9_-]")),
    description: z._default(z.string(), ""),
    parameters: z._default(
      recordOf(z.string(), z.unknown()).check(
        nestedWithin(MAX_TOOL_PARAMETERS_DEPTH, "parameters"),
      ),
      { type: "object", properties: {} },
    ),
    strict: z.optional(z.boolean()),
  }),
);

export const TruncationConfigSchema = z.onFirstUse(() =>
  z.union([
    z.strictObject({ tokens: z.number().check(z.int(), z.positive()) }),
    z.strictObject({ bytes: z.number().check(z.int(), z.positive()) }),
  ]),
);

export const NetworkConfigSchema = z.onFirstUse(() =>
  z.strictObject({
    allowed_domains: z._default(z.array(z.string()), []),
    denied_domains: z._default(z.array(z.string()), []),
  }),
);

/** The Responses API's reasoning efforts, as Codex names them. */
export const ReasoningEffortSchema = z.onFirstUse(() =>
  z.enum(["none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra"]),
);
/** `none` asks for no reasoning summary: the request then carries no `summary`. */
export const ReasoningSummarySchema = z.onFirstUse(() =>
  z.enum(["auto", "concise", "detailed", "none"]),
);
export const VerbositySchema = z.onFirstUse(() => z.enum(["low", "medium", "high"]));

/** Reasoning settings of a model (catalog defaults) or of a thread (overrides of them). */
export const ReasoningConfigSchema = z.onFirstUse(() =>
  z.strictObject({
    effort: z.optional(ReasoningEffortSchema),
    summary: z.optional(ReasoningSummarySchema),
  }),
);

export const CurrentTimeReminderConfigSchema = z.onFirstUse(() =>
  z.strictObject({
    reminder_interval_model_requests: z.number().check(z.int(), z.gte(1), z.lte(10_000)),
  }),
);

/** The longest idleness `idle_compaction` may wait for: a day (no provider caches longer). */
export const IDLE_COMPACTION_MAX_AFTER_IDLE_S = 86_400;
/** The largest context threshold `idle_compaction` may set: beyond any model's window. */
export const IDLE_COMPACTION_MAX_CONTEXT_TOKENS = 100_000_000;

export const IdleCompactionConfigSchema = z.onFirstUse(() =>
  z.strictObject({
    /** Seconds without a model request before the thread counts as idle. */
    after_idle_s: z.number().check(z.int(), z.gte(1), z.lte(IDLE_COMPACTION_MAX_AFTER_IDLE_S)),
    /** Only a context of at least this many tokens is compacted. */
    min_context_tokens: z
      .number()
      .check(z.int(), z.gte(1), z.lte(IDLE_COMPACTION_MAX_CONTEXT_TOKENS)),
  }),
);

export const ThreadConfigSchema = z.onFirstUse(() =>
  z.strictObject({
    model: z.optional(z.string().check(z.minLength(1))),
    provider: z.optional(z.string().check(z.minLength(1))),
    base_instructions: z.optional(z.string()),
    developer_instructions: z.optional(z.nullable(z.string())),
    personality: z.optional(z.nullable(z.string())),
    collaboration_mode: z.optional(z.nullable(CollaborationModeConfigSchema)),
    permissions: z.optional(PermissionsConfigSchema),
    /** The first environment is the primary one. */
    environments: z.optional(z.array(EnvironmentConfigSchema).check(z.maxLength(16))),
    /** Shorthand for a single environment `{id: "local", cwd}`. */
    cwd: z.optional(z.string().check(z.minLength(1))),
    timezone: z.optional(z.string().check(z.minLength(1))),
    network: z.optional(z.nullable(NetworkConfigSchema)),
    agents_md: z.optional(z.nullable(AgentsMdConfigSchema)),
    context_sections: z.optional(
      recordOf(ContextSectionIdSchema, z.nullable(ContextSectionConfigSchema)),
    ),
    /** Function tools the client runs, and inline `{type: "mcp"}` entries (design §16). */
    tools: z.optional(
      z.array(z.union([FunctionToolSchema, McpToolEntrySchema])).check(z.maxLength(128)),
    ),
    /**
     * The tenant's MCP servers this thread may use, by label (or a reference that narrows one).
     * Replaces the current list, with the inline entries of the same request's `tools`; `null`
     * clears it.
     */
    mcp_servers: z.optional(
      z.nullable(
        z.array(z.union([McpServerLabelSchema, McpServerRefSchema])).check(z.maxLength(16)),
      ),
    ),
    truncation: z.optional(TruncationConfigSchema),
    /**
     * Auto-compaction runs before a turn when the estimated context exceeds this share of the
     * model's window (0 < x ≤ 1; default 0.9). `null` goes back to the default.
     */
    auto_compact_fraction: z.optional(z.nullable(z.number().check(z.gt(0), z.lte(1)))),
    /**
     * Overrides the reasoning model's catalog defaults (`effort`, `summary`); replaces the whole
     * object, `null` goes back to the defaults. No effect on a model that does not reason.
     */
    reasoning: z.optional(z.nullable(ReasoningConfigSchema)),
    /**
     * `false`: no `<environment_context>` is sent (Codex's `include_environment_context`); `null`
     * goes back to the default, `true`.
     */
    include_environment_context: z.optional(z.nullable(z.boolean())),
    /**
     * A developer message with the current time before the first request and then every
     * `reminder_interval_model_requests` model requests, and again after a compaction (Codex's
     * current-time reminder). `null` turns it off (the default).
     */
    current_time_reminder: z.optional(z.nullable(CurrentTimeReminderConfigSchema)),
    /**
     * Compacts the thread once it has been idle `after_idle_s` with at least `min_context_tokens`
     * of context, shortly before the model's prompt cache (`prompt_cache_ttl_s`) expires, so the
     * summary request reuses the cached prefix. Not model-visible. Absent: the tenant's default
     * (`thread_defaults.idle_compaction`, none unless set); `null` turns it off.
     */
    idle_compaction: z.optional(z.nullable(IdleCompactionConfigSchema)),
  }),
);

export type PermissionsConfig = z.infer<typeof PermissionsConfigSchema>;
export type EnvironmentConfig = z.infer<typeof EnvironmentConfigSchema>;
export type CollaborationModeConfig = z.infer<typeof CollaborationModeConfigSchema>;
export type AgentsMdConfig = z.infer<typeof AgentsMdConfigSchema>;
export type ContextSectionConfig = z.infer<typeof ContextSectionConfigSchema>;
export type FunctionTool = z.infer<typeof FunctionToolSchema>;
export type TruncationConfig = z.infer<typeof TruncationConfigSchema>;
export type NetworkConfig = z.infer<typeof NetworkConfigSchema>;
export type ReasoningEffort = z.infer<typeof ReasoningEffortSchema>;
export type ReasoningSummary = z.infer<typeof ReasoningSummarySchema>;
export type Verbosity = z.infer<typeof VerbositySchema>;
export type ReasoningConfig = z.infer<typeof ReasoningConfigSchema>;
export type CurrentTimeReminderConfig = z.infer<typeof CurrentTimeReminderConfigSchema>;
export type IdleCompactionConfig = z.infer<typeof IdleCompactionConfigSchema>;
export type ThreadConfig = z.infer<typeof ThreadConfigSchema>;

/**
 * The resolved configuration a thread runs with: every field decided. Optional fields here mean
 * "not set" (no such section is rendered). Persisted in `spindle_config` rollout lines.
 */
export const SessionConfigurationSchema = z.onFirstUse(() =>
  z.object({
    model: z.string(),
    provider: z.string(),
    /** Overrides the model's catalog instructions when set. */
    base_instructions: z.optional(z.string()),
    developer_instructions: z.optional(z.string()),
    personality: z.optional(z.string()),
    collaboration_mode: z.optional(CollaborationModeConfigSchema),
    permissions: PermissionsConfigSchema,
    environments: z.array(EnvironmentConfigSchema),
    timezone: z.string(),
    network: z.optional(NetworkConfigSchema),
    agents_md: z.optional(AgentsMdConfigSchema),
    /** Insertion-ordered; the order is model-visible. */
    context_sections: recordOf(ContextSectionIdSchema, ContextSectionConfigSchema),
    tools: z.array(FunctionToolSchema),
    /** Unset: no MCP servers. One entry per label, in the order given. */
    mcp_servers: z.optional(z.array(McpServerRefSchema)),
    truncation: TruncationConfigSchema,
    /** Unset: the engine's default (0.9). */
    auto_compact_fraction: z.optional(z.number().check(z.gt(0), z.lte(1))),
    /** Unset: the model's catalog defaults. */
    reasoning: z.optional(ReasoningConfigSchema),
    /** Unset: environment context is sent. */
    include_environment_context: z.optional(z.boolean()),
    /** Unset: no current-time reminder. */
    current_time_reminder: z.optional(CurrentTimeReminderConfigSchema),
    /** Unset: the tenant's default (`thread_defaults`); null: none. */
    idle_compaction: z.optional(z.nullable(IdleCompactionConfigSchema)),
  }),
);
export type SessionConfiguration = z.output<typeof SessionConfigurationSchema>;
