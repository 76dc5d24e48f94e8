import { describe, expect, it } from "vitest";
import { newSession, runTurn, shapeOf, text } from "../helpers/engine.ts";

describe("ThreadSession turn ids and paused turns", () => {
  it("runTurn uses a turn id fixed by the caller", async () => {
    const h = newSession();
    const gen = h.session.runTurn(text("hi"), undefined, undefined, { turnId: "turn_fixed" });
    let next = await gen.next();
    while (!next.done) next = await gen.next();
    expect(next.value.turn_id).toBe("turn_fixed");
    expect(h.session.history.referenceContextItem?.turn_id).toBe("turn_fixed");
  });

  it("interruptPausedTurn records <turn_aborted> and turn_aborted; the unanswered call is paired with aborted", async () => {
    const h = newSession({
      tools: [{ type: "function", name: "lookup", description: "", parameters: {} }],
    });
    const paused = await runTurn(h, "/call lookup {}");
    expect(paused.status).toBe("requires_action");
    const mark = h.sink.items.length;
    const item = h.session.interruptPausedTurn(paused.turn_id);
    expect(
      item.type === "message" && item.content[0]?.type === "input_text" && item.content[0].text,
    ).toMatch(/^<turn_aborted>[\s\S]*<\/turn_aborted>$/);
    expect(shapeOf(h.sink.items.slice(mark))).toEqual([
      "response_item/user",
      "event_msg/turn_aborted",
    ]);
    const input = h.session.previewPrompt().input;
    const call = input.findIndex((i) => i.type === "function_call");
    expect(input[call + 1]).toMatchObject({ type: "function_call_output", output: "aborted" });
    expect(input.at(-1)).toMatchObject({ role: "user" });
  });
});
