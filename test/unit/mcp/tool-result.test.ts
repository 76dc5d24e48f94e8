import { describe, expect, it } from "vitest";
import { toolOutputOf } from "../../../shared/mcp/index.ts";
import { ToolOutputSchema } from "../../../shared/protocol/index.ts";

const PNG = "iVBORw0KGgo=";

describe("an MCP result as the model's function_call_output", () => {
  it("sends a text-only result as the JSON of its content array, as Codex does", () => {
    const content = [{ type: "text", text: "42 issues open" }];
    expect(toolOutputOf({ content })).toEqual({
      output: '[{"type":"text","text":"42 issues open"}]',
      success: true,
    });
  });

  it("prefers structuredContent, as its JSON text", () => {
    const result = { content: [{ type: "text", text: "{}" }], structuredContent: { open: 42 } };
    expect(toolOutputOf(result).output).toBe('{"open":42}');
  });

  it("keeps images: text and image blocks become content items with a data URL", () => {
    const out = toolOutputOf({
      content: [
        { type: "text", text: "the chart" },
        { type: "image", data: PNG, mimeType: "image/png" },
      ],
    });
    expect(out.output).toEqual([
      { type: "input_text", text: "the chart" },
      { type: "input_image", image_url: `data:image/png;base64,${PNG}` },
    ]);
    expect(ToolOutputSchema.safeParse(out.output).success).toBe(true);
  });

  it("falls back to JSON text when a block is neither text nor image", () => {
    const content = [
      { type: "image", data: PNG, mimeType: "image/png" },
      { type: "resource_link", uri: "file:///a", name: "a" },
    ];
    expect(toolOutputOf({ content }).output).toBe(JSON.stringify(content));
    expect(toolOutputOf({}).output).toBe("[]");
  });

  it("a failed call keeps the server's text and is recorded as not successful", () => {
    const content = [{ type: "text", text: "rate limited by upstream" }];
    expect(toolOutputOf({ content, isError: true })).toEqual({
      output: JSON.stringify(content),
      success: false,
    });
  });
});
