import { createHash } from "node:crypto";
import { describe, expect, test } from "vitest";
import { isContextualUserFragment, renderFragment } from "../../../shared/context/index.ts";
import type { AgentsMdConfig, ResponseItem } from "../../../shared/protocol/index.ts";
import { mergePatchFrom, WorldState } from "../../../shared/world-state/index.ts";
import { agentsMdSection } from "../../../shared/world-state/sections/agents-md.ts";
import { developer, roundTrip, user } from "./builders.ts";

// Spindle's AGENTS.md is one unsharded document for one directory, so the catalog's
// per-environment (17-20) and shard (21-23) cases are reproduced for a single document.

const REPLACEMENT =
  "These AGENTS.md instructions replace all AGENTS.md instructions given earlier in this conversation. Follow only the version below.";
const REMOVAL =
  "The AGENTS.md instructions given earlier in this conversation have been withdrawn and no longer apply. Disregard them.";

function world(config?: AgentsMdConfig): WorldState {
  return new WorldState().addSection(agentsMdSection(config));
}

function full(directory: string, text: string): string {
  return `# AGENTS.md instructions for ${directory}\n\n<INSTRUCTIONS>\n${text}\n</INSTRUCTIONS>`;
}

/** The removal notice under Codex's bare header (no directory). */
const WITHDRAWN = `# AGENTS.md instructions\n\n<INSTRUCTIONS>\n${REMOVAL}\n</INSTRUCTIONS>`;

function diff(current: WorldState, previous: WorldState): string[] {
  const fragments = current.renderDiff(roundTrip(previous.snapshot()));
  for (const f of fragments) expect(f.role).toBe("user");
  return fragments.map(renderFragment);
}

function historyDiff(
  current: WorldState,
  previous: WorldState | undefined,
  retained: ResponseItem[],
): string[] {
  return current
    .renderHistoryDiff(previous && roundTrip(previous.snapshot()), retained)
    .map(renderFragment);
}

const v1 = { directory: "/repo", text: "Use tabs." };
const v2 = { directory: "/repo", text: "Use spaces." };

describe("agents_md section", () => {
  test("a new document renders exactly its full instructions (catalog 17)", () => {
    expect(world(v1).renderFull().map(renderFragment)).toEqual([full("/repo", "Use tabs.")]);
  });

  test("the snapshot holds the directory and a fingerprint, never the text", () => {
    const sha1 = createHash("sha1").update("Use tabs.", "utf8").digest("hex");
    expect(world(v1).snapshot()).toEqual({
      agents_md: { directory: "/repo", fingerprint: `sha1:${sha1}` },
    });
  });

  test("unchanged_environment_renders_no_diff (catalog 20)", () => {
    expect(diff(world(v1), world(v1))).toEqual([]);
  });

  test("document_changes_replace_once (catalog 22): one fragment, one replacement notice, the new text", () => {
    const current = world({ directory: "/repo", text: "Use tabs!" });
    const texts = diff(current, world(v1));
    expect(texts).toEqual([full("/repo", `${REPLACEMENT}\n\nUse tabs!`)]);
    expect(texts.join("").split(REPLACEMENT)).toHaveLength(2);
  });

  test("a new directory with the same text is a change: the header names the directory (catalog 19 analogue)", () => {
    expect(diff(world({ directory: "/other", text: "Use tabs." }), world(v1))).toEqual([
      full("/other", `${REPLACEMENT}\n\nUse tabs.`),
    ]);
  });

  test("removal renders one notice framed as AGENTS.md under the bare header, naming no directory as Codex's does, and patches the snapshot to the empty one (catalog 18/21 analogue)", () => {
    const previous = world(v1);
    const current = world(undefined);
    expect(diff(current, previous)).toEqual([WITHDRAWN]);
    expect(mergePatchFrom(previous.snapshot(), current.snapshot())).toEqual({
      agents_md: { directory: null, fingerprint: null },
    });
  });

  test("no document persists the empty snapshot {}, which reads back as Known and renders nothing", () => {
    expect(world(undefined).snapshot()).toEqual({ agents_md: {} });
    expect(diff(world(undefined), world(undefined))).toEqual([]);
    // A document that appears after a Known "none" is sent in full, not as a replacement.
    expect(diff(world(v1), world(undefined))).toEqual([full("/repo", "Use tabs.")]);
  });

  test("blank text counts as removed", () => {
    const blank = world({ directory: "/repo", text: "  \n" });
    expect(blank.snapshot()).toEqual({ agents_md: {} });
    expect(blank.renderFull()).toEqual([]);
    expect(diff(blank, world(v1))).toEqual([WITHDRAWN]);
  });

  test("the removal notice is sent once: the next turn's history diff renders nothing", () => {
    const history = [user(full("/repo", "Use tabs.")), user("hi")];
    const removal = historyDiff(world(undefined), world(v1), history);
    expect(removal).toEqual([WITHDRAWN]);
    const next = [...history, user(removal[0] ?? "")];
    expect(historyDiff(world(undefined), world(undefined), next)).toEqual([]);
  });

  test("growth, change, no change and removal across turns (catalog 21 analogue)", () => {
    expect(world(v1).renderFull()).toHaveLength(1);
    expect(diff(world(v1), world(v1))).toHaveLength(0);
    expect(diff(world(v2), world(v1))).toHaveLength(1);
    expect(diff(world(undefined), world(v2))).toHaveLength(1);
    expect(diff(world(undefined), world(undefined))).toHaveLength(0);
  });

  test("legacy AGENTS.md text without a snapshot (Unknown) renders the replacement form once", () => {
    const history = [user(full("/repo", "Old rules.")), user("hi")];
    const rendered = historyDiff(world(v1), undefined, history);
    expect(rendered).toEqual([full("/repo", `${REPLACEMENT}\n\nUse tabs.`)]);
    // Next turn: the snapshot is Known and its text is in history, so nothing renders.
    expect(historyDiff(world(v1), world(v1), [...history, user(rendered[0] ?? "")])).toEqual([]);
  });

  test("legacy <user_instructions> text also counts as Unknown", () => {
    const history = [user("<user_instructions>\nold\n</user_instructions>")];
    expect(historyDiff(world(v1), undefined, history)).toEqual([
      full("/repo", `${REPLACEMENT}\n\nUse tabs.`),
    ]);
  });

  test("an old snapshot that stored the text ({directory, text}) is Unknown and migrates with one replacement", () => {
    const rendered = world(v1).renderDiff({ agents_md: { directory: "/repo", text: "Use tabs." } });
    expect(rendered.map(renderFragment)).toEqual([full("/repo", `${REPLACEMENT}\n\nUse tabs.`)]);
  });

  test("Unknown with no document now withdraws the legacy text once, under the bare header, and the empty snapshot keeps it from repeating", () => {
    const history = [user(full("/repo", "old")), user("hi")];
    const removal = historyDiff(world(undefined), undefined, history);
    expect(removal).toEqual([WITHDRAWN]);
    const next = [...history, user(removal[0] ?? "")];
    expect(historyDiff(world(undefined), world(undefined), next)).toEqual([]);
    // The bare notice is contextual (never a turn boundary) and not retained instructions.
    expect(isContextualUserFragment({ type: "input_text", text: removal[0] ?? "" })).toBe(true);
    expect(historyDiff(world(v1), world(v1), [user(removal[0] ?? "")])).toEqual([
      full("/repo", "Use tabs."),
    ]);
  });

  test("missing retained fragment is rendered again, and not when it is present (catalog 23 analogue)", () => {
    expect(historyDiff(world(v1), world(v1), [user("hi")])).toEqual([full("/repo", "Use tabs.")]);
    expect(historyDiff(world(v1), world(v1), [user(full("/repo", "Use tabs."))])).toEqual([]);
    const replaced = full("/repo", `${REPLACEMENT}\n\nUse tabs.`);
    expect(historyDiff(world(v1), world(v1), [user(replaced)])).toEqual([]);
  });

  test("a changed document with the old text still in history gets the replacement form", () => {
    expect(historyDiff(world(v2), world(v1), [user(full("/repo", "Use tabs."))])).toEqual([
      full("/repo", `${REPLACEMENT}\n\nUse spaces.`),
    ]);
  });

  test("an unchanged snapshot whose text was lost while an older version remains is replaced", () => {
    expect(historyDiff(world(v2), world(v2), [user(full("/repo", "Use tabs."))])).toEqual([
      full("/repo", `${REPLACEMENT}\n\nUse spaces.`),
    ]);
  });

  test("a removal notice alone in history does not count as retained instructions", () => {
    expect(historyDiff(world(v1), world(v1), [user(full("/repo", REMOVAL))])).toEqual([
      full("/repo", "Use tabs."),
    ]);
    expect(historyDiff(world(v1), world(v1), [user(WITHDRAWN)])).toEqual([
      full("/repo", "Use tabs."),
    ]);
  });

  test("AGENTS.md text in a developer message is not the retained fragment", () => {
    expect(historyDiff(world(v1), world(v1), [developer(full("/repo", "Use tabs."))])).toEqual([
      full("/repo", "Use tabs."),
    ]);
  });

  test("removal with nothing of AGENTS.md left in history renders nothing", () => {
    expect(historyDiff(world(undefined), world(v1), [user("hi")])).toEqual([]);
  });

  test("every fragment (full, replacement, removal) is a contextual user fragment", () => {
    const outputs = [
      ...world(v1).renderFull(),
      ...world(v2).renderDiff(world(v1).snapshot()),
      ...world(undefined).renderDiff(world(v1).snapshot()),
    ];
    expect(outputs).toHaveLength(3);
    for (const f of outputs) {
      expect(isContextualUserFragment({ type: "input_text", text: renderFragment(f) })).toBe(true);
    }
  });
});
