/**
 * Marker tags of the context fragments (reference §2.2). These strings are model-visible and
 * persisted in rollouts: never change them.
 */
export const MARKERS = {
  agentsMd: { start: "# AGENTS.md instructions", end: "</INSTRUCTIONS>" },
  legacyUserInstructions: { start: "<user_instructions>", end: "</user_instructions>" },
  environmentContext: { start: "<environment_context>", end: "</environment_context>" },
  turnAborted: { start: "<turn_aborted>", end: "</turn_aborted>" },
  skill: { start: "<skill", end: "</skill>" },
  userShellCommand: { start: "<user_shell_command>", end: "</user_shell_command>" },
  subagentNotification: { start: "<subagent_notification>", end: "</subagent_notification>" },
  additionalContext: { start: "<external_", end: ">" },
  // Spindle renders custom sections as `<extension_context id="…">`, so the start is a prefix.
  extensionContext: { start: "<extension_context", end: "</extension_context>" },
  legacyGoalContext: { start: "<goal_context>", end: "</goal_context>" },
  modelSwitch: { start: "<model_switch>", end: "</model_switch>" },
  permissions: { start: "<permissions instructions>", end: "</permissions instructions>" },
  collaborationMode: { start: "<collaboration_mode>", end: "</collaboration_mode>" },
  personality: { start: "<personality_spec>", end: "</personality_spec>" },
  realtime: { start: "<realtime_conversation>", end: "</realtime_conversation>" },
  // Spindle's frame for the current-time reminder (Codex frames its reminder differently).
  currentTime: { start: "<current_time>", end: "</current_time>" },
} as const;

/** User fragments whose text makes a user message contextual (not a turn boundary). */
export const CONTEXTUAL_USER_MARKERS = [
  MARKERS.agentsMd,
  MARKERS.legacyUserInstructions,
  MARKERS.environmentContext,
  MARKERS.turnAborted,
  MARKERS.skill,
  MARKERS.userShellCommand,
  MARKERS.subagentNotification,
  MARKERS.additionalContext,
  MARKERS.extensionContext,
  MARKERS.legacyGoalContext,
] as const;

/**
 * Prefixes of contextual developer fragments (reference §2.3). Only the prefix is checked.
 * `<extension_context` is Spindle's addition: custom sections may have the developer role;
 * `<current_time>` frames Spindle's current-time reminder.
 */
export const CONTEXTUAL_DEVELOPER_PREFIXES = [
  "<permissions instructions>",
  "<model_switch>",
  "<collaboration_mode>",
  "<realtime_conversation>",
  "<skills_instructions>",
  "<personality_spec>",
  "<token_budget>",
  "<multi_agent_mode>",
  "<apps_instructions>",
  "<plugins_instructions>",
  "<environments_instructions>",
  "<context_window>",
  "<context_window_guidance>",
  "<rollout_budget>",
  "<extension_context",
  "<current_time>",
] as const;
