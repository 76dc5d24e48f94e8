import { describe, expect, it } from "vitest";
import {
  DEFAULT_MODEL_CATALOG,
  type ModelInfo,
  SPINDLE_LOCAL,
} from "../../../shared/models/index.ts";
import type { ThreadConfig } from "../../../shared/protocol/index.ts";
import {
  buildTurnContext,
  resolveSessionConfiguration,
  SUMMARIZATION_REQUEST,
  toTurnContextItem,
} from "../../../shared/session/index.ts";
import { drain, newSession, runTurn, T0 } from "../helpers/engine.ts";

/** A reasoning model served by the local provider, so the engine can run it offline. */
const THINKER: ModelInfo = {
  ...SPINDLE_LOCAL,
  slug: "thinker",
  reasoning: { effort: "high", summary: "auto" },
  verbosity: "low",
};
const CATALOG = DEFAULT_MODEL_CATALOG.with([THINKER]);

function turnOf(config: ThreadConfig) {
  const resolved = resolveSessionConfiguration(undefined, config, CATALOG, "thinker");
  const model = CATALOG.get(resolved.model);
  if (model === undefined) throw new Error("model");
  return buildTurnContext("t1", resolved, model, T0);
}

describe("reasoning and verbosity of a turn's requests", () => {
  it("a reasoning model's catalog defaults give reasoning {effort, summary} and text {verbosity}; turn_context records effort and summary", () => {
    const turn = turnOf({});
    expect(turn.request).toEqual({
      reasoning: { effort: "high", summary: "auto" },
      text: { verbosity: "low" },
    });
    const item = toTurnContextItem(turn);
    expect([item.effort, item.summary]).toEqual(["high", "auto"]);
  });

  it("a thread override replaces the defaults; summary none sends no summary", () => {
    const turn = turnOf({ reasoning: { effort: "low", summary: "none" } });
    expect(turn.request).toEqual({ reasoning: { effort: "low" }, text: { verbosity: "low" } });
    const item = toTurnContextItem(turn);
    expect([item.effort, item.summary]).toEqual(["low", "none"]);
    // Only a summary: the catalog effort stays.
    expect(turnOf({ reasoning: { summary: "detailed" } }).request.reasoning).toEqual({
      effort: "high",
      summary: "detailed",
    });
  });

  it("a model that does not reason gets neither, whatever the thread sets; turn_context still records the thread's settings", () => {
    const plain = turnOf({ model: "spindle-local" });
    expect(plain.request).toEqual({});
    const plainItem = toTurnContextItem(plain);
    expect(plainItem.summary).toBe("auto");
    expect(plainItem).not.toHaveProperty("effort");
    const set = turnOf({ model: "spindle-local", reasoning: { effort: "high" } });
    expect(set.request).toEqual({});
    expect(toTurnContextItem(set).effort).toBe("high");
  });

  it("every request of a turn (sampling, compaction) and the prompt preview carry them", async () => {
    const h = newSession({ model: "thinker" }, 1000, { catalog: CATALOG });
    await runTurn(h, "hello");
    await drain(h.session.compact("manual"));
    const [sampled, compaction] = h.client.prompts;
    const settings = { reasoning: { effort: "high", summary: "auto" }, text: { verbosity: "low" } };
    expect(sampled).toMatchObject(settings);
    expect(compaction?.input.at(-1)).toMatchObject({
      content: [{ type: "input_text", text: SUMMARIZATION_REQUEST }],
    });
    expect(compaction).toMatchObject(settings);
    expect(h.session.previewPrompt()).toMatchObject(settings);
    // A turn override changes them from that turn on.
    await runTurn(h, "again", { reasoning: { effort: "minimal" } });
    expect(h.client.prompts.at(-1)?.reasoning).toEqual({ effort: "minimal", summary: "auto" });
    expect(h.session.previewPrompt().reasoning).toEqual({ effort: "minimal", summary: "auto" });
  });
});
