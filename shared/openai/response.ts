import type { TurnResource } from "../api/index.ts";
import type { ResponseItem, TokenUsage } from "../protocol/index.ts";
import { type ResponseRef, responseId } from "./ids.ts";
import { responseStretch, serverToolOf } from "./items.ts";
import type { OpenAIItem, OpenAIResponse, OpenAIUsage, ResponseStatus } from "./resources.ts";

/** The settings a response echoes: the request's, or the thread's when read back. */
export interface ResponseSettings {
  model: string;
  instructions: string | null;
  tools: Array<{ type: string } & Record<string, unknown>>;
  tool_choice: unknown;
  parallel_tool_calls: boolean;
  reasoning: { effort: string | null; summary: string | null } | null;
  text: { format: { type: string } & Record<string, unknown> };
  max_output_tokens: number | null;
  max_tool_calls: number | null;
  temperature: number;
  top_p: number;
  top_logprobs: number;
  presence_penalty: number;
  frequency_penalty: number;
  truncation: "auto" | "disabled";
  metadata: Record<string, string>;
  store: boolean;
  background: boolean;
  user: string | null;
  safety_identifier: string | null;
  prompt_cache_key: string | null;
  service_tier: string;
  previous_response_id: string | null;
  conversation: { id: string } | null;
}

/** An item as the OpenAI surface shows it; `results` holds server calls' outputs by call id. */
export function openAIItem(
  item: ResponseItem,
  fallbackId: string,
  results: ReadonlyMap<string, string> = new Map(),
): OpenAIItem | undefined {
  const id = ("id" in item && typeof item.id === "string" && item.id) || fallbackId;
  switch (item.type) {
    case "message":
      return {
        type: "message",
        id,
        status: "completed",
        role: item.role,
        content: item.content.map((part) =>
          part.type === "output_text"
            ? { type: "output_text", text: part.text, annotations: [], logprobs: [] }
            : part.type === "input_text"
              ? { type: "input_text", text: part.text }
              : {
                  type: "input_image",
                  image_url: part.image_url,
                  detail: part.detail ?? "auto",
                },
        ),
      };
    case "function_call": {
      const server = serverToolOf(item.name);
      if (server) {
        return {
          type: "mcp_call",
          id,
          ...server,
          arguments: item.arguments,
          output: results.get(item.call_id) ?? null,
          error: null,
          status: results.has(item.call_id) ? "completed" : "in_progress",
        };
      }
      return {
        type: "function_call",
        id,
        call_id: item.call_id,
        name: item.name,
        arguments: item.arguments,
        status: "completed",
      };
    }
    case "function_call_output":
      return {
        type: "function_call_output",
        id,
        call_id: item.call_id,
        output:
          typeof item.output === "string"
            ? item.output
            : item.output.map((part) => ({ ...part }) as { type: string }),
        status: "completed",
      };
    case "reasoning":
      return {
        type: "reasoning",
        id,
        summary: item.summary.map((part) => ({ type: "summary_text", text: part.text })),
        ...(item.encrypted_content ? { encrypted_content: item.encrypted_content } : {}),
      };
    default:
      return undefined;
  }
}

/**
 * A server call's output as `mcp_call.output` carries it: the text of its content. The engine
 * records an MCP result's content as JSON (Codex's form); text parts are joined, anything else
 * stays as recorded.
 */
function outputText(item: ResponseItem & { type: "function_call_output" }): string {
  if (typeof item.output !== "string") {
    return item.output.map((part) => (part.type === "input_text" ? part.text : "")).join("");
  }
  try {
    const parts: unknown = JSON.parse(item.output);
    if (Array.isArray(parts) && parts.every(isTextPart)) return parts.map((p) => p.text).join("");
  } catch {
    // Not JSON: a plain text output.
  }
  return item.output;
}

function isTextPart(part: unknown): part is { type: "text"; text: string } {
  return (
    typeof part === "object" &&
    part !== null &&
    (part as { type?: unknown }).type === "text" &&
    typeof (part as { text?: unknown }).text === "string"
  );
}

/**
 * A response's output items. A server call shows as one `mcp_call` with its output folded in,
 * where its output was recorded: a call still waiting for it (held for approval) is not shown
 * yet, and a call of an `earlier` stretch answered in this one shows here. Then the approvals
 * the turn waits on.
 */
export function outputItems(
  output: readonly ResponseItem[],
  idPrefix: string,
  approvals: TurnResource["pending_approvals"] = [],
  earlier: readonly ResponseItem[] = [],
): OpenAIItem[] {
  const calls = new Map<string, ResponseItem>();
  for (const item of [...earlier, ...output]) {
    if (item.type === "function_call" && serverToolOf(item.name)) calls.set(item.call_id, item);
  }
  const results = new Map<string, string>();
  for (const item of output) {
    if (item.type === "function_call_output" && calls.has(item.call_id)) {
      results.set(item.call_id, outputText(item));
    }
  }
  const items = output.flatMap((item, index) => {
    let shown: ResponseItem | undefined = item;
    if (item.type === "function_call" && calls.has(item.call_id)) {
      shown = undefined;
    } else if (item.type === "function_call_output" && calls.has(item.call_id)) {
      shown = calls.get(item.call_id);
    }
    const mapped = shown && openAIItem(shown, `${idPrefix}_${index}`, results);
    return mapped ? [mapped] : [];
  });
  for (const approval of approvals ?? []) {
    const server = serverToolOf(approval.name);
    items.push({
      type: "mcp_approval_request",
      id: approval.id,
      server_label: approval.server_label,
      name: server?.name ?? approval.name,
      arguments: approval.arguments,
    });
  }
  return items;
}

export function openAIUsage(usage: TokenUsage | null): OpenAIUsage | null {
  if (usage === null) return null;
  return {
    input_tokens: usage.input_tokens,
    input_tokens_details: { cached_tokens: usage.cached_input_tokens },
    output_tokens: usage.output_tokens,
    output_tokens_details: { reasoning_tokens: usage.reasoning_output_tokens },
    total_tokens: usage.total_tokens,
  };
}

/**
 * A turn's status as a response's: a turn paused on client calls has completed its response
 * (the calls are its output, as OpenAI ends a response); an interrupted one was cancelled.
 */
export function responseStatus(turn: TurnResource, last: boolean): ResponseStatus {
  if (!last) return "completed";
  switch (turn.status) {
    case "in_progress":
      return "in_progress";
    case "completed":
    case "requires_action":
      return "completed";
    case "interrupted":
      return "cancelled";
    case "failed":
      return "failed";
  }
}

/** Milliseconds since the epoch of a UUIDv7 in an id (`turn_<uuidv7>`), else undefined. */
export function uuidv7Time(id: string): number | undefined {
  const match = /([0-9a-f]{8})-([0-9a-f]{4})-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/i.exec(id);
  if (!match) return undefined;
  return Number.parseInt(`${match[1]}${match[2]}`, 16);
}

/** The ResponseResource of the stretch `ref` of `turn`. */
export function responseResource(
  turn: TurnResource,
  ref: ResponseRef,
  settings: ResponseSettings,
  nowMs: number,
): OpenAIResponse {
  const { output, resumed } = responseStretch(turn.items, ref.start, ref.inputs);
  const id = responseId(ref);
  const last = !resumed;
  const status = responseStatus(turn, last);
  const createdMs = uuidv7Time(turn.id) ?? nowMs;
  const done = status !== "in_progress" && status !== "queued";
  return {
    id,
    object: "response",
    created_at: Math.floor(createdMs / 1000),
    completed_at: done ? Math.floor(nowMs / 1000) : null,
    status,
    background: settings.background,
    conversation: settings.conversation,
    error:
      status === "failed" && turn.error
        ? { code: turn.error.code, message: turn.error.message }
        : null,
    incomplete_details: null,
    instructions: settings.instructions,
    max_output_tokens: settings.max_output_tokens,
    max_tool_calls: settings.max_tool_calls,
    model: settings.model,
    output: outputItems(
      output,
      `item_${turn.id}`,
      last ? turn.pending_approvals : [],
      turn.items.slice(0, ref.start),
    ),
    parallel_tool_calls: settings.parallel_tool_calls,
    previous_response_id: settings.previous_response_id,
    prompt_cache_key: settings.prompt_cache_key,
    reasoning: settings.reasoning,
    safety_identifier: settings.safety_identifier,
    service_tier: settings.service_tier,
    store: settings.store,
    temperature: settings.temperature,
    text: settings.text,
    tool_choice: settings.tool_choice,
    tools: settings.tools,
    top_logprobs: settings.top_logprobs,
    top_p: settings.top_p,
    presence_penalty: settings.presence_penalty,
    frequency_penalty: settings.frequency_penalty,
    truncation: settings.truncation,
    usage: openAIUsage(turn.usage),
    user: settings.user,
    metadata: settings.metadata,
  };
}
