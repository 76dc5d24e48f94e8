import { z } from "zod";

/** Sandbox policy as Codex writes it in `turn_context` (e.g. `{"mode":"workspace-write",…}`). */
export const SandboxPolicySchema = z.looseObject({
  mode: z.string(),
  network_access: z.boolean().optional(),
  writable_roots: z.array(z.string()).optional(),
  exclude_tmpdir_env_var: z.boolean().optional(),
  exclude_slash_tmp: z.boolean().optional(),
});

export const TurnContextEnvironmentSchema = z.looseObject({
  environment_id: z.string(),
  cwd: z.string(),
});

/**
 * The frozen settings of one turn as persisted in a `turn_context` rollout line (reference §1.5).
 * `cwd` and `model` are the only mandatory fields; everything else is omitted when absent.
 * Field order follows Codex's serialization order.
 */
export const TurnContextItemSchema = z.looseObject({
  turn_id: z.string().nullish(),
  cwd: z.string(),
  workspace_roots: z.array(z.string()).nullish(),
  environments: z.array(TurnContextEnvironmentSchema).nullish(),
  current_date: z.string().nullish(),
  timezone: z.string().nullish(),
  approval_policy: z.string().nullish(),
  sandbox_policy: SandboxPolicySchema.nullish(),
  network: z
    .looseObject({ allowed_domains: z.array(z.string()), denied_domains: z.array(z.string()) })
    .nullish(),
  model: z.string(),
  comp_hash: z.string().nullish(),
  personality: z.string().nullish(),
  collaboration_mode: z.unknown().optional(),
  realtime_active: z.boolean().nullish(),
  effort: z.string().nullish(),
  summary: z.string().nullish(),
  user_instructions: z.string().nullish(),
  developer_instructions: z.string().nullish(),
  final_output_json_schema: z.unknown().optional(),
  truncation_policy: z
    .looseObject({ mode: z.enum(["tokens", "bytes"]), limit: z.number() })
    .nullish(),
});

export type SandboxPolicy = z.infer<typeof SandboxPolicySchema>;
export type TurnContextItem = z.infer<typeof TurnContextItemSchema>;

/** Session state kept between turns: what the previous real user turn ran with. */
export interface PreviousTurnSettings {
  model: string;
  comp_hash?: string;
  realtime_active?: boolean;
}
