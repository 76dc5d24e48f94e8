import { describe, expect, it } from "vitest";
import { TurnInputSchema, turnContent } from "../../../shared/api/index.ts";

describe("turnContent: a turn's input as its user message's content, shaped once at the edge", () => {
  it("a string is one input_text part", () => {
    expect(turnContent(TurnInputSchema.parse("hello"))).toEqual([
      { type: "input_text", text: "hello" },
    ]);
  });

  it("messages give their parts in order, images kept", () => {
    const input = TurnInputSchema.parse([
      { type: "message", role: "user", content: [{ type: "input_text", text: "look" }] },
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=" },
          { type: "input_text", text: "at this" },
        ],
      },
    ]);
    expect(turnContent(input)).toEqual([
      { type: "input_text", text: "look" },
      { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=" },
      { type: "input_text", text: "at this" },
    ]);
  });
});
