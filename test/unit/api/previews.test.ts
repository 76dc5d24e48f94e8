import { describe, expect, it } from "vitest";
import { previewText, TURN_PREVIEW_MAX_CHARS } from "../../../shared/api/index.ts";

describe("previewText", () => {
  it("collapses runs of whitespace, newlines too, and trims the ends", () => {
    expect(previewText("  fix\n\n the\t\tbuild  ")).toBe("fix the build");
    expect(previewText(" \n ")).toBe("");
  });

  it("keeps text of the maximum length whole, measured once collapsed", () => {
    const exact = "a".repeat(TURN_PREVIEW_MAX_CHARS);
    expect(previewText(exact)).toBe(exact);
    const spread = `${"a".repeat(TURN_PREVIEW_MAX_CHARS - 2)}\n\n\nb`;
    expect(previewText(spread)).toBe(`${"a".repeat(TURN_PREVIEW_MAX_CHARS - 2)} b`);
  });

  it("cuts longer text to the maximum, the last character an ellipsis", () => {
    const cut = previewText("b".repeat(TURN_PREVIEW_MAX_CHARS + 1));
    expect(cut).toBe(`${"b".repeat(TURN_PREVIEW_MAX_CHARS - 1)}…`);
    expect(cut).toHaveLength(TURN_PREVIEW_MAX_CHARS);
  });

  it("cuts neither a surrogate pair in half nor before a space", () => {
    const emoji = previewText(`${"a".repeat(TURN_PREVIEW_MAX_CHARS - 2)}😀😀`);
    expect(emoji).toBe(`${"a".repeat(TURN_PREVIEW_MAX_CHARS - 2)}…`);
    const spaced = previewText(`${"a".repeat(TURN_PREVIEW_MAX_CHARS - 2)} bbb`);
    expect(spaced).toBe(`${"a".repeat(TURN_PREVIEW_MAX_CHARS - 2)}…`);
  });
});
