import { type Fragment, fragment, MARKERS } from "../../context/index.ts";
import type { JsonObject, JsonValue } from "../../protocol/index.ts";
import { isJsonObject } from "../internal/json.ts";
import { hasText } from "../internal/text.ts";
import { SECTION_IDS } from "../section-ids.ts";
import type { PreviousSectionState, WorldStateSection } from "../world-state.ts";

/** `{name?, model}`: `name` is left out while no personality is set. */
export type PersonalitySnapshot = JsonObject;

export interface PersonalityConfig {
  name: string;
  /** The text the model catalog gives this personality. */
  message: string;
}

/**
 * `<personality_spec>` (developer, reference §3.6). With nothing Known it renders when a
 * personality is set and its message is not blank. Against a Known snapshot it renders only when
 * the model is the same as before, the personality changed and is set, and the message is not
 * blank. The model is part of the snapshot even with no personality, so that rule can be applied.
 */
export function personalitySection(
  personality: PersonalityConfig | undefined,
  modelSlug: string,
): WorldStateSection<PersonalitySnapshot> {
  return {
    id: SECTION_IDS.personality,
    snapshot(): PersonalitySnapshot {
      return personality === undefined
        ? { model: modelSlug }
        : { name: personality.name, model: modelSlug };
    },
    readSnapshot: readPersonalitySnapshot,
    render(previous: PreviousSectionState<PersonalitySnapshot>): Fragment[] {
      if (personality === undefined || !hasText(personality.message)) return [];
      if (previous.kind === "known") {
        const { name, model } = previous.snapshot;
        if (model !== modelSlug || name === personality.name) return [];
      }
      return [
        fragment(
          "developer",
          MARKERS.personality.start,
          MARKERS.personality.end,
          `\n${personalityNotice(personality.name)}\n\n${personality.message}\n`,
        ),
      ];
    },
  };
}

/** Our wording; model-visible. */
function personalityNotice(name: string): string {
  return `From here on, reply with the "${name}" personality described below.`;
}

function readPersonalitySnapshot(stored: JsonValue): PersonalitySnapshot | undefined {
  if (!isJsonObject(stored) || typeof stored.model !== "string") return undefined;
  if (stored.name !== undefined && typeof stored.name !== "string") return undefined;
  return stored.name === undefined
    ? { model: stored.model }
    : { name: stored.name, model: stored.model };
}
