import type { FunctionCallOutputInput, PendingCallAnswerInput } from "../api/index.ts";
import type { ContentItem, ResponseItem, ToolOutput } from "../protocol/index.ts";
import type { OpenAIContentPart, OpenAIInputItem } from "./request.ts";

/** A request the surface cannot serve as asked: 400, naming the parameter (OpenAI's `param`). */
export class OpenAIInputError extends Error {
  readonly param: string;
  readonly code: "invalid_request" | "unsupported_parameter";
  constructor(
    message: string,
    param: string,
    code: "invalid_request" | "unsupported_parameter" = "invalid_request",
  ) {
    super(message);
    this.name = "OpenAIInputError";
    this.param = param;
    this.code = code;
  }
}

/**
 * A response's input in Spindle's terms: the trailing user messages become the turn's user
 * message; everything before them is replayed, in order (a client that sends its transcript
 * whole); tool outputs and approval answers are also kept apart, since they may resume the
 * paused turn they answer instead.
 */
export interface ResponseInput {
  content: ContentItem[];
  replayed: ResponseItem[];
  /** The input's `function_call_output` and `mcp_approval_response` items, in order. */
  answers: PendingCallAnswerInput[];
  /** How many client items the turn records for this input (what `input_items` lists). */
  recordedCount: number;
}

export function responseInput(
  input: string | readonly OpenAIInputItem[] | undefined,
): ResponseInput {
  if (input === undefined) return { content: [], replayed: [], answers: [], recordedCount: 0 };
  if (typeof input === "string") {
    return {
      content: [{ type: "input_text", text: input }],
      replayed: [],
      answers: [],
      recordedCount: 1,
    };
  }
  const items: ResponseItem[] = [];
  const answers: PendingCallAnswerInput[] = [];
  input.forEach((item, index) => {
    const param = `input[${index}]`;
    if (item.type === "mcp_approval_response") {
      answers.push({
        type: "mcp_approval_response",
        approval_request_id: item.approval_request_id,
        approve: item.approve,
        ...(item.reason ? { reason: item.reason } : {}),
      });
      return;
    }
    const converted = spindleItem(item, param);
    if (converted.type === "function_call_output") {
      answers.push({
        type: "function_call_output",
        call_id: converted.call_id,
        // `toolOutput` makes only text and image parts, the ones an answer takes.
        output: converted.output as FunctionCallOutputInput["output"],
      });
    }
    items.push(converted);
  });
  // The trailing user messages are the new input; one user message holds all their parts.
  let split = items.length;
  while (split > 0 && isUserMessage(items[split - 1])) split -= 1;
  const trailing = items.slice(split);
  const content = trailing.flatMap((m) => (m.type === "message" ? m.content : []));
  const replayed = items.slice(0, split);
  return {
    content,
    replayed,
    answers,
    recordedCount: replayed.length + (content.length > 0 ? 1 : 0),
  };
}

function isUserMessage(item: ResponseItem | undefined): boolean {
  return item?.type === "message" && item.role === "user";
}

/** One input item as the Spindle item the turn records. */
export function spindleItem(item: OpenAIInputItem, param: string): ResponseItem {
  switch (item.type) {
    case undefined:
    case "message": {
      // History keeps no system messages (Codex's rule): a client's system message is the
      // developer message the Responses API treats it as.
      const role = item.role === "system" ? "developer" : item.role;
      const content =
        typeof item.content === "string"
          ? [
              role === "assistant"
                ? { type: "output_text" as const, text: item.content }
                : { type: "input_text" as const, text: item.content },
            ]
          : item.content.map((part, i) => contentPart(part, role, `${param}.content[${i}]`));
      if (content.length === 0) {
        throw new OpenAIInputError("A message needs content.", `${param}.content`);
      }
      return { type: "message", role, content };
    }
    case "function_call":
      return {
        type: "function_call",
        name: item.name,
        arguments: item.arguments,
        call_id: item.call_id,
      };
    case "function_call_output":
      return {
        type: "function_call_output",
        call_id: item.call_id,
        output: toolOutput(item.output, `${param}.output`),
      };
    case "reasoning":
      return {
        type: "reasoning",
        summary: item.summary.map((part) => ({ type: "summary_text" as const, text: part.text })),
        ...(item.encrypted_content ? { encrypted_content: item.encrypted_content } : {}),
      };
    case "item_reference":
      throw new OpenAIInputError(
        "item_reference is not supported: send the item itself, or continue with previous_response_id.",
        param,
        "unsupported_parameter",
      );
    case "mcp_approval_response":
      throw new OpenAIInputError("An approval answers a request of a response.", param);
  }
}

function contentPart(part: OpenAIContentPart, role: string, param: string): ContentItem {
  switch (part.type) {
    case "input_text":
      return role === "assistant"
        ? { type: "output_text", text: part.text }
        : { type: "input_text", text: part.text };
    case "output_text":
      return role === "assistant"
        ? { type: "output_text", text: part.text }
        : { type: "input_text", text: part.text };
    case "refusal":
      return { type: "output_text", text: part.refusal };
    case "input_image": {
      if (role === "assistant") {
        throw new OpenAIInputError("An assistant message holds no images.", param);
      }
      if (!part.image_url) {
        throw new OpenAIInputError(
          "Images are taken by image_url (an https or data:image URL); file_id is not supported.",
          `${param}.file_id`,
          "unsupported_parameter",
        );
      }
      if (!/^(https?:\/\/|data:image\/)/i.test(part.image_url)) {
        throw new OpenAIInputError(
          "image_url must be an http(s) URL or a data:image/ URL.",
          `${param}.image_url`,
        );
      }
      return { type: "input_image", image_url: part.image_url, detail: part.detail };
    }
    case "input_file":
      throw new OpenAIInputError("input_file is not supported.", param, "unsupported_parameter");
  }
}

function toolOutput(output: string | readonly OpenAIContentPart[], param: string): ToolOutput {
  if (typeof output === "string") return output;
  return output.map((part, i) => {
    const converted = contentPart(part, "user", `${param}[${i}]`);
    return converted.type === "output_text"
      ? { type: "input_text" as const, text: converted.text }
      : converted;
  });
}
