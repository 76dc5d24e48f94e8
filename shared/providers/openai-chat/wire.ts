/**
 * The Chat Completions wire format: the request body we send and the stream
 * chunks we read. Field names are the API's; only the subset the provider needs is read.
 */
import { type FunctionTool, parseJsonWithin, type TokenUsage } from "../../protocol/index.ts";
import * as z from "../../zod/index.ts";
import type { SseEvent } from "../http/sse.ts";
import { type ModelPrompt, ProviderError } from "../model-client.ts";
import { chatMessages } from "./messages.ts";
import type { ChatWireOptions } from "./models.ts";

export interface ChatRequestOptions {
  model: string;
  /** Sent as `max_completion_tokens` (or `max_tokens`, per `options`); absent: omitted. */
  maxOutputTokens?: number;
  options: ChatWireOptions;
}

function toChatTool(tool: FunctionTool): Record<string, unknown> {
  const fn: Record<string, unknown> = {
    name: tool.name,
    description: tool.description,
    parameters: tool.parameters,
  };
  // Omitted means non-strict on this wire; a host that does not know the field never sees it.
  if (tool.strict !== undefined) fn.strict = tool.strict;
  return { type: "function", function: fn };
}

/**
 * The `POST /chat/completions` body for one sampling request. No `prompt_cache_key`: no host
 * but OpenAI is known to take it, and unknown fields break some hosts.
 */
export function buildChatRequestBody(
  prompt: ModelPrompt,
  request: ChatRequestOptions,
): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model: request.model,
    messages: chatMessages(prompt.instructions, prompt.input.toArray(), request.options),
  };
  // OpenAI refuses `parallel_tool_calls` without `tools`.
  if (prompt.tools.length > 0) {
    body.tools = prompt.tools.map(toChatTool);
    body.parallel_tool_calls = prompt.parallel_tool_calls;
  }
  if (prompt.reasoning?.effort !== undefined) body.reasoning_effort = prompt.reasoning.effort;
  if (prompt.text !== undefined) body.verbosity = prompt.text.verbosity;
  if (request.maxOutputTokens !== undefined) {
    body[request.options.max_tokens_field] = request.maxOutputTokens;
  }
  body.stream = true;
  body.stream_options = { include_usage: true };
  return body;
}

const ToolCallDeltaSchema = z.onFirstUse(() =>
  z.looseObject({
    /** Missing on some hosts (Google's endpoint). */
    index: z.nullish(z.number()),
    id: z.nullish(z.string()),
    function: z.nullish(
      z.looseObject({ name: z.nullish(z.string()), arguments: z.nullish(z.string()) }),
    ),
  }),
);

const ChoiceSchema = z.onFirstUse(() =>
  z.looseObject({
    index: z.nullish(z.number()),
    delta: z.nullish(
      z.looseObject({
        content: z.nullish(z.string()),
        refusal: z.nullish(z.string()),
        // Reasoning text: `reasoning` (vLLM, OpenRouter, Ollama, Groq) or `reasoning_content`
        // (llama.cpp, DeepSeek, older vLLM).
        reasoning: z.nullish(z.string()),
        reasoning_content: z.nullish(z.string()),
        tool_calls: z.nullish(z.array(ToolCallDeltaSchema)),
      }),
    ),
    finish_reason: z.nullish(z.string()),
  }),
);

const ChunkSchema = z.onFirstUse(() =>
  z.looseObject({
    choices: z.nullish(z.array(ChoiceSchema)),
    usage: z.nullish(z.unknown()),
    error: z.nullish(z.unknown()),
  }),
);

export type ChatChunk = z.infer<typeof ChunkSchema>;
export type ChatChoice = z.infer<typeof ChoiceSchema>;
export type ToolCallDelta = z.infer<typeof ToolCallDeltaSchema>;

const UsageSchema = z.onFirstUse(() =>
  z.looseObject({
    prompt_tokens: z.number(),
    completion_tokens: z.number(),
    total_tokens: z.nullish(z.number()),
    prompt_tokens_details: z.nullish(z.looseObject({ cached_tokens: z.nullish(z.number()) })),
    completion_tokens_details: z.nullish(
      z.looseObject({ reasoning_tokens: z.nullish(z.number()) }),
    ),
  }),
);

/** Maps a chunk's `usage` onto our `TokenUsage`; undefined when absent or unreadable. */
export function toTokenUsage(raw: unknown): TokenUsage | undefined {
  const parsed = UsageSchema.safeParse(raw);
  if (!parsed.success) return undefined;
  const u = parsed.data;
  return {
    input_tokens: u.prompt_tokens,
    cached_input_tokens: u.prompt_tokens_details?.cached_tokens ?? 0,
    output_tokens: u.completion_tokens,
    reasoning_output_tokens: u.completion_tokens_details?.reasoning_tokens ?? 0,
    total_tokens: u.total_tokens ?? u.prompt_tokens + u.completion_tokens,
  };
}

/** The `data: [DONE]` frame that ends a stream. */
export function isDone(frame: SseEvent): boolean {
  return frame.data.trim() === "[DONE]";
}

/**
 * One SSE frame as a chunk. A failure after the 200 comes as `data: {"error": …}` and throws a
 * `ProviderError` with the host's message.
 */
export function parseChunk(frame: SseEvent): ChatChunk {
  let json: unknown;
  try {
    json = parseJsonWithin(frame.data);
  } catch (cause) {
    const what = cause instanceof SyntaxError ? "that is not JSON" : (cause as Error).message;
    throw new ProviderError(`the model stream sent a chunk ${what}`, undefined, { cause });
  }
  const chunk = ChunkSchema.safeParse(json);
  if (!chunk.success) {
    throw new ProviderError("the model stream sent a malformed chunk", undefined, {
      cause: chunk.error,
    });
  }
  if (chunk.data.error !== undefined && chunk.data.error !== null) {
    throw new ProviderError(errorMessage(chunk.data.error));
  }
  return chunk.data;
}

function errorMessage(error: unknown): string {
  if (typeof error === "string" && error) return error;
  const message = (error as { message?: unknown }).message;
  return typeof message === "string" && message ? message : "the model stream reported an error";
}
