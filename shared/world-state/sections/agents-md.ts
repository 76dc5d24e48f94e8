import {
  type Fragment,
  type FragmentRole,
  fragment,
  MARKERS,
  matchesMarkers,
  type RetainedHistory,
  renderFragment,
} from "../../context/index.ts";
import type { AgentsMdConfig, JsonValue } from "../../protocol/index.ts";
import { getMember, isJsonObject } from "../internal/json.ts";
import { fingerprint, hasText } from "../internal/text.ts";
import { SECTION_IDS } from "../section-ids.ts";
import type { PreviousSectionState, WorldStateSection } from "../world-state.ts";

/**
 * The text itself is not stored: the fingerprint is enough to notice a change. `{}` records
 * that there is no AGENTS.md, as Codex's empty snapshot does: a Known "none" is how a thread
 * remembers that it already withdrew instructions it could not see in a baseline.
 */
export type AgentsMdSnapshot = { directory: string; fingerprint: string } | NoAgentsMd;
type NoAgentsMd = Record<string, never>;
const NO_AGENTS_MD: NoAgentsMd = {};

/** The ids of the continuation shards of Codex's sharded AGENTS.md (reference §3.6). */
export const CODEX_SHARD_IDS = ["agents_md_2", "agents_md_3", "agents_md_4"] as const;

/** Our wording; model-visible. Opens the fragment that carries changed instructions. */
export const AGENTS_MD_REPLACEMENT_NOTICE =
  "These AGENTS.md instructions replace all AGENTS.md instructions given earlier in this conversation. Follow only the version below.";

/** Our wording; model-visible. Sent once when AGENTS.md goes away. */
export const AGENTS_MD_REMOVAL_NOTICE =
  "The AGENTS.md instructions given earlier in this conversation have been withdrawn and no longer apply. Disregard them.";

/**
 * AGENTS.md (user role; `# AGENTS.md instructions for {dir}` … `</INSTRUCTIONS>`), unsharded.
 *
 * - Absent: the full fragment, when the text is not blank.
 * - Known and unchanged: nothing (in a history diff: unless the current text is missing from
 *   retained history while an older AGENTS.md fragment is still there, which gets the
 *   replacement form).
 * - Known and changed (text or directory), or Unknown (legacy AGENTS.md text in history, no
 *   snapshot): one fragment holding the replacement notice and then the full new text.
 * - Removed (no text now) after a Known document or an Unknown state (legacy text in history,
 *   no snapshot): one removal notice under the bare `# AGENTS.md instructions` header, as
 *   Codex's has no directory, framed by the same markers so it stays contextual. The snapshot
 *   becomes `{}`, a Known "none", so the notice is sent once.
 *
 * Retained matcher: any AGENTS.md instructions fragment other than a removal notice, so the
 * section is injected again when history no longer holds any.
 */
export function agentsMdSection(
  config: AgentsMdConfig | undefined,
): WorldStateSection<AgentsMdSnapshot> {
  const current =
    config !== undefined && hasText(config.text)
      ? { directory: config.directory, fingerprint: fingerprint(config.text), text: config.text }
      : undefined;
  return {
    id: SECTION_IDS.agentsMd,
    snapshot: (): AgentsMdSnapshot =>
      current === undefined
        ? NO_AGENTS_MD
        : { directory: current.directory, fingerprint: current.fingerprint },
    readSnapshot: readAgentsMdSnapshot,
    render(
      previous: PreviousSectionState<AgentsMdSnapshot>,
      retained?: RetainedHistory,
    ): Fragment[] {
      if (current === undefined) {
        // As Codex's removal notice: the bare header, whatever directory the document had.
        const withdrawn =
          previous.kind === "unknown" ||
          (previous.kind === "known" && "directory" in previous.snapshot);
        return withdrawn ? [agentsMdFragment(undefined, AGENTS_MD_REMOVAL_NOTICE)] : [];
      }
      const full = agentsMdFragment(current.directory, current.text);
      const replacement = agentsMdFragment(
        current.directory,
        `${AGENTS_MD_REPLACEMENT_NOTICE}\n\n${current.text}`,
      );
      switch (previous.kind) {
        case "absent":
          return [full];
        case "unknown":
          return [replacement];
        case "known": {
          if (!("directory" in previous.snapshot)) return [full];
          const unchanged =
            previous.snapshot.directory === current.directory &&
            previous.snapshot.fingerprint === current.fingerprint;
          if (unchanged && (retained === undefined || holdsAny(retained, [full, replacement]))) {
            return [];
          }
          return [replacement];
        }
      }
    },
    matchesLegacyFragment: isAgentsMdFragment,
    matchesRetainedFragment: (role, text) =>
      isAgentsMdFragment(role, text) && !isRemovalNotice(text),
    // Codex (0.150+) splits a long document into shards; one unsharded section replaces them.
    aliasIds: CODEX_SHARD_IDS,
  };
}

/** `directory` undefined: the bare header, for a withdrawal of instructions of unknown origin. */
function agentsMdFragment(directory: string | undefined, content: string): Fragment {
  // The start marker is a prefix, so the directory travels in the body.
  const header = directory === undefined ? "" : ` for ${directory}`;
  return fragment(
    "user",
    MARKERS.agentsMd.start,
    MARKERS.agentsMd.end,
    `${header}\n\n<INSTRUCTIONS>\n${content}\n`,
  );
}

function isAgentsMdFragment(role: FragmentRole, text: string): boolean {
  if (role !== "user") return false;
  return (
    matchesMarkers(MARKERS.agentsMd.start, MARKERS.agentsMd.end, text) ||
    matchesMarkers(MARKERS.legacyUserInstructions.start, MARKERS.legacyUserInstructions.end, text)
  );
}

function isRemovalNotice(text: string): boolean {
  return text.trimEnd().endsWith(`<INSTRUCTIONS>\n${AGENTS_MD_REMOVAL_NOTICE}\n</INSTRUCTIONS>`);
}

function holdsAny(retained: RetainedHistory, fragments: readonly Fragment[]): boolean {
  const texts = new Set(fragments.map((f) => renderFragment(f).trim()));
  return retained.someRetainedText((role, text) => role === "user" && texts.has(text.trim()));
}

function readAgentsMdSnapshot(stored: JsonValue): AgentsMdSnapshot | undefined {
  if (!isJsonObject(stored)) return undefined;
  if (Object.keys(stored).length === 0) return NO_AGENTS_MD;
  const directory = getMember(stored, "directory");
  const hash = getMember(stored, "fingerprint");
  if (typeof directory !== "string" || typeof hash !== "string") return undefined;
  return { directory, fingerprint: hash };
}
