import type { ContentItem, ResponseItem } from "../protocol/index.ts";
import { InvalidInputError } from "./errors.ts";

/**
 * Items a client replays or adds to a thread outside the model's own output (a transcript sent
 * again whole, a conversation's items): messages of any role, function calls with their outputs,
 * reasoning. Each is rebuilt from the fields the model reads, so ids and metadata a client sent
 * are never kept and nothing else slips into history. Anything else is `InvalidInputError`.
 */
export function clientItems(items: readonly ResponseItem[], what: string): ResponseItem[] {
  return items.map((item, index) => clientItem(item, `${what} item ${index}`));
}

function clientItem(item: ResponseItem, what: string): ResponseItem {
  switch (item.type) {
    case "message":
      return {
        type: "message",
        role: item.role,
        content: messageContent(item.role, item.content, what),
      };
    case "function_call":
      return {
        type: "function_call",
        name: item.name,
        arguments: item.arguments,
        call_id: item.call_id,
      };
    case "function_call_output":
      return { type: "function_call_output", call_id: item.call_id, output: item.output };
    case "reasoning":
      return {
        type: "reasoning",
        summary: item.summary.map((part) => ({ type: "summary_text", text: part.text })),
        ...(item.encrypted_content ? { encrypted_content: item.encrypted_content } : {}),
      };
    default:
      throw new InvalidInputError(`${what}: a ${item.type} item cannot be added by a client`);
  }
}

/** User, developer and system messages take input parts; assistant messages take output text. */
function messageContent(
  role: string,
  content: readonly ContentItem[],
  what: string,
): ContentItem[] {
  if (role !== "assistant") return checkUserContent(content, what);
  if (content.length === 0) throw new InvalidInputError(`${what}: content must not be empty`);
  return content.map((part) => {
    if (part.type === "output_text") return { type: "output_text", text: part.text };
    throw new InvalidInputError(`${what}: assistant content takes output_text parts`);
  });
}

/** Input parts (`input_text`, `input_image`), rebuilt; none is `InvalidInputError`. */
export function checkUserContent(content: readonly ContentItem[], what: string): ContentItem[] {
  if (content.length === 0) throw new InvalidInputError(`${what}: content must not be empty`);
  return content.map((part) => {
    if (part.type === "input_text") return { type: "input_text", text: part.text };
    if (part.type === "input_image") {
      return part.detail === undefined
        ? { type: "input_image", image_url: part.image_url }
        : { type: "input_image", image_url: part.image_url, detail: part.detail };
    }
    throw new InvalidInputError(`${what}: content takes input_text and input_image parts`);
  });
}
