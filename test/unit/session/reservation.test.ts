import { describe, expect, it } from "vitest";
import { ModelCatalog, SPINDLE_LOCAL, SPINDLE_LOCAL_LITE } from "../../../shared/models/index.ts";
import type { ContentItem } from "../../../shared/protocol/index.ts";
import { type Harness, LOOKUP_TOOL, newSession, resume, runTurn, text } from "../helpers/engine.ts";

/** Input + output tokens the session's requests reported so far. */
function spent(h: Harness): number {
  const total = h.session.history.tokenInfo?.total_token_usage;
  return total ? total.input_tokens + total.output_tokens : 0;
}

/** The prompts sent so far. */
const requests = (h: Harness) => h.client.prompts.length;

const words = (t: string): ContentItem[] => [{ type: "input_text", text: t }];

describe("ThreadSession.reservation", () => {
  it("a turn reserves its prompt (context, initial context, input, tools) plus the output limit: never less than it uses, not much more", async () => {
    const h = newSession({ cwd: "/repo", tools: [LOOKUP_TOOL] });
    for (const input of ["first", "second, a little longer", "third"]) {
      const before = spent(h);
      const reserved = h.session.reservation({ kind: "turn", content: words(input) });
      await runTurn(h, input);
      const used = spent(h) - before;
      expect(used).toBeLessThanOrEqual(reserved);
      // The output limit is the slack: the prompt estimate stays close to what was sent.
      const prompt = reserved - SPINDLE_LOCAL.maxOutputTokens;
      expect(prompt).toBeGreaterThanOrEqual(used - 100);
      expect(prompt).toBeLessThan(2 * used);
    }
  });

  it("reads the model a turn's overrides switch to", () => {
    const h = newSession();
    const plain = h.session.reservation({ kind: "turn", content: words("hi") });
    const lite = h.session.reservation({
      kind: "turn",
      content: words("hi"),
      overrides: { model: SPINDLE_LOCAL_LITE.slug },
    });
    expect(plain - lite).toBeGreaterThanOrEqual(
      SPINDLE_LOCAL.maxOutputTokens - SPINDLE_LOCAL_LITE.maxOutputTokens - 50,
    );
    // Overrides that do not resolve leave the current model (such a turn never starts).
    expect(
      h.session.reservation({ kind: "turn", content: words("hi"), overrides: { model: "nope" } }),
    ).toBe(plain);
  });

  it("counts the compaction a switch across compaction families makes first, and the tokens it uses fit", async () => {
    const catalog = new ModelCatalog([
      { ...SPINDLE_LOCAL, slug: "north", compHash: "1" },
      { ...SPINDLE_LOCAL, slug: "south", compHash: "2" },
      { ...SPINDLE_LOCAL, slug: "west", compHash: "1" },
    ]);
    const h = newSession({ model: "north" }, 1000, { catalog });
    await runTurn(h, "first");
    const turn = (model: string) =>
      h.session.reservation({ kind: "turn", content: words("hi"), overrides: { model } });
    const across = turn("south");
    expect(across - turn("west")).toBeGreaterThanOrEqual(SPINDLE_LOCAL.maxOutputTokens);
    const before = spent(h);
    await runTurn(h, "hi", { model: "south" });
    expect(spent(h) - before).toBeLessThanOrEqual(across);
  });

  it("counts a compaction request first when the context would pass the auto-compaction limit", async () => {
    const h = newSession({ model: SPINDLE_LOCAL_LITE.slug });
    await runTurn(h, "a first turn with some words in it");
    const quiet = h.session.reservation({ kind: "turn", content: words("next") });
    await runTurn(h, "set the limit low", { auto_compact_fraction: 0.01 });
    const before = spent(h);
    const sent = requests(h);
    const reserved = h.session.reservation({ kind: "turn", content: words("next") });
    await runTurn(h, "next");
    // Two requests: the compaction, then the turn.
    expect(requests(h) - sent).toBe(2);
    expect(spent(h) - before).toBeLessThanOrEqual(reserved);
    expect(reserved).toBeGreaterThan(quiet + SPINDLE_LOCAL_LITE.maxOutputTokens);
  });

  it("a manual compaction, a resume and a steer each reserve at least what they use", async () => {
    const h = newSession({ tools: [LOOKUP_TOOL] });
    await runTurn(h, "some history");
    let before = spent(h);
    let reserved = h.session.reservation({ kind: "compaction" });
    for await (const _ of h.session.compact()) {
      // drained
    }
    expect(spent(h) - before).toBeLessThanOrEqual(reserved);
    expect(reserved).toBeLessThan(spent(h) - before + SPINDLE_LOCAL.maxOutputTokens + 100);

    const paused = await runTurn(h, '/call lookup {"q":"x"}');
    const outputs = (calls: { call_id: string }[]) =>
      calls.map((c) => ({ call_id: c.call_id, output: "forty-two" }));
    if (paused.status !== "requires_action") throw new Error("expected a paused turn");
    before = spent(h);
    reserved = h.session.reservation({ kind: "resume", outputs: outputs(paused.pending_calls) });
    await resume(h, paused, outputs);
    expect(spent(h) - before).toBeLessThanOrEqual(reserved);

    // A steer adds one sampling step: its prompt holds the running step's answer too.
    const steer = h.session.reservation({ kind: "steer", content: words("and more") });
    const turn = h.session.reservation({ kind: "turn", content: words("and more") });
    expect(steer - turn).toBe(SPINDLE_LOCAL.maxOutputTokens);
    before = spent(h);
    let reservedTurn = h.session.reservation({ kind: "turn", content: words("a turn to steer") });
    const gen = h.session.runTurn(text("a turn to steer"));
    let steered = false;
    for (let next = await gen.next(); !next.done; next = await gen.next()) {
      if (!steered && next.value.type === "item.delta") {
        // As the thread does: the steer's request is reserved while the turn runs.
        reservedTurn += h.session.reservation({ kind: "steer", content: words("and more") });
        h.session.steer(words("and more"));
        steered = true;
      }
    }
    expect(steered).toBe(true);
    expect(spent(h) - before).toBeLessThanOrEqual(reservedTurn);
  });
});
