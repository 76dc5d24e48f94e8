import * as z from "zod";
import { MAX_TOOL_PARAMETERS_DEPTH, nestedWithin } from "./json-nesting.ts";
import { recordOf } from "./json-record.ts";

/**
 * Thread configuration as the API accepts it (design §8). The same shape serves thread creation
 * and per-turn `overrides`: every field is optional, and what a request sets becomes the
 * thread's new default. `null` clears a clearable field (agents_md, personality, a custom section).
 */

export const SandboxModeSchema = z.enum(["read-only", "workspace-write", "danger-full-access"]);
export const ApprovalPolicySchema = z.enum(["never", "on-request", "on-failure", "untrusted"]);

export const PermissionsConfigSchema = z.strictObject({
  sandbox: SandboxModeSchema,
  approval_policy: ApprovalPolicySchema,
  writable_roots: z.array(z.string().min(1)).default([]),
  network_access: z.boolean().default(false),
});

export const EnvironmentConfigSchema = z.strictObject({
  id: z.string().min(1).max(128),
  cwd: z.string().min(1),
  shell: z.string().min(1).optional(),
  status: z.enum(["available", "starting"]).optional(),
});

export const CollaborationModeConfigSchema = z.strictObject({
  mode: z.string().min(1),
  instructions: z.string().optional(),
});

export const AgentsMdConfigSchema = z.strictObject({
  text: z.string(),
  directory: z.string().min(1),
});

export const ContextSectionIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,64}$/, "section ids are 1-64 chars of [A-Za-z0-9_.-]");
export const ContextSectionConfigSchema = z.strictObject({
  role: z.enum(["user", "developer"]),
  text: z.string(),
});

export const FunctionToolSchema = z.strictObject({
  type: z.literal("function").default("function"),
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "tool names are 1-64 chars of [A-Za-z0-9_-]"),
  description: z.string().default(""),
  parameters: recordOf(z.string(), z.unknown())
    .check(nestedWithin(MAX_TOOL_PARAMETERS_DEPTH, "parameters"))
    .default({ type: "object", properties: {} }),
  strict: z.boolean().optional(),
});

export const TruncationConfigSchema = z.union([
  z.strictObject({ tokens: z.number().int().positive() }),
  z.strictObject({ bytes: z.number().int().positive() }),
]);

export const NetworkConfigSchema = z.strictObject({
  allowed_domains: z.array(z.string()).default([]),
  denied_domains: z.array(z.string()).default([]),
});

/** The Responses API's reasoning efforts, as Codex names them. */
export const ReasoningEffortSchema = z.enum([
  "none",
  "minimal",
  "low",
  "medium",
  "high",
  "xhigh",
  "max",
  "ultra",
]);
/** `none` asks for no reasoning summary: the request then carries no `summary`. */
export const ReasoningSummarySchema = z.enum(["auto", "concise", "detailed", "none"]);
export const VerbositySchema = z.enum(["low", "medium", "high"]);

/** Reasoning settings of a model (catalog defaults) or of a thread (overrides of them). */
export const ReasoningConfigSchema = z.strictObject({
  effort: ReasoningEffortSchema.optional(),
  summary: ReasoningSummarySchema.optional(),
});

export const CurrentTimeReminderConfigSchema = z.strictObject({
  reminder_interval_model_requests: z.number().int().min(1).max(10_000),
});

export const ThreadConfigSchema = z.strictObject({
  model: z.string().min(1).optional(),
  provider: z.string().min(1).optional(),
  base_instructions: z.string().optional(),
  developer_instructions: z.string().nullable().optional(),
  personality: z.string().nullable().optional(),
  collaboration_mode: CollaborationModeConfigSchema.nullable().optional(),
  permissions: PermissionsConfigSchema.optional(),
  /** The first environment is the primary one. */
  environments: z.array(EnvironmentConfigSchema).max(16).optional(),
  /** Shorthand for a single environment `{id: "local", cwd}`. */
  cwd: z.string().min(1).optional(),
  timezone: z.string().min(1).optional(),
  network: NetworkConfigSchema.nullable().optional(),
  agents_md: AgentsMdConfigSchema.nullable().optional(),
  context_sections: recordOf(
    ContextSectionIdSchema,
    ContextSectionConfigSchema.nullable(),
  ).optional(),
  tools: z.array(FunctionToolSchema).max(128).optional(),
  truncation: TruncationConfigSchema.optional(),
  /**
   * Auto-compaction runs before a turn when the estimated context exceeds this share of the
   * model's window (0 < x ≤ 1; default 0.9). `null` goes back to the default.
   */
  auto_compact_fraction: z.number().gt(0).max(1).nullable().optional(),
  /**
   * Overrides the reasoning model's catalog defaults (`effort`, `summary`); replaces the whole
   * object, `null` goes back to the defaults. No effect on a model that does not reason.
   */
  reasoning: ReasoningConfigSchema.nullable().optional(),
  /**
   * `false`: no `<environment_context>` is sent (Codex's `include_environment_context`); `null`
   * goes back to the default, `true`.
   */
  include_environment_context: z.boolean().nullable().optional(),
  /**
   * A developer message with the current time before the first request and then every
   * `reminder_interval_model_requests` model requests, and again after a compaction (Codex's
   * current-time reminder). `null` turns it off (the default).
   */
  current_time_reminder: CurrentTimeReminderConfigSchema.nullable().optional(),
});

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
export type ThreadConfig = z.infer<typeof ThreadConfigSchema>;

/**
 * The resolved configuration a thread runs with: every field decided. Optional fields here mean
 * "not set" (no such section is rendered). Persisted in `spindle_config` rollout lines.
 */
export const SessionConfigurationSchema = z.object({
  model: z.string(),
  provider: z.string(),
  /** Overrides the model's catalog instructions when set. */
  base_instructions: z.string().optional(),
  developer_instructions: z.string().optional(),
  personality: z.string().optional(),
  collaboration_mode: CollaborationModeConfigSchema.optional(),
  permissions: PermissionsConfigSchema,
  environments: z.array(EnvironmentConfigSchema),
  timezone: z.string(),
  network: NetworkConfigSchema.optional(),
  agents_md: AgentsMdConfigSchema.optional(),
  /** Insertion-ordered; the order is model-visible. */
  context_sections: recordOf(ContextSectionIdSchema, ContextSectionConfigSchema),
  tools: z.array(FunctionToolSchema),
  truncation: TruncationConfigSchema,
  /** Unset: the engine's default (0.9). */
  auto_compact_fraction: z.number().gt(0).max(1).optional(),
  /** Unset: the model's catalog defaults. */
  reasoning: ReasoningConfigSchema.optional(),
  /** Unset: environment context is sent. */
  include_environment_context: z.boolean().optional(),
  /** Unset: no current-time reminder. */
  current_time_reminder: CurrentTimeReminderConfigSchema.optional(),
});
export type SessionConfiguration = z.output<typeof SessionConfigurationSchema>;
