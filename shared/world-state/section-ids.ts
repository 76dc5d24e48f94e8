/**
 * Ids of the built-in world-state sections. PERSISTED: each is the key of its section's snapshot
 * in rollout `world_state` lines and checkpoints. Never rename one; a new meaning gets a new id.
 */
export const SECTION_IDS = {
  model: "model",
  permissions: "permissions",
  collaborationMode: "collaboration_mode",
  personality: "personality",
  agentsMd: "agents_md",
  environments: "environments",
  contextSections: "context_sections",
  /** Codex's id for a turn's additional context. */
  additionalContext: "additional_context",
} as const;
