import { type Fragment, fragment, MARKERS, standalone } from "../../context/index.ts";
import type { JsonValue } from "../../protocol/index.ts";
import { isJsonObject } from "../internal/json.ts";
import { hasText } from "../internal/text.ts";
import { SECTION_IDS } from "../section-ids.ts";
import type { PreviousSectionState, WorldStateSection } from "../world-state.ts";

export type ModelSnapshot = { slug: string };

export interface ModelSectionInput {
  slug: string;
  /** The current model's effective base instructions. */
  instructions: string;
  /** The model of the previous turn, used when no snapshot says which model the model saw. */
  previousModel?: string;
}

/**
 * `<model_switch>` (developer, reference §3.6): rendered only when the previous model is known,
 * differs from the current one, and the current instructions are not blank. The previous model
 * comes from the Known snapshot, else from `previousModel`. The fragment is standalone: its own
 * developer message.
 */
export function modelSection(input: ModelSectionInput): WorldStateSection<ModelSnapshot> {
  return {
    id: SECTION_IDS.model,
    snapshot: () => ({ slug: input.slug }),
    readSnapshot: readModelSnapshot,
    render(previous: PreviousSectionState<ModelSnapshot>): Fragment[] {
      const before = previous.kind === "known" ? previous.snapshot.slug : input.previousModel;
      if (before === undefined || before === input.slug || !hasText(input.instructions)) return [];
      // A message of its own, as Codex places it, never bundled with other diffs.
      return [
        standalone(
          fragment(
            "developer",
            MARKERS.modelSwitch.start,
            MARKERS.modelSwitch.end,
            `\n${modelSwitchNotice(before)}\n\n${input.instructions}\n`,
          ),
        ),
      ];
    },
  };
}

/** Our wording; model-visible. */
export function modelSwitchNotice(previousSlug: string): string {
  return `Until now this conversation ran on a different model (${previousSlug}). Carry on from here under the instructions that follow.`;
}

/** Spindle's `{slug}`, or Codex's snapshot: the slug itself. */
function readModelSnapshot(stored: JsonValue): ModelSnapshot | undefined {
  if (typeof stored === "string") return { slug: stored };
  if (!isJsonObject(stored) || typeof stored.slug !== "string") return undefined;
  return { slug: stored.slug };
}
