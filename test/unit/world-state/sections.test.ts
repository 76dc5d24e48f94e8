import { describe, expect, test } from "vitest";
import type { ContextSectionConfig } from "../../../shared/protocol/index.ts";
import { mergePatchFrom, WorldState } from "../../../shared/world-state/index.ts";
import { collaborationModeSection } from "../../../shared/world-state/sections/collaboration-mode.ts";
import { contextSectionsSection } from "../../../shared/world-state/sections/context-sections.ts";
import { modelSection } from "../../../shared/world-state/sections/model.ts";
import {
  type PersonalityConfig,
  personalitySection,
} from "../../../shared/world-state/sections/personality.ts";
import { assistant, developer, roundTrip, texts, user } from "./builders.ts";

function diff(current: WorldState, previous: WorldState) {
  return texts(current.renderDiff(roundTrip(previous.snapshot())));
}

describe("model section", () => {
  const model = (
    slug: string,
    instructions = `Instructions for ${slug}.`,
    previousModel?: string,
  ) =>
    new WorldState().addSection(
      modelSection({ slug, instructions, ...(previousModel ? { previousModel } : {}) }),
    );

  const switchText = (from: string, instructions: string) =>
    `<model_switch>\nUntil now this conversation ran on a different model (${from}). Carry on from here under the instructions that follow.\n\n${instructions}\n</model_switch>`;

  test("a Known snapshot of another model renders the switch with the new instructions", () => {
    expect(diff(model("lite"), model("full"))).toEqual([
      { role: "developer", text: switchText("full", "Instructions for lite.") },
    ]);
    expect(model("lite").snapshot()).toEqual({ model: { slug: "lite" } });
  });

  test("the same model renders nothing", () => {
    expect(diff(model("full"), model("full"))).toEqual([]);
  });

  test("with no snapshot, previousModel decides (build_initial_context_prepends_model_switch_message, catalog 64)", () => {
    expect(texts(model("lite", "Be brief.", "full").renderFull())).toEqual([
      { role: "developer", text: switchText("full", "Be brief.") },
    ]);
    expect(model("lite", "Be brief.", "lite").renderFull()).toEqual([]);
    expect(model("lite", "Be brief.").renderFull()).toEqual([]);
  });

  test("a Known snapshot wins over previousModel", () => {
    expect(model("lite", "x", "other").renderDiff({ model: { slug: "lite" } })).toEqual([]);
  });

  test("Codex's snapshot, the slug as a string, is Known", () => {
    expect(model("lite", "x", "other").renderDiff({ model: "lite" })).toEqual([]);
    expect(texts(model("lite", "Be brief.").renderDiff({ model: "full" }))).toEqual([
      { role: "developer", text: switchText("full", "Be brief.") },
    ]);
  });

  test("an unreadable snapshot (Unknown) falls back to previousModel", () => {
    expect(texts(model("lite", "Be brief.", "full").renderDiff({ model: { slug: 3 } }))).toEqual([
      { role: "developer", text: switchText("full", "Be brief.") },
    ]);
  });

  test("blank instructions render no switch", () => {
    expect(diff(model("lite", "  "), model("full"))).toEqual([]);
  });
});

describe("collaboration_mode section", () => {
  const mode = (config?: { mode: string; instructions?: string }) =>
    new WorldState().addSection(collaborationModeSection(config));

  test("renders the mode and its instructions when nothing is Known", () => {
    expect(texts(mode({ mode: "plan", instructions: "Plan first." }).renderFull())).toEqual([
      {
        role: "developer",
        text: "<collaboration_mode>\nCollaboration mode: plan\n\nPlan first.\n</collaboration_mode>",
      },
    ]);
  });

  test("renders again only when the mode or its instructions change", () => {
    const plan = mode({ mode: "plan", instructions: "Plan first." });
    expect(diff(plan, plan)).toEqual([]);
    expect(diff(mode({ mode: "plan", instructions: "Plan twice." }), plan)).toHaveLength(1);
    expect(diff(mode({ mode: "pair", instructions: "Plan first." }), plan)).toEqual([
      {
        role: "developer",
        text: "<collaboration_mode>\nCollaboration mode: pair\n\nPlan first.\n</collaboration_mode>",
      },
    ]);
  });

  test("blank or missing instructions render nothing but are still persisted", () => {
    const blank = mode({ mode: "plan" });
    expect(blank.renderFull()).toEqual([]);
    expect(Object.keys(blank.snapshot())).toEqual(["collaboration_mode"]);
    expect(diff(mode({ mode: "pair", instructions: "" }), blank)).toEqual([]);
  });

  test("no mode persists and renders nothing", () => {
    expect(mode().snapshot()).toEqual({});
    expect(mode().renderFull()).toEqual([]);
    expect(diff(mode(), mode({ mode: "plan", instructions: "x" }))).toEqual([]);
  });
});

describe("personality section (reference §3.6)", () => {
  const friendly: PersonalityConfig = { name: "friendly", message: "Be warm." };
  const terse: PersonalityConfig = { name: "terse", message: "Be short." };
  const personality = (config: PersonalityConfig | undefined, model = "m1") =>
    new WorldState().addSection(personalitySection(config, model));
  const specText = (name: string, message: string) =>
    `<personality_spec>\nFrom here on, reply with the "${name}" personality described below.\n\n${message}\n</personality_spec>`;

  test("renders when set and nothing is Known", () => {
    expect(texts(personality(friendly).renderFull())).toEqual([
      { role: "developer", text: specText("friendly", "Be warm.") },
    ]);
    expect(personality(undefined).renderFull()).toEqual([]);
    expect(personality({ name: "x", message: " " }).renderFull()).toEqual([]);
  });

  test("on the same model, a changed personality renders", () => {
    expect(diff(personality(terse), personality(friendly))).toEqual([
      { role: "developer", text: specText("terse", "Be short.") },
    ]);
    expect(diff(personality(friendly), personality(undefined))).toHaveLength(1);
  });

  test("an unchanged personality, a removed one, or a model change renders nothing", () => {
    expect(diff(personality(friendly), personality(friendly))).toEqual([]);
    expect(diff(personality(undefined), personality(friendly))).toEqual([]);
    expect(diff(personality(terse, "m2"), personality(friendly, "m1"))).toEqual([]);
  });

  test("the snapshot records the model even without a personality", () => {
    expect(personality(undefined, "m1").snapshot()).toEqual({ personality: { model: "m1" } });
    expect(personality(friendly, "m1").snapshot()).toEqual({
      personality: { name: "friendly", model: "m1" },
    });
  });
});

describe("context_sections section", () => {
  const sections = (configs: Record<string, ContextSectionConfig>) =>
    new WorldState().addSection(contextSectionsSection(configs));
  const removal = (id: string) =>
    `The context section "${id}" given earlier in this conversation has been withdrawn and no longer applies. Disregard it.`;
  const ext = (id: string, text: string) =>
    `<extension_context id="${id}">\n${text}\n</extension_context>`;

  const ab = sections({
    b: { role: "user", text: "Bee." },
    a: { role: "developer", text: "Ay." },
  });

  test("renders every section in configured order with its own role", () => {
    expect(texts(ab.renderFull())).toEqual([
      { role: "user", text: ext("b", "Bee.") },
      { role: "developer", text: ext("a", "Ay.") },
    ]);
  });

  test("the snapshot keeps role and fingerprint per id, not the text", () => {
    const snapshot = ab.snapshot().context_sections as Record<string, Record<string, string>>;
    expect(Object.keys(snapshot)).toEqual(["b", "a"]);
    expect(snapshot.a?.role).toBe("developer");
    expect(snapshot.a?.fingerprint).toMatch(/^sha1:[0-9a-f]{40}$/);
    expect(JSON.stringify(snapshot)).not.toContain("Ay.");
  });

  test("Known: only new and changed sections render, then removal notices with the old role", () => {
    const current = sections({
      a: { role: "developer", text: "Ay!" },
      c: { role: "user", text: "Sea." },
      d: { role: "user", text: "Dee." },
    });
    const previous = sections({
      b: { role: "developer", text: "Bee." },
      a: { role: "developer", text: "Ay." },
      d: { role: "user", text: "Dee." },
    });
    expect(diff(current, previous)).toEqual([
      { role: "developer", text: ext("a", "Ay!") },
      { role: "user", text: ext("c", "Sea.") },
      { role: "developer", text: ext("b", removal("b")) },
    ]);
  });

  test("a role change alone re-renders the section", () => {
    const moved = sections({
      b: { role: "developer", text: "Bee." },
      a: { role: "developer", text: "Ay." },
    });
    expect(diff(moved, ab)).toEqual([{ role: "developer", text: ext("b", "Bee.") }]);
  });

  test("removing every section renders one notice each and drops the snapshot", () => {
    const none = sections({});
    expect(none.snapshot()).toEqual({});
    expect(diff(none, ab)).toEqual([
      { role: "developer", text: ext("a", removal("a")) },
      { role: "user", text: ext("b", removal("b")) },
    ]);
    expect(mergePatchFrom(ab.snapshot(), none.snapshot())).toEqual({ context_sections: null });
    expect(diff(none, none)).toEqual([]);
  });

  test("blank text counts as no section", () => {
    const blank = sections({ a: { role: "user", text: " " } });
    expect(blank.renderFull()).toEqual([]);
    expect(blank.snapshot()).toEqual({});
  });

  test("a section whose text is missing from retained history renders again", () => {
    const previous = roundTrip(ab.snapshot());
    const onlyB = [user(ext("b", "Bee.")), assistant(ext("a", "Ay."))];
    expect(texts(ab.renderHistoryDiff(previous, onlyB))).toEqual([
      { role: "developer", text: ext("a", "Ay.") },
    ]);
    const both = [user(ext("b", "Bee.")), developer(ext("a", "Ay."))];
    expect(ab.renderHistoryDiff(previous, both)).toEqual([]);
  });

  test("with no extension fragment left in history, every current section renders again", () => {
    expect(texts(ab.renderHistoryDiff(roundTrip(ab.snapshot()), [user("hi")]))).toEqual(
      texts(ab.renderFull()),
    );
  });

  test("an unreadable snapshot (Unknown) renders every current section and no notices", () => {
    expect(
      texts(ab.renderDiff({ context_sections: { a: { role: "system", fingerprint: "x" } } })),
    ).toEqual(texts(ab.renderFull()));
  });

  test("ids are XML-escaped in the attribute", () => {
    expect(texts(sections({ 'a"b': { role: "user", text: "t" } }).renderFull())).toEqual([
      { role: "user", text: ext("a&quot;b", "t") },
    ]);
  });
});
