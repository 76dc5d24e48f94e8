/**
 * The Anthropic Messages API request (reference §2): Spindle's three channels as `system`,
 * `messages` and `tools`, with prompt-cache breakpoints placed by Spindle.
 */
import type {
  ContentItem,
  FunctionCallOutputContentItem,
  FunctionTool,
  KnownResponseItem,
  ReasoningEffort,
  ToolOutput,
} from "../../protocol/index.ts";
import type { ModelPrompt } from "../model-client.ts";
import type { AnthropicWireOptions } from "./models.ts";
import { thinkingBlockOf } from "./thinking.ts";

/** Anthropic requires `max_tokens`; this is it when the catalog entry sets no output limit. */
export const DEFAULT_MAX_TOKENS = 8192;
/** The API's smallest thinking budget. */
const MIN_THINKING_BUDGET = 1024;

/**
 * Thinking budgets by reasoning effort (absent: `medium`). A budget never exceeds half of
 * `max_tokens`, which it is part of, so the answer keeps the other half.
 */
const THINKING_BUDGETS: Record<Exclude<ReasoningEffort, "none">, number> = {
  minimal: 1024,
  low: 4096,
  medium: 8192,
  high: 16_384,
  xhigh: 32_768,
  max: 65_536,
  ultra: 65_536,
};

/**
 * Spindle's efforts as adaptive thinking's `output_config.effort` (`low`, `medium`, `high`,
 * `max`): the API has no `minimal`, and `max` is its most.
 */
const ADAPTIVE_EFFORTS: Record<Exclude<ReasoningEffort, "none">, string> = {
  minimal: "low",
  low: "low",
  medium: "medium",
  high: "high",
  xhigh: "max",
  max: "max",
  ultra: "max",
};

export interface RequestBodyOptions {
  /** The provider's model name: sent as `model`, and the owner of replayable thinking. */
  model: string;
  /** Sent as `max_tokens` (default `DEFAULT_MAX_TOKENS`). */
  maxTokens?: number;
  /** The thinking the model takes (default `budget`). */
  thinking?: AnthropicWireOptions["thinking"];
  /** The breakpoints' cache lifetime (default `5m`, the API's). */
  cacheTtl?: AnthropicWireOptions["cache_ttl"];
}

type Json = Record<string, unknown>;
type Block = Json & { type: string };
interface Message {
  role: "user" | "assistant";
  content: Block[];
}

/** A breakpoint's `cache_control`: the API's default lifetime, or one hour when asked. */
const cacheControlOf = (ttl: AnthropicWireOptions["cache_ttl"]) =>
  ttl === "1h" ? ({ type: "ephemeral", ttl: "1h" } as const) : ({ type: "ephemeral" } as const);

/** The `POST /messages` body for one sampling request. */
export function buildRequestBody(prompt: ModelPrompt, options: RequestBodyOptions): Json {
  const maxTokens = options.maxTokens ?? DEFAULT_MAX_TOKENS;
  const thinking = thinkingOf(prompt, maxTokens, options.thinking ?? "budget");
  const cacheControl = cacheControlOf(options.cacheTtl ?? "5m");
  const system: Block[] = prompt.instructions.trim()
    ? [{ type: "text", text: prompt.instructions, cache_control: cacheControl }]
    : [];
  const tools = prompt.tools.map(toWireTool);
  const last = tools.at(-1);
  if (last) last.cache_control = cacheControl;
  const messages = toMessages(prompt.input.toArray(), options.model, thinking !== undefined);
  markHistoryBreakpoints(messages, cacheControl);

  const body: Json = { model: options.model, max_tokens: maxTokens };
  if (system.length > 0) body.system = system;
  body.messages = messages;
  if (tools.length > 0) {
    body.tools = tools;
    // Spindle never forces a call (thinking would refuse one, §2.3).
    body.tool_choice = prompt.parallel_tool_calls
      ? { type: "auto" }
      : { type: "auto", disable_parallel_tool_use: true };
  }
  if (thinking !== undefined) {
    body.thinking = thinking.thinking;
    if (thinking.effort !== undefined) body.output_config = { effort: thinking.effort };
  }
  body.stream = true;
  return body;
}

/**
 * `thinking` (and adaptive thinking's effort) for a reasoning model (§2.6), or undefined: the
 * model does not think.
 */
function thinkingOf(
  prompt: ModelPrompt,
  maxTokens: number,
  form: AnthropicWireOptions["thinking"],
): { thinking: Json; effort?: string } | undefined {
  const effort = prompt.reasoning?.effort ?? "medium";
  if (prompt.reasoning === undefined || effort === "none") return undefined;
  // The model sizes its own thinking within `max_tokens`: no budget to fit.
  if (form === "adaptive") {
    return { thinking: { type: "adaptive" }, effort: ADAPTIVE_EFFORTS[effort] };
  }
  const budget = Math.min(THINKING_BUDGETS[effort], Math.floor(maxTokens / 2));
  // Too small an output limit leaves no room for the API's minimum budget.
  if (budget < MIN_THINKING_BUDGET) return undefined;
  return { thinking: { type: "enabled", budget_tokens: budget } };
}

function toWireTool(tool: FunctionTool): Json {
  const wire: Json = { name: tool.name };
  if (tool.description) wire.description = tool.description;
  wire.input_schema = tool.parameters;
  if (tool.strict) wire.strict = true;
  return wire;
}

/**
 * History as alternating `user` and `assistant` messages (§2.2, §2.10). Adjacent items of one
 * role share a message, so a step's thinking, text and tool calls are one assistant message and
 * the outputs answering it land in the next one, tool results first.
 *
 * Developer and system messages become user text, unchanged: a mid-conversation `system` role
 * exists only on the newest models (§2.7), and moving them into `system` would rewrite the
 * cached prefix on every change of context.
 */
function toMessages(items: readonly KnownResponseItem[], model: string, thinking: boolean) {
  const messages: Message[] = [];
  const add = (role: Message["role"], block: Block | undefined) => {
    if (!block) return;
    const open = messages.at(-1);
    if (open?.role === role) open.content.push(block);
    else messages.push({ role, content: [block] });
  };
  for (const item of items) {
    switch (item.type) {
      case "message": {
        const role = item.role === "assistant" ? "assistant" : "user";
        for (const part of item.content) add(role, contentBlock(part));
        break;
      }
      case "reasoning":
        // Thinking goes back only to a request that thinks, and only to its own model.
        if (thinking) add("assistant", thinkingBlockOf(item, model));
        break;
      case "function_call":
        add("assistant", toolUse(item.call_id, item.name, argumentsObject(item.arguments)));
        break;
      case "custom_tool_call":
        add("assistant", toolUse(item.call_id, item.name, { input: item.input }));
        break;
      case "local_shell_call":
        if (item.call_id !== null)
          add("assistant", toolUse(item.call_id, "local_shell", item.action));
        break;
      case "function_call_output":
      case "custom_tool_call_output":
        add("user", toolResult(item.call_id, item.output));
        break;
      default:
        // Web searches and OpenAI compaction have no Anthropic form.
        break;
    }
  }
  for (const message of messages) {
    if (message.role === "user") message.content = toolResultsFirst(message.content);
  }
  return messages;
}

/** A text or image block; empty text is left out (the API rejects it). */
function contentBlock(part: ContentItem | FunctionCallOutputContentItem): Block | undefined {
  switch (part.type) {
    case "input_text":
    case "output_text":
      return part.text.trim() ? { type: "text", text: part.text } : undefined;
    case "input_image":
      return imageBlock(part.image_url);
    default:
      return undefined;
  }
}

const IMAGE_MEDIA_TYPES = new Set(["image/jpeg", "image/png", "image/gif", "image/webp"]);
const DATA_URL = /^data:([^;,]+);base64,(.*)$/s;

/** `input_image` as an `image` block: base64 from a data URL, else the URL itself. */
function imageBlock(url: string): Block {
  if (!url.startsWith("data:")) return { type: "image", source: { type: "url", url } };
  const match = DATA_URL.exec(url);
  const mediaType = match?.[1]?.toLowerCase();
  if (!match || !mediaType || !IMAGE_MEDIA_TYPES.has(mediaType)) {
    // The API would refuse the whole request, on every turn of the thread from now on.
    return { type: "text", text: `[image omitted: ${mediaType ?? "not base64"} is not supported]` };
  }
  return { type: "image", source: { type: "base64", media_type: mediaType, data: match[2] } };
}

function toolUse(id: string, name: string, input: unknown): Block {
  return { type: "tool_use", id, name, input };
}

/** `input` must be a JSON object; arguments that are not one (never Anthropic's) send `{}`. */
function argumentsObject(raw: string): Json {
  try {
    const value: unknown = JSON.parse(raw);
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Json;
  } catch {
    // not JSON
  }
  return {};
}

function toolResult(callId: string, output: ToolOutput): Block {
  const block: Block = { type: "tool_result", tool_use_id: callId };
  if (typeof output === "string") {
    if (output.trim()) block.content = output;
    return block;
  }
  const content = output.map(contentBlock).filter((b): b is Block => b !== undefined);
  if (content.length > 0) block.content = content;
  return block;
}

/** A stable partition: the `tool_result` blocks first, as the API requires (§2.2). */
function toolResultsFirst(blocks: Block[]): Block[] {
  const results = blocks.filter((b) => b.type === "tool_result");
  if (results.length === 0 || results.length === blocks.length) return blocks;
  return [...results, ...blocks.filter((b) => b.type !== "tool_result")];
}

/**
 * The two breakpoints in `messages` (§2.5, §2.10; the tools and system hold the other two):
 * the last block of the newest message, written for the next request, and the last block of the
 * user message before it, where the previous request (which ended with a user message) ended,
 * so the API's 20-block lookback always finds that entry however much one step appended.
 */
function markHistoryBreakpoints(messages: Message[], cacheControl: Json): void {
  const newest = messages.at(-1);
  if (!newest) return;
  markLastBlock(newest, cacheControl);
  for (let i = messages.length - 2; i >= 0; i--) {
    const message = messages[i] as Message;
    if (message.role === "user") {
      markLastBlock(message, cacheControl);
      return;
    }
  }
}

/** Marks the last block that may carry a breakpoint (never a thinking block). */
function markLastBlock(message: Message, cacheControl: Json): void {
  for (let i = message.content.length - 1; i >= 0; i--) {
    const block = message.content[i] as Block;
    if (block.type === "thinking" || block.type === "redacted_thinking") continue;
    block.cache_control = cacheControl;
    return;
  }
}
