import {
  type Fragment,
  fragment,
  type RetainedHistory,
  renderFragment,
  standalone,
} from "../../context/index.ts";
import type { JsonObject, JsonValue } from "../../protocol/index.ts";
import { compareCodePoints, getMember, isJsonObject, setMember } from "../internal/json.ts";
import { fingerprint } from "../internal/text.ts";
import { SECTION_IDS } from "../section-ids.ts";
import type { PreviousSectionState, WorldStateSection } from "../world-state.ts";

/** `{<key>: "sha1:…"}` of the fragments the model was given; the texts are not stored. */
export type AdditionalContextSnapshot = JsonObject;

/**
 * A turn's additional context (Codex's `additional_context` of an untrusted source): each entry
 * one user message `<external_{key}>{value}</external_{key}>` of its own, after the other
 * context, in key order. `entries` undefined: the step carries none (a turn resumed after an
 * eviction): nothing renders and the stored snapshot stays as it is.
 *
 * - Not Known: every entry renders.
 * - Known: an entry renders when its key is new or its text changed, or (in a history diff)
 *   when its text is no longer in retained history (a compaction dropped it). An unchanged
 *   entry whose text is retained renders nothing; an entry left out renders nothing and leaves
 *   the snapshot, so it renders again when a later turn brings it back.
 *
 * Values arrive escaped and bounded (`shared/session/additional-context.ts`).
 * Unlike Codex's, the section has no retained matcher: history without any entry's text is not
 * a reason to render the others again.
 */
export function additionalContextSection(
  entries: Readonly<Record<string, string>> | undefined,
): WorldStateSection<AdditionalContextSnapshot> {
  const current = Object.entries(entries ?? {})
    .sort(([a], [b]) => compareCodePoints(a, b))
    .map(([key, value]) => {
      const rendered = externalFragment(key, value);
      return { key, rendered, fingerprint: fingerprint(renderFragment(rendered)) };
    });
  return {
    id: SECTION_IDS.additionalContext,
    keepsStoredSnapshot: entries === undefined,
    snapshot() {
      if (entries === undefined || current.length === 0) return undefined;
      const snapshot: AdditionalContextSnapshot = {};
      for (const entry of current) setMember(snapshot, entry.key, entry.fingerprint);
      return snapshot;
    },
    readSnapshot: (stored) =>
      isJsonObject(stored) && readFingerprints(stored) !== undefined ? stored : undefined,
    render(previous: PreviousSectionState<AdditionalContextSnapshot>, retained?: RetainedHistory) {
      const before = previous.kind === "known" ? readFingerprints(previous.snapshot) : undefined;
      return current
        .filter((entry) => {
          if (before?.get(entry.key) !== entry.fingerprint) return true;
          return retained !== undefined && !holds(retained, entry.rendered);
        })
        .map((entry) => entry.rendered);
    },
  };
}

function externalFragment(key: string, value: string): Fragment {
  // Codex's marker pair: a `<external_` prefix, the key, then `>`.
  const start = `<external_${key}>`;
  return standalone(fragment("user", start, `</external_${key}>`, value), "after");
}

function holds(retained: RetainedHistory, expected: Fragment): boolean {
  const text = renderFragment(expected).trim();
  return retained.someRetainedText((role, part) => role === "user" && part.trim() === text);
}

function readFingerprints(stored: JsonValue): Map<string, string> | undefined {
  if (!isJsonObject(stored)) return undefined;
  const fingerprints = new Map<string, string>();
  for (const key of Object.keys(stored)) {
    const value = getMember(stored, key);
    if (typeof value !== "string") return undefined;
    fingerprints.set(key, value);
  }
  return fingerprints;
}
