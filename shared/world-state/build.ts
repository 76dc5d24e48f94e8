import type {
  AgentsMdConfig,
  CollaborationModeConfig,
  ContextSectionConfig,
  EnvironmentConfig,
  NetworkConfig,
  PermissionsConfig,
} from "../protocol/index.ts";
import { SECTION_IDS } from "./section-ids.ts";
import { additionalContextSection } from "./sections/additional-context.ts";
import { agentsMdSection } from "./sections/agents-md.ts";
import { collaborationModeSection } from "./sections/collaboration-mode.ts";
import { contextSectionsSection } from "./sections/context-sections.ts";
import { environmentsSection } from "./sections/environments.ts";
import { modelSection } from "./sections/model.ts";
import { permissionsSection } from "./sections/permissions.ts";
import { personalitySection } from "./sections/personality.ts";
import { omittedSection, WorldState } from "./world-state.ts";

/** Everything the built-in sections render from, captured once per step. */
export interface WorldStateInput {
  /** The current model and its effective base instructions. */
  model: { slug: string; instructions: string };
  /**
   * `previous_turn_settings.model`: the model switch uses it when the model section has no
   * usable snapshot (Absent or Unknown). `undefined`: no previous model is known.
   */
  previousModel?: string;
  permissions: PermissionsConfig;
  /** `undefined`: no collaboration mode; nothing rendered or persisted. */
  collaborationMode?: CollaborationModeConfig;
  /** `undefined`: no personality. `message` is the model catalog's text for it. */
  personality?: { name: string; message: string };
  /** `undefined` (or blank text): no AGENTS.md; a previously Known one gets a removal notice. */
  agentsMd?: AgentsMdConfig;
  /** The first is the primary environment; may be empty. */
  environments: EnvironmentConfig[];
  /** `YYYY-MM-DD`, computed by the caller from the injected clock. */
  currentDate: string;
  timezone: string;
  /** `undefined`: no network domain rules; nothing rendered for the network. */
  network?: NetworkConfig;
  /** Insertion order is render order. */
  contextSections: Record<string, ContextSectionConfig>;
  /** `false`: no `<environment_context>` (Codex's `include_environment_context`). */
  includeEnvironmentContext?: boolean;
  /**
   * The turn's additional context, escaped and bounded; undefined for a step that carries none
   * (a turn resumed after an eviction), which keeps the stored snapshot.
   */
  additionalContext?: Readonly<Record<string, string>>;
}

/**
 * The built-in sections in their model-visible order (design §4): model, permissions,
 * collaboration_mode, personality, agents_md, environments, context_sections,
 * additional_context. The model switch comes first (invariant 2, design §10).
 */
export function buildWorldState(input: WorldStateInput): WorldState {
  return new WorldState()
    .addSection(
      modelSection({
        slug: input.model.slug,
        instructions: input.model.instructions,
        ...(input.previousModel === undefined ? {} : { previousModel: input.previousModel }),
      }),
    )
    .addSection(permissionsSection(input.permissions))
    .addSection(collaborationModeSection(input.collaborationMode))
    .addSection(personalitySection(input.personality, input.model.slug))
    .addSection(agentsMdSection(input.agentsMd))
    .addSection(
      input.includeEnvironmentContext === false
        ? omittedSection(SECTION_IDS.environments)
        : environmentsSection({
            environments: input.environments,
            currentDate: input.currentDate,
            timezone: input.timezone,
            ...(input.network === undefined ? {} : { network: input.network }),
            permissions: input.permissions,
          }),
    )
    .addSection(contextSectionsSection(input.contextSections))
    .addSection(additionalContextSection(input.additionalContext));
}
