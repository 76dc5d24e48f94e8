/**
 * A model switch across compaction families (Codex's `comp_hash_changed`): the history is
 * compacted before the turn by the previous model, and the turn sends the compacted context.
 */
import { describe, expect, it } from "vitest";
import { ModelCatalog, type ModelInfo, SPINDLE_LOCAL } from "../../../shared/models/index.ts";
import type { Prompt } from "../../../shared/protocol/index.ts";
import { SUMMARIZATION_REQUEST } from "../../../shared/session/index.ts";
import {
  AUTO_COMPACTION_TASK_LINES,
  drain,
  newSession,
  QUIET_TURN_LINES,
  replayed,
  runTurn,
  shapeOf,
  text,
} from "../helpers/engine.ts";

const family = (slug: string, compHash?: string): ModelInfo => ({
  ...SPINDLE_LOCAL,
  slug,
  instructions: `You are ${slug}.`,
  ...(compHash === undefined ? {} : { compHash }),
});

const CATALOG = new ModelCatalog([
  family("north-1", "2900"),
  family("north-2", "2900"),
  family("south-1", "3100"),
  family("plain"),
]);

function session(model = "north-1") {
  return newSession({ model, cwd: "/repo" }, 1000, { catalog: CATALOG });
}

const lastText = (prompt: Prompt | undefined) => {
  const item = prompt?.input.at(-1);
  const part = item?.type === "message" ? item.content[0] : undefined;
  return part?.type === "input_text" ? part.text : undefined;
};

function texts(prompt: Prompt | undefined): string[] {
  return (prompt?.input ?? []).flatMap((item) =>
    item.type === "message"
      ? item.content.map((p) =>
          p.type === "input_image" ? "[image]" : (p.text.split("\n")[0] ?? ""),
        )
      : [],
  );
}

describe("a model switch across compaction families", () => {
  it("compacts before the turn with the previous model, then sends the compacted context with the switch", async () => {
    const h = session();
    await runTurn(h, "first question");
    const mark = h.sink.items.length;
    const { events } = await drain(
      h.session.runTurn(text("second question"), { model: "south-1" }),
    );
    expect(events.filter((e) => e.type === "turn.started").map((e) => e.kind)).toEqual([
      "compaction",
      "turn",
    ]);
    // The previous model summarized: its instructions, the summarization request last.
    const summarizing = h.client.prompts.find((p) => lastText(p) === SUMMARIZATION_REQUEST);
    expect(summarizing?.instructions).toBe("You are north-1.");
    // The compaction task re-injected the turn's context; the turn itself sends only its input.
    expect(shapeOf(h.sink.items.slice(mark))).toEqual([
      ...AUTO_COMPACTION_TASK_LINES,
      ...QUIET_TURN_LINES,
    ]);
    const request = h.client.prompts.at(-1);
    expect(request?.instructions).toBe("You are south-1.");
    expect(texts(request)).toEqual([
      "<model_switch>",
      "<permissions instructions>",
      "<environment_context>",
      "first question",
      expect.stringMatching(/^Earlier turns of this conversation were condensed/),
      "second question",
    ]);
  });

  it("records the family in turn_context, and a thread rebuilt from its rollout compacts alike", async () => {
    const h = session();
    await runTurn(h, "first question");
    const context = h.sink.items.find((i) => i.type === "turn_context");
    expect(context?.type === "turn_context" && context.payload).toMatchObject({
      model: "north-1",
      comp_hash: "2900",
    });
    const rebuilt = replayed(h);
    expect(rebuilt.session.state.previousTurnSettings).toEqual({
      model: "north-1",
      comp_hash: "2900",
    });
    const { events } = await drain(rebuilt.session.runTurn(text("again"), { model: "south-1" }));
    expect(events.some((e) => e.type === "compaction.completed")).toBe(true);
  });

  it("a switch within a family, or to a model of no known family, sends only the switch", async () => {
    for (const model of ["north-2", "plain"]) {
      const h = session();
      await runTurn(h, "first question");
      const { events } = await drain(h.session.runTurn(text("next"), { model }));
      expect(events.some((e) => e.type === "compaction.completed")).toBe(false);
      const added = h.client.prompts.at(-1);
      expect(texts(added).slice(-2)).toEqual(["<model_switch>", "next"]);
    }
  });
});
