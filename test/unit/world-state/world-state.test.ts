import { describe, expect, test } from "vitest";
import {
  type Fragment,
  type FragmentRole,
  fragment,
  type RetainedHistory,
  retainedItems,
} from "../../../shared/context/index.ts";
import type { JsonValue } from "../../../shared/protocol/index.ts";
import {
  applyMergePatch,
  mergePatchFrom,
  type PreviousSectionState,
  WorldState,
  type WorldStateSection,
} from "../../../shared/world-state/index.ts";
import { assistant, developer, roundTrip, user } from "./builders.ts";

type ValueSnapshot = { value: string };

function readValue(stored: JsonValue): ValueSnapshot | undefined {
  if (typeof stored !== "object" || stored === null || Array.isArray(stored)) return undefined;
  return typeof stored.value === "string" ? { value: stored.value } : undefined;
}

function describeState(previous: PreviousSectionState<JsonValue>): string {
  return previous.kind === "known" ? `known:${JSON.stringify(previous.snapshot)}` : previous.kind;
}

/** A section whose single fragment says which previous state it saw. */
function probe(
  id: string,
  value: string,
  hooks: Partial<Pick<WorldStateSection, "matchesLegacyFragment" | "matchesRetainedFragment">> = {},
): WorldStateSection<ValueSnapshot> & { retainedSeen: (RetainedHistory | undefined)[] } {
  const retainedSeen: (RetainedHistory | undefined)[] = [];
  return {
    id,
    retainedSeen,
    snapshot: () => ({ value }),
    readSnapshot: readValue,
    render(previous, retained) {
      retainedSeen.push(retained);
      return [fragment("developer", `<${id}>`, `</${id}>`, describeState(previous))];
    },
    ...hooks,
  };
}

function bodies(fragments: readonly Fragment[]): string[] {
  return fragments.map((f) => f.body);
}

describe("WorldState snapshots", () => {
  test("snapshot_uses_stable_section_ids_and_omits_null_fields (catalog 1)", () => {
    const state = new WorldState().addSection({
      id: "test",
      snapshot: () => ({ value: "current", optional: null, array: [{ value: null }] }),
      readSnapshot: (stored) => stored,
      render: () => [],
    });
    expect(state.snapshot()).toEqual({ test: { value: "current", array: [{ value: null }] } });
  });

  test("full_json_reloads_registered_sections (catalog 9): sorted snapshot, insertion-order render", () => {
    const state = new WorldState().addSection(probe("beta", "b")).addSection(probe("alpha", "a"));
    expect(JSON.stringify(state.snapshot())).toBe('{"alpha":{"value":"a"},"beta":{"value":"b"}}');
    expect(bodies(state.renderFull())).toEqual(["absent", "absent"]);
    expect(state.renderFull().map((f) => f.startMarker)).toEqual(["<beta>", "<alpha>"]);
    expect(bodies(state.renderDiff(roundTrip(state.snapshot())))).toEqual([
      'known:{"value":"b"}',
      'known:{"value":"a"}',
    ]);
  });

  test("sections without a snapshot, or with a null one, are left out", () => {
    const state = new WorldState()
      .addSection({
        id: "none",
        snapshot: () => undefined,
        readSnapshot: readValue,
        render: () => [],
      })
      .addSection({ id: "nil", snapshot: () => null, readSnapshot: () => null, render: () => [] })
      .addSection(probe("kept", "k"));
    expect(state.snapshot()).toEqual({ kept: { value: "k" } });
  });

  test("snapshot keys sort by code point, like Codex's BTreeMap", () => {
    const state = new WorldState()
      .addSection(probe("\u{1F600}", "astral"))
      .addSection(probe("\uFF21", "fullwidth"))
      .addSection(probe("b", "b"))
      .addSection(probe("B", "B"));
    expect(Object.keys(state.snapshot())).toEqual(["B", "b", "\uFF21", "\u{1F600}"]);
  });

  test("json_diff_reconstructs_current_state (catalog 8) through two world states", () => {
    const previous = new WorldState()
      .addSection(probe("alpha", "old"))
      .addSection(probe("beta", "removed"));
    const current = new WorldState().addSection(probe("alpha", "new"));
    const patch = mergePatchFrom(previous.snapshot(), current.snapshot());
    expect(patch).toEqual({ alpha: { value: "new" }, beta: null });
    expect(applyMergePatch(previous.snapshot(), patch ?? {})).toEqual(current.snapshot());
  });

  test("duplicate_section_ids_are_rejected (catalog 6)", () => {
    const state = new WorldState().addSection(probe("test", "a"));
    expect(() => state.addSection(probe("test", "b"))).toThrow(
      new Error("duplicate world-state section ID: test"),
    );
  });
});

describe("WorldState.renderDiff", () => {
  test("render_diff_restores_the_typed_section_snapshot (catalog 2)", () => {
    const seen: PreviousSectionState<ValueSnapshot>[] = [];
    const section: WorldStateSection<ValueSnapshot> = {
      id: "test",
      snapshot: () => ({ value: "after" }),
      readSnapshot: readValue,
      render(previous) {
        seen.push(previous);
        return previous.kind === "known" && previous.snapshot.value !== "after"
          ? [fragment("developer", "<test>", "</test>", "after")]
          : [];
      },
    };
    const rendered = new WorldState().addSection(section).renderDiff({ test: { value: "before" } });
    expect(rendered).toEqual([fragment("developer", "<test>", "</test>", "after")]);
    expect(seen).toEqual([{ kind: "known", snapshot: { value: "before" } }]);
  });

  test("extension_owned_section_uses_its_snapshot_and_renderer (catalog 3)", () => {
    const section: WorldStateSection = {
      id: "extension_test",
      snapshot: () => ({ value: "after", optional: null }),
      readSnapshot: (stored) => stored,
      render: (previous) =>
        previous.kind === "known" && JSON.stringify(previous.snapshot) === '{"value":"before"}'
          ? [fragment("developer", "<extension_test>", "</extension_test>", "after")]
          : [],
    };
    const state = new WorldState().addSection(section);
    expect(state.snapshot()).toEqual({ extension_test: { value: "after" } });
    const rendered = state.renderDiff({ extension_test: { value: "before" } });
    expect(
      rendered.map((f) => ({ role: f.role, text: f.startMarker + f.body + f.endMarker })),
    ).toEqual([{ role: "developer", text: "<extension_test>after</extension_test>" }]);
  });

  test("unreadable_section_snapshot_is_treated_as_unknown (catalog 5)", () => {
    const state = new WorldState().addSection(probe("test", "current"));
    expect(bodies(state.renderDiff({ test: { invalid: true } }))).toEqual(["unknown"]);
  });

  test("a section missing from the stored snapshot sees Absent; others see Known", () => {
    const state = new WorldState().addSection(probe("a", "1")).addSection(probe("b", "2"));
    expect(bodies(state.renderDiff({ b: { value: "0" }, other: 1 }))).toEqual([
      "absent",
      'known:{"value":"0"}',
    ]);
  });

  test("renderFull and renderDiff give sections no retained history", () => {
    const section = probe("a", "1");
    const state = new WorldState().addSection(section);
    state.renderFull();
    state.renderDiff({ a: { value: "1" } });
    expect(section.retainedSeen).toEqual([undefined, undefined]);
  });
});

describe("WorldState.renderHistoryDiff (reference §3.5)", () => {
  const legacy = (role: FragmentRole, text: string) => role === "user" && text.includes("legacy");
  const retainedMatcher = (role: FragmentRole, text: string) =>
    role === "developer" && text.includes("current catalog");

  test("no stored snapshot and no legacy text: Absent", () => {
    const state = new WorldState().addSection(probe("s", "v", { matchesLegacyFragment: legacy }));
    expect(bodies(state.renderHistoryDiff(undefined, [user("hello")]))).toEqual(["absent"]);
  });

  test("no stored snapshot but legacy text in history: Unknown", () => {
    const state = new WorldState().addSection(probe("s", "v", { matchesLegacyFragment: legacy }));
    expect(bodies(state.renderHistoryDiff(undefined, [user("<x>legacy</x>")]))).toEqual([
      "unknown",
    ]);
    expect(bodies(state.renderHistoryDiff({ other: 1 }, [user("<x>legacy</x>")]))).toEqual([
      "unknown",
    ]);
  });

  test("legacy text only counts in user or developer input_text parts of the matcher's role", () => {
    const state = new WorldState().addSection(probe("s", "v", { matchesLegacyFragment: legacy }));
    expect(
      bodies(state.renderHistoryDiff(undefined, [assistant("legacy"), developer("legacy")])),
    ).toEqual(["absent"]);
  });

  test("a section without a legacy matcher sees Absent whatever history holds", () => {
    const state = new WorldState().addSection(probe("s", "v"));
    expect(bodies(state.renderHistoryDiff(undefined, [user("legacy")]))).toEqual(["absent"]);
  });

  test("a stored snapshot without a retained matcher is Known even with empty history", () => {
    const state = new WorldState().addSection(probe("s", "v"));
    expect(bodies(state.renderHistoryDiff({ s: { value: "old" } }, []))).toEqual([
      'known:{"value":"old"}',
    ]);
  });

  test("missing_retained_fragment_is_rendered_again (catalog 4)", () => {
    const section: WorldStateSection<ValueSnapshot> = {
      id: "extension_test",
      snapshot: () => ({ value: "current catalog" }),
      readSnapshot: readValue,
      render: (previous) =>
        previous.kind === "known"
          ? []
          : [fragment("developer", "<extension_test>", "</extension_test>", "current catalog")],
      matchesRetainedFragment: retainedMatcher,
    };
    const state = new WorldState().addSection(section);
    const previous = state.snapshot();
    expect(state.renderHistoryDiff(previous, [])).toEqual([
      fragment("developer", "<extension_test>", "</extension_test>", "current catalog"),
    ]);
    expect(
      state.renderHistoryDiff(previous, [
        developer("<extension_test>current catalog</extension_test>"),
      ]),
    ).toEqual([]);
  });

  test("a retained fragment in the wrong role does not count as present", () => {
    const state = new WorldState().addSection(
      probe("s", "v", { matchesRetainedFragment: retainedMatcher }),
    );
    expect(
      bodies(state.renderHistoryDiff({ s: { value: "v" } }, [user("current catalog")])),
    ).toEqual(["absent"]);
  });

  test("a present retained fragment with an unreadable snapshot gives Unknown", () => {
    const state = new WorldState().addSection(
      probe("s", "v", { matchesRetainedFragment: retainedMatcher }),
    );
    expect(
      bodies(state.renderHistoryDiff({ s: { invalid: true } }, [developer("current catalog")])),
    ).toEqual(["unknown"]);
  });

  test("the stored snapshot wins over legacy text when both exist", () => {
    const state = new WorldState().addSection(probe("s", "v", { matchesLegacyFragment: legacy }));
    expect(bodies(state.renderHistoryDiff({ s: { value: "v" } }, [user("legacy")]))).toEqual([
      'known:{"value":"v"}',
    ]);
  });

  test("sections receive the retained history and render in insertion order", () => {
    const first = probe("zz", "1");
    const second = probe("aa", "2");
    const state = new WorldState().addSection(first).addSection(second);
    const retained = retainedItems([user("hi")]);
    expect(state.renderHistoryDiff(undefined, retained).map((f) => f.startMarker)).toEqual([
      "<zz>",
      "<aa>",
    ]);
    expect(first.retainedSeen).toHaveLength(1);
    expect(first.retainedSeen[0]).toBe(retained);
  });
});
