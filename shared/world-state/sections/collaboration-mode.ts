import { type Fragment, fragment, MARKERS } from "../../context/index.ts";
import type { CollaborationModeConfig, JsonValue } from "../../protocol/index.ts";
import { getMember, isJsonObject } from "../internal/json.ts";
import { fingerprint, hasText } from "../internal/text.ts";
import { SECTION_IDS } from "../section-ids.ts";
import type { PreviousSectionState, WorldStateSection } from "../world-state.ts";

export type CollaborationModeSnapshot = {
  mode: string;
  /** `sha1:` of the mode's instructions. */
  fingerprint: string;
};

/**
 * `<collaboration_mode>` (developer, reference §3.6): rendered when the previous state is not
 * Known, or the mode or its instructions changed, and the instructions are not blank. Nothing is
 * persisted (and nothing rendered) while no mode is configured.
 */
export function collaborationModeSection(
  config: CollaborationModeConfig | undefined,
): WorldStateSection<CollaborationModeSnapshot> {
  const current =
    config === undefined
      ? undefined
      : { mode: config.mode, fingerprint: fingerprint(config.instructions ?? "") };
  return {
    id: SECTION_IDS.collaborationMode,
    snapshot: () => (current === undefined ? undefined : { ...current }),
    readSnapshot: readCollaborationModeSnapshot,
    render(previous: PreviousSectionState<CollaborationModeSnapshot>): Fragment[] {
      if (config === undefined || current === undefined || !hasText(config.instructions)) return [];
      if (
        previous.kind === "known" &&
        previous.snapshot.mode === current.mode &&
        previous.snapshot.fingerprint === current.fingerprint
      ) {
        return [];
      }
      return [
        fragment(
          "developer",
          MARKERS.collaborationMode.start,
          MARKERS.collaborationMode.end,
          `\nCollaboration mode: ${config.mode}\n\n${config.instructions}\n`,
        ),
      ];
    },
  };
}

function readCollaborationModeSnapshot(stored: JsonValue): CollaborationModeSnapshot | undefined {
  if (!isJsonObject(stored)) return undefined;
  const mode = getMember(stored, "mode");
  const hash = getMember(stored, "fingerprint");
  if (typeof mode !== "string" || typeof hash !== "string") return undefined;
  return { mode, fingerprint: hash };
}
