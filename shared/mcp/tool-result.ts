import type { ToolOutput } from "../protocol/index.ts";

/**
 * What a `tools/call` answers (MCP `CallToolResult`), as far as the model's output reads it. The
 * blocks stay `unknown`: a server may send kinds this service does not know, and they still
 * reach the model (as JSON text).
 */
export interface McpCallToolResult {
  readonly content?: readonly unknown[];
  readonly structuredContent?: unknown;
  readonly isError?: boolean;
}

/** A call's `function_call_output` payload and whether the tool succeeded (`isError` unset). */
export interface McpToolOutput {
  readonly output: ToolOutput;
  readonly success: boolean;
}

/**
 * Converts a result as Codex does (reference §3.5, `models.rs@152e7ca`): `structuredContent`,
 * when present, is sent as its JSON text; a result of text and image blocks with at least one
 * image becomes content items (`input_text`, `input_image` with a `data:` URL); anything else, a
 * text-only result included, is the JSON text of the whole `content` array. A failed call
 * (`isError`) keeps the same form: the text the server wrote is what tells the model; `success`
 * records it.
 */
export function toolOutputOf(result: McpCallToolResult): McpToolOutput {
  const success = result.isError !== true;
  if (result.structuredContent !== undefined && result.structuredContent !== null) {
    return { output: JSON.stringify(result.structuredContent), success };
  }
  const content = result.content ?? [];
  const items = contentItems(content);
  return { output: items ?? JSON.stringify(content), success };
}

/** Content items when every block is text or image and one is an image; else undefined. */
function contentItems(content: readonly unknown[]): Exclude<ToolOutput, string> | undefined {
  const items: Exclude<ToolOutput, string> = [];
  let images = 0;
  for (const block of content) {
    if (isText(block)) {
      items.push({ type: "input_text", text: block.text });
    } else if (isImage(block)) {
      images += 1;
      items.push({ type: "input_image", image_url: `data:${block.mimeType};base64,${block.data}` });
    } else {
      return undefined;
    }
  }
  return images > 0 ? items : undefined;
}

function isText(block: unknown): block is { type: "text"; text: string } {
  return isObject(block) && block.type === "text" && typeof block.text === "string";
}

function isImage(block: unknown): block is { type: "image"; data: string; mimeType: string } {
  return (
    isObject(block) &&
    block.type === "image" &&
    typeof block.data === "string" &&
    typeof block.mimeType === "string"
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}
