import type { Fragment, FragmentRole } from "../context/index.ts";
import { type RetainedHistory, retainedItems } from "../context/index.ts";
import type { JsonValue, ResponseItem, WorldStateSnapshot } from "../protocol/index.ts";
import { getMember, setMember, sortedEntries } from "./internal/json.ts";
import { removeNullObjectFields } from "./merge-patch.ts";

/**
 * What a section knows about what the model saw before (reference §3.2):
 * - `absent`: nothing: no stored snapshot and none of its text in history. Render as new.
 * - `unknown`: history holds the section's text (a legacy fragment) but there is no usable
 *   snapshot, either none was stored or it did not validate. Usually re-render, with a
 *   replacement or removal notice where the section has one.
 * - `known`: the exact stored snapshot. Render only what changed.
 */
export type PreviousSectionState<S> =
  | { kind: "absent" }
  | { kind: "unknown" }
  | { kind: "known"; snapshot: S };

/**
 * One diffable part of the model-visible context (reference §3.1, design C/D).
 *
 * `id` is persisted in rollouts as the key of the section's snapshot: it must never change.
 * A snapshot holds only what is needed to decide what the model must be told next; objects in
 * it must not hold meaningful nulls (the container strips them, since a merge-patch null means
 * "delete"), and a snapshot of `null` is not stored at all.
 */
export interface WorldStateSection<S extends JsonValue = JsonValue> {
  readonly id: string;
  /** The current comparison state; `undefined` means nothing is persisted for this section. */
  snapshot(): S | undefined;
  /** Validates a stored value; `undefined` (not readable as `S`) makes the section see Unknown. */
  readSnapshot(stored: JsonValue): S | undefined;
  /**
   * The fragments that bring the model from `previous` to the current state, in order.
   * `retained` is the history being diffed against, given only by `renderHistoryDiff`; without
   * it, the fragments a Known snapshot describes are taken to still be in history.
   */
  render(previous: PreviousSectionState<S>, retained?: RetainedHistory): Fragment[];
  /** Recognizes this section's text in history written before snapshots existed. */
  matchesLegacyFragment?(role: FragmentRole, text: string): boolean;
  /**
   * Recognizes this section's fragment in retained history. When defined and no retained part
   * matches, a stored snapshot is ignored (the section sees Absent) so the text is injected again,
   * e.g. after compaction or rollback dropped it.
   */
  matchesRetainedFragment?(role: FragmentRole, text: string): boolean;
  /**
   * Other snapshot keys this section stands for (Codex's AGENTS.md shards): a stored baseline's
   * members under them are this section's, not another writer's (see `snapshotOver`).
   */
  readonly aliasIds?: readonly string[];
  /**
   * With no snapshot of its own this step (`snapshot()` undefined), the stored value stays as it
   * is instead of being removed (Codex: a section that returns no snapshot keeps the stored one).
   */
  readonly keepsStoredSnapshot?: boolean;
}

/**
 * The ordered set of world-state sections of one step (reference §3.5). Render order is the
 * order sections were added, and it is model-visible; snapshot keys are sorted by id.
 */
export class WorldState {
  readonly #sections = new Map<string, WorldStateSection<JsonValue>>();

  /** Adds a section after the others. Throws on an id that is already present. */
  // biome-ignore lint/suspicious/noExplicitAny: sections of any snapshot type share one container
  addSection(section: WorldStateSection<any>): this {
    if (this.#sections.has(section.id)) {
      throw new Error(`duplicate world-state section ID: ${section.id}`);
    }
    this.#sections.set(section.id, section);
    return this;
  }

  /**
   * Every section's snapshot keyed by id, keys in code point order. Null object members are
   * stripped at every depth (arrays are left alone), and a section whose snapshot is
   * `undefined` or `null` is left out.
   */
  snapshot(): WorldStateSnapshot {
    const byId: WorldStateSnapshot = {};
    for (const [id, section] of this.#sections) {
      const value = section.snapshot();
      if (value === undefined) continue;
      const cleaned = removeNullObjectFields(value);
      if (cleaned !== null) setMember(byId, id, cleaned);
    }
    const result: WorldStateSnapshot = {};
    for (const [id, value] of sortedEntries(byId)) setMember(result, id, value);
    return result;
  }

  /**
   * The snapshot that follows `baseline`: every section's, and the baseline's members that no
   * section stands for (sections another writer keeps, such as Codex's `skills` or `realtime`)
   * as they are, so a merge patch never removes what Spindle does not model.
   */
  snapshotOver(baseline: WorldStateSnapshot | undefined): WorldStateSnapshot {
    const own = this.snapshot();
    if (baseline === undefined) return own;
    const owned = new Set<string>();
    for (const [id, section] of this.#sections) {
      if (!section.keepsStoredSnapshot || getMember(own, id) !== undefined) owned.add(id);
      for (const alias of section.aliasIds ?? []) owned.add(alias);
    }
    const merged: WorldStateSnapshot = {};
    for (const [id, value] of Object.entries(baseline)) {
      if (!owned.has(id)) setMember(merged, id, value);
    }
    for (const [id, value] of Object.entries(own)) setMember(merged, id, value);
    const result: WorldStateSnapshot = {};
    for (const [id, value] of sortedEntries(merged)) setMember(result, id, value);
    return result;
  }

  /** Every section rendered as new (each sees Absent), in insertion order. */
  renderFull(): Fragment[] {
    return [...this.#sections.values()].flatMap((section) => section.render({ kind: "absent" }));
  }

  /**
   * Every section rendered against a stored snapshot: Known when the snapshot has its id (Unknown
   * if that value does not validate), Absent otherwise. Invariant 2 (design §10): an unchanged
   * state renders nothing.
   */
  renderDiff(previous: WorldStateSnapshot): Fragment[] {
    return [...this.#sections.values()].flatMap((section) => {
      const stored = getMember(previous, section.id);
      return section.render(stored === undefined ? { kind: "absent" } : known(section, stored));
    });
  }

  /**
   * Every section rendered against a stored snapshot (if any) and the history that will stay in
   * the prompt (reference §3.5). For each section:
   * - with a stored value: Absent when the section has a retained-fragment matcher and no
   *   retained part matches it (its text was dropped, so it is injected again); otherwise Known
   *   (or Unknown when the value does not validate);
   * - without one: Unknown when a retained part matches its legacy matcher, else Absent.
   */
  renderHistoryDiff(
    previous: WorldStateSnapshot | undefined,
    history: RetainedHistory | readonly ResponseItem[],
  ): Fragment[] {
    const retained = Array.isArray(history) ? retainedItems(history) : (history as RetainedHistory);
    return [...this.#sections.values()].flatMap((section) => {
      const stored = previous === undefined ? undefined : getMember(previous, section.id);
      let state: PreviousSectionState<JsonValue>;
      if (stored !== undefined) {
        const retainedMatcher = section.matchesRetainedFragment?.bind(section);
        state =
          retainedMatcher !== undefined && !retained.someRetainedText(retainedMatcher)
            ? { kind: "absent" }
            : known(section, stored);
      } else {
        const legacyMatcher = section.matchesLegacyFragment?.bind(section);
        state =
          legacyMatcher !== undefined && retained.someRetainedText(legacyMatcher)
            ? { kind: "unknown" }
            : { kind: "absent" };
      }
      return section.render(state, retained);
    });
  }
}

/**
 * A section turned off (`include_environment_context: false`): it renders nothing and stores no
 * snapshot. Its id stays Spindle's, so a baseline's value under it is dropped by the next
 * patch, not carried as another writer's.
 */
export function omittedSection(id: string): WorldStateSection<JsonValue> {
  return { id, snapshot: () => undefined, readSnapshot: () => undefined, render: () => [] };
}

function known(
  section: WorldStateSection<JsonValue>,
  stored: JsonValue,
): PreviousSectionState<JsonValue> {
  const snapshot = section.readSnapshot(stored);
  return snapshot === undefined ? { kind: "unknown" } : { kind: "known", snapshot };
}
