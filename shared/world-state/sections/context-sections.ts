import {
  type Fragment,
  type FragmentRole,
  fragment,
  MARKERS,
  matchesMarkers,
  type RetainedHistory,
  renderFragment,
} from "../../context/index.ts";
import type { ContextSectionConfig, JsonObject, JsonValue } from "../../protocol/index.ts";
import { compareCodePoints, getMember, isJsonObject, setMember } from "../internal/json.ts";
import { escapeXml, fingerprint, hasText } from "../internal/text.ts";
import { SECTION_IDS } from "../section-ids.ts";
import type { PreviousSectionState, WorldStateSection } from "../world-state.ts";

/** `{<custom id>: {role, fingerprint}}`; the texts themselves are not stored. */
export type ContextSectionsSnapshot = JsonObject;

type Entry = { role: FragmentRole; fingerprint: string };

/** Our wording; model-visible. Sent once for a custom section that was removed. */
export function contextSectionRemovalNotice(id: string): string {
  return `The context section "${id}" given earlier in this conversation has been withdrawn and no longer applies. Disregard it.`;
}

/**
 * Custom sections supplied through the API, all under the one world-state id
 * `context_sections`. Each renders `<extension_context id="ID">\n{text}\n</extension_context>`
 * with its own role, in the configured order; a blank text counts as no section.
 *
 * - Not Known: every section renders.
 * - Known: new and changed (text or role) sections render; a removed id gets one removal notice,
 *   framed the same way with its previous role, after the current sections. In a history diff,
 *   an unchanged section whose text is missing from retained history renders again.
 *
 * Retained matcher: any `extension_context` fragment, so when history holds none of them the
 * section sees Absent and every current section is injected again.
 */
export function contextSectionsSection(
  sections: Record<string, ContextSectionConfig>,
): WorldStateSection<ContextSectionsSnapshot> {
  const current = Object.entries(sections)
    .filter(([, config]) => hasText(config.text))
    .map(([id, config]) => ({
      id,
      role: config.role,
      fingerprint: fingerprint(config.text),
      fragment: extensionFragment(id, config.role, config.text),
    }));
  return {
    id: SECTION_IDS.contextSections,
    snapshot() {
      if (current.length === 0) return undefined;
      const snapshot: ContextSectionsSnapshot = {};
      for (const entry of current) {
        setMember(snapshot, entry.id, { role: entry.role, fingerprint: entry.fingerprint });
      }
      return snapshot;
    },
    readSnapshot: readContextSectionsSnapshot,
    render(
      previous: PreviousSectionState<ContextSectionsSnapshot>,
      retained?: RetainedHistory,
    ): Fragment[] {
      if (previous.kind !== "known") return current.map((entry) => entry.fragment);
      const before = readEntries(previous.snapshot) ?? new Map<string, Entry>();
      const fragments = current
        .filter((entry) => {
          const old = before.get(entry.id);
          if (old === undefined || old.role !== entry.role) return true;
          if (old.fingerprint !== entry.fingerprint) return true;
          return retained !== undefined && !holds(retained, entry.fragment);
        })
        .map((entry) => entry.fragment);
      const currentIds = new Set(current.map((entry) => entry.id));
      const removed = [...before.keys()]
        .filter((id) => !currentIds.has(id))
        .sort(compareCodePoints)
        .map((id) => {
          const role = before.get(id)?.role ?? "user";
          return extensionFragment(id, role, contextSectionRemovalNotice(id));
        });
      return [...fragments, ...removed];
    },
    matchesRetainedFragment: isExtensionFragment,
  };
}

function extensionFragment(id: string, role: FragmentRole, text: string): Fragment {
  // The start marker is a prefix, so the id attribute travels in the body.
  return fragment(
    role,
    MARKERS.extensionContext.start,
    MARKERS.extensionContext.end,
    ` id="${escapeXml(id)}">\n${text}\n`,
  );
}

function isExtensionFragment(_role: FragmentRole, text: string): boolean {
  return matchesMarkers(MARKERS.extensionContext.start, MARKERS.extensionContext.end, text);
}

function holds(retained: RetainedHistory, expected: Fragment): boolean {
  const text = renderFragment(expected).trim();
  return retained.someRetainedText((role, part) => role === expected.role && part.trim() === text);
}

function readEntries(snapshot: ContextSectionsSnapshot): Map<string, Entry> | undefined {
  const entries = new Map<string, Entry>();
  for (const id of Object.keys(snapshot)) {
    const value = getMember(snapshot, id);
    if (!isJsonObject(value)) return undefined;
    const role = getMember(value, "role");
    const hash = getMember(value, "fingerprint");
    if ((role !== "user" && role !== "developer") || typeof hash !== "string") return undefined;
    entries.set(id, { role, fingerprint: hash });
  }
  return entries;
}

function readContextSectionsSnapshot(stored: JsonValue): ContextSectionsSnapshot | undefined {
  if (!isJsonObject(stored) || readEntries(stored) === undefined) return undefined;
  return stored;
}
