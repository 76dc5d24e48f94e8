/**
 * History as Chat Completions `messages`, the way Codex mapped it: the instructions as the
 * leading message, then one message per history message, each step's function calls as one
 * assistant message with `tool_calls`, and their outputs as `tool` messages right after it.
 */
import type {
  ContentItem,
  FunctionCallOutputContentItem,
  InputImage,
  KnownResponseItem,
  ReasoningItem,
  ToolOutput,
} from "../../protocol/index.ts";
import type { ChatWireOptions } from "./models.ts";

export type ChatContentPart =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string; detail?: "auto" | "low" | "high" } };

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface ChatAssistantMessage {
  role: "assistant";
  content: string | null;
  reasoning?: string;
  reasoning_content?: string;
  tool_calls?: ChatToolCall[];
}

export type ChatMessage =
  | { role: "system" | "developer" | "user"; content: string | ChatContentPart[] }
  | ChatAssistantMessage
  | { role: "tool"; tool_call_id: string; content: string | ChatContentPart[] };

/**
 * The messages of a request. Items with no counterpart on this wire are left out: reasoning
 * without text (encrypted reasoning cannot be replayed here), other tool kinds and their
 * outputs, web searches, compactions.
 */
export function chatMessages(
  instructions: string,
  items: readonly KnownResponseItem[],
  options: ChatWireOptions,
): ChatMessage[] {
  const layout = new Layout(options.reasoning_field);
  if (instructions) layout.push({ role: options.instructions_role, content: instructions });
  // Reasoning text is replayed within the turn that produced it, as Codex did: after the last
  // user message.
  const lastUser = items.findLastIndex((i) => i.type === "message" && i.role === "user");
  items.forEach((item, index) => {
    switch (item.type) {
      case "message":
        if (item.role === "assistant") layout.assistantText(textOf(item.content));
        else {
          const role = item.role === "user" ? "user" : options.developer_role;
          layout.push({ role, content: contentOf(item.content) });
        }
        break;
      case "function_call":
        layout.toolCall({
          id: item.call_id,
          type: "function",
          function: { name: item.name, arguments: item.arguments },
        });
        break;
      case "function_call_output":
        layout.toolOutput(item.call_id, toolContent(item.output, options.tool_output_images));
        break;
      case "reasoning":
        if (index > lastUser) layout.reasoning(reasoningText(item));
        break;
      default:
        break;
    }
  });
  return layout.end();
}

/**
 * Places messages so that every `tool_calls` entry is answered by `tool` messages before
 * anything else (hosts refuse it otherwise): the calls of a step and the assistant text among them share one
 * assistant message, and a message that comes while calls still wait for outputs is held until
 * they have them.
 */
class Layout {
  readonly #messages: ChatMessage[] = [];
  /** Messages held while calls wait for their outputs. */
  readonly #held: ChatMessage[] = [];
  /** The assistant message the step's next text or call joins, until another message comes. */
  #open: ChatAssistantMessage | undefined;
  /** Calls sent without an output yet. */
  readonly #waiting = new Set<string>();
  /** Every call sent: an output of any other call has nothing to answer. */
  readonly #sent = new Set<string>();
  /** Reasoning text for the next assistant message. */
  #reasoning = "";

  readonly #reasoningField: ChatWireOptions["reasoning_field"];

  constructor(reasoningField: ChatWireOptions["reasoning_field"]) {
    this.#reasoningField = reasoningField;
  }

  push(message: ChatMessage): void {
    // A held message does not end the step: its later calls still join the open message.
    if (this.#waiting.size > 0) this.#held.push(message);
    else {
      this.#open = undefined;
      this.#messages.push(message);
    }
  }

  assistantText(text: string): void {
    const open = this.#open;
    if (open?.tool_calls && this.#waiting.size > 0) {
      // Text after the step's calls: it cannot follow them as a message of its own.
      open.content = (open.content ?? "") + text;
      return;
    }
    this.#openAssistant(text);
  }

  toolCall(call: ChatToolCall): void {
    const open = this.#open ?? this.#openAssistant(null);
    if (open.tool_calls) open.tool_calls.push(call);
    else open.tool_calls = [call];
    this.#waiting.add(call.id);
    this.#sent.add(call.id);
  }

  toolOutput(callId: string, content: string | ChatContentPart[]): void {
    if (!this.#sent.has(callId)) return;
    this.#open = undefined;
    this.#messages.push({ role: "tool", tool_call_id: callId, content });
    this.#waiting.delete(callId);
    if (this.#waiting.size === 0) this.#messages.push(...this.#held.splice(0));
  }

  reasoning(text: string): void {
    this.#reasoning += text;
  }

  end(): ChatMessage[] {
    return [...this.#messages, ...this.#held];
  }

  #openAssistant(content: string | null): ChatAssistantMessage {
    const message: ChatAssistantMessage = { role: "assistant", content };
    const field = this.#reasoningField;
    if (this.#reasoning && field !== "none") message[field] = this.#reasoning;
    this.#reasoning = "";
    this.push(message);
    this.#open = message;
    return message;
  }
}

function textOf(parts: readonly ContentItem[]): string {
  return parts.map((p) => (p.type === "input_image" ? "" : p.text)).join("");
}

/** Text alone as a string (what every host takes); parts only when there is an image. */
function contentOf(parts: readonly ContentItem[]): string | ChatContentPart[] {
  if (!parts.some((p) => p.type === "input_image")) return textOf(parts);
  return parts.map((p) =>
    p.type === "input_image" ? imagePart(p) : { type: "text", text: p.text },
  );
}

function toolContent(output: ToolOutput, images: boolean): string | ChatContentPart[] {
  if (typeof output === "string") return output;
  // Encrypted parts are OpenAI Responses state, meaningless here.
  const visible = output.filter(
    (p): p is Exclude<FunctionCallOutputContentItem, { type: "encrypted_content" }> =>
      p.type === "input_text" || (images && p.type === "input_image"),
  );
  if (!visible.some((p) => p.type === "input_image")) {
    return visible.map((p) => (p.type === "input_text" ? p.text : "")).join("");
  }
  return visible.map((p) =>
    p.type === "input_image" ? imagePart(p) : { type: "text" as const, text: p.text },
  );
}

function imagePart(image: InputImage): ChatContentPart {
  const part: ChatContentPart = { type: "image_url", image_url: { url: image.image_url } };
  // Chat knows auto, low and high; `original` (no downscaling) is closest to high.
  if (image.detail !== undefined) {
    part.image_url.detail = image.detail === "original" ? "high" : image.detail;
  }
  return part;
}

function reasoningText(item: ReasoningItem): string {
  return (item.content ?? []).map((part) => part.text).join("");
}
