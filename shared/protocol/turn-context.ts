import * as z from "../zod/index.ts";

/**
 * Sandbox policy as Codex writes it in `turn_context`. The variant is tagged `mode` in rollouts
 * of Codex 0.35–0.58 (and in Spindle's own lines) and `type` from 0.59 on; a line keeps the tag
 * it came with. `network_access` is a boolean for `read-only` and `workspace-write`, and
 * `"restricted"` or `"enabled"` for `external-sandbox` (0.76+). `access` and `read_only_access`
 * (0.100–0.125) are kept as they came.
 */
export const SandboxPolicySchema = z.onFirstUse(() =>
  z
    .looseObject({
      mode: z.optional(z.string()),
      type: z.optional(z.string()),
      network_access: z.optional(z.union([z.boolean(), z.enum(["restricted", "enabled"])])),
      writable_roots: z.optional(z.array(z.string())),
      exclude_tmpdir_env_var: z.optional(z.boolean()),
      exclude_slash_tmp: z.optional(z.boolean()),
    })
    .check(
      z.refine((p) => p.mode !== undefined || p.type !== undefined, {
        message: 'a sandbox policy needs its "type" (or "mode") tag',
      }),
    ),
);

/** The sandbox variant a policy names, whichever tag it uses. */
export function sandboxModeOf(policy: SandboxPolicy): string {
  return policy.type ?? policy.mode ?? "";
}

/**
 * Approval categories of Codex's object-valued approval policies: `{"reject": {…}}` (0.105–0.114,
 * `true` = auto-reject the category) and `{"granular": {…}}` (0.115+, `true` = may prompt).
 */
const ApprovalCategoriesSchema = z.onFirstUse(() => z.record(z.string(), z.boolean()));

/** `approval_policy`: a kebab-case string, or one of the object forms. */
export const TurnApprovalPolicySchema = z.onFirstUse(() =>
  z.union([
    z.string(),
    z.looseObject({ reject: ApprovalCategoriesSchema }),
    z.looseObject({ granular: ApprovalCategoriesSchema }),
  ]),
);

export const TurnContextEnvironmentSchema = z.onFirstUse(() =>
  z.looseObject({
    environment_id: z.string(),
    cwd: z.string(),
  }),
);

/**
 * The frozen settings of one turn as persisted in a `turn_context` rollout line (reference §1.5),
 * in every shape Codex has written since 0.35 (see docs/context-engine.md, "Importing Codex
 * rollouts"). `cwd` and `model` are the only mandatory fields; everything else is omitted when
 * absent, and fields not listed here are kept as they came. Field order follows Codex's
 * serialization order. Shapes that only some versions wrote (`permission_profile`,
 * `collaboration_mode`, `file_system_sandbox_policy`, `multi_agent_mode`, …) are read by the
 * importer (`shared/session/imported-config.ts`), not here.
 */
export const TurnContextItemSchema = z.onFirstUse(() =>
  z.looseObject({
    turn_id: z.nullish(z.string()),
    trace_id: z.nullish(z.string()),
    root_turn_id: z.nullish(z.string()),
    cwd: z.string(),
    workspace_roots: z.nullish(z.array(z.string())),
    environments: z.nullish(z.array(TurnContextEnvironmentSchema)),
    current_date: z.nullish(z.string()),
    timezone: z.nullish(z.string()),
    approval_policy: z.nullish(TurnApprovalPolicySchema),
    approvals_reviewer: z.nullish(z.string()),
    sandbox_policy: z.nullish(SandboxPolicySchema),
    permission_profile: z.optional(z.unknown()),
    active_permission_profile: z.optional(z.unknown()),
    file_system_sandbox_policy: z.optional(z.unknown()),
    network: z.nullish(
      z.looseObject({ allowed_domains: z.array(z.string()), denied_domains: z.array(z.string()) }),
    ),
    model: z.string(),
    comp_hash: z.nullish(z.string()),
    personality: z.nullish(z.string()),
    collaboration_mode: z.optional(z.unknown()),
    multi_agent_version: z.nullish(z.string()),
    multi_agent_mode: z.optional(z.unknown()),
    realtime_active: z.nullish(z.boolean()),
    effort: z.nullish(z.string()),
    summary: z.nullish(z.string()),
    base_instructions: z.nullish(z.string()),
    user_instructions: z.nullish(z.string()),
    developer_instructions: z.nullish(z.string()),
    final_output_json_schema: z.optional(z.unknown()),
    truncation_policy: z.nullish(
      z.looseObject({ mode: z.enum(["tokens", "bytes"]), limit: z.number() }),
    ),
  }),
);

export type SandboxPolicy = z.infer<typeof SandboxPolicySchema>;
export type TurnApprovalPolicy = z.infer<typeof TurnApprovalPolicySchema>;
export type TurnContextItem = z.infer<typeof TurnContextItemSchema>;

/** Session state kept between turns: what the previous real user turn ran with. */
export interface PreviousTurnSettings {
  model: string;
  comp_hash?: string;
  realtime_active?: boolean;
}
