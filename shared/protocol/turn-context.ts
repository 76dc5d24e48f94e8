import * as z from "zod";

/**
 * Sandbox policy as Codex writes it in `turn_context`. The variant is tagged `mode` in rollouts
 * of Codex 0.35–0.58 (and in Spindle's own lines) and `type` from 0.59 on; a line keeps the tag
 * it came with. `network_access` is a boolean for `read-only` and `workspace-write`, and
 * `"restricted"` or `"enabled"` for `external-sandbox` (0.76+). `access` and `read_only_access`
 * (0.100–0.125) are kept as they came.
 */
export const SandboxPolicySchema = z
  .looseObject({
    mode: z.string().optional(),
    type: z.string().optional(),
    network_access: z.union([z.boolean(), z.enum(["restricted", "enabled"])]).optional(),
    writable_roots: z.array(z.string()).optional(),
    exclude_tmpdir_env_var: z.boolean().optional(),
    exclude_slash_tmp: z.boolean().optional(),
  })
  .refine((p) => p.mode !== undefined || p.type !== undefined, {
    message: 'a sandbox policy needs its "type" (or "mode") tag',
  });

/** The sandbox variant a policy names, whichever tag it uses. */
export function sandboxModeOf(policy: SandboxPolicy): string {
  return policy.type ?? policy.mode ?? "";
}

/**
 * Approval categories of Codex's object-valued approval policies: `{"reject": {…}}` (0.105–0.114,
 * `true` = auto-reject the category) and `{"granular": {…}}` (0.115+, `true` = may prompt).
 */
const ApprovalCategoriesSchema = z.record(z.string(), z.boolean());

/** `approval_policy`: a kebab-case string, or one of the object forms. */
export const TurnApprovalPolicySchema = z.union([
  z.string(),
  z.looseObject({ reject: ApprovalCategoriesSchema }),
  z.looseObject({ granular: ApprovalCategoriesSchema }),
]);

export const TurnContextEnvironmentSchema = z.looseObject({
  environment_id: z.string(),
  cwd: z.string(),
});

/**
 * The frozen settings of one turn as persisted in a `turn_context` rollout line (reference §1.5),
 * in every shape Codex has written since 0.35 (see docs/context-engine.md, "Importing Codex
 * rollouts"). `cwd` and `model` are the only mandatory fields; everything else is omitted when
 * absent, and fields not listed here are kept as they came. Field order follows Codex's
 * serialization order. Shapes that only some versions wrote (`permission_profile`,
 * `collaboration_mode`, `file_system_sandbox_policy`, `multi_agent_mode`, …) are read by the
 * importer (`shared/session/imported-config.ts`), not here.
 */
export const TurnContextItemSchema = z.looseObject({
  turn_id: z.string().nullish(),
  trace_id: z.string().nullish(),
  root_turn_id: z.string().nullish(),
  cwd: z.string(),
  workspace_roots: z.array(z.string()).nullish(),
  environments: z.array(TurnContextEnvironmentSchema).nullish(),
  current_date: z.string().nullish(),
  timezone: z.string().nullish(),
  approval_policy: TurnApprovalPolicySchema.nullish(),
  approvals_reviewer: z.string().nullish(),
  sandbox_policy: SandboxPolicySchema.nullish(),
  permission_profile: z.unknown().optional(),
  active_permission_profile: z.unknown().optional(),
  file_system_sandbox_policy: z.unknown().optional(),
  network: z
    .looseObject({ allowed_domains: z.array(z.string()), denied_domains: z.array(z.string()) })
    .nullish(),
  model: z.string(),
  comp_hash: z.string().nullish(),
  personality: z.string().nullish(),
  collaboration_mode: z.unknown().optional(),
  multi_agent_version: z.string().nullish(),
  multi_agent_mode: z.unknown().optional(),
  realtime_active: z.boolean().nullish(),
  effort: z.string().nullish(),
  summary: z.string().nullish(),
  base_instructions: z.string().nullish(),
  user_instructions: z.string().nullish(),
  developer_instructions: z.string().nullish(),
  final_output_json_schema: z.unknown().optional(),
  truncation_policy: z
    .looseObject({ mode: z.enum(["tokens", "bytes"]), limit: z.number() })
    .nullish(),
});

export type SandboxPolicy = z.infer<typeof SandboxPolicySchema>;
export type TurnApprovalPolicy = z.infer<typeof TurnApprovalPolicySchema>;
export type TurnContextItem = z.infer<typeof TurnContextItemSchema>;

/** Session state kept between turns: what the previous real user turn ran with. */
export interface PreviousTurnSettings {
  model: string;
  comp_hash?: string;
  realtime_active?: boolean;
}
