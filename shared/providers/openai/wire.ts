/**
 * The OpenAI Responses API wire format: the request body we send and the stream events we read.
 * Field names are the API's; only the subset the provider needs is read.
 */

import {
  type FunctionTool,
  type KnownResponseItem,
  KnownResponseItemSchema,
  modelVisibleItem,
  parseJsonWithin,
  type TokenUsage,
} from "../../protocol/index.ts";
import * as z from "../../zod/index.ts";
import { isRecordedThinking } from "../anthropic/thinking.ts";
import type { SseEvent } from "../http/sse.ts";
import { type ModelEvent, type ModelPrompt, ProviderError } from "../model-client.ts";
import type { InputSerializer } from "./input-text.ts";

export interface RequestBodyOptions {
  model: string;
  /** Sent as `prompt_cache_key`; absent means the field is omitted. */
  promptCacheKey?: string;
  /** Sent as `max_output_tokens`; absent means the field is omitted. */
  maxOutputTokens?: number;
}

function toWireTool(tool: FunctionTool): Record<string, unknown> {
  return {
    type: "function",
    name: tool.name,
    description: tool.description,
    parameters: tool.parameters,
    // The Responses API treats an omitted `strict` as strict mode, which rejects most
    // hand-written schemas; like Codex, ask for non-strict unless the tool opted in.
    strict: tool.strict ?? false,
  };
}

/**
 * The members of the `POST /responses` body around `input`, in the order of Codex's request:
 * `head` before it, `tail` after it.
 */
function requestMembers(prompt: ModelPrompt, options: RequestBodyOptions) {
  const head = { model: options.model, instructions: prompt.instructions };
  const tail: Record<string, unknown> = {
    tools: prompt.tools.map(toWireTool),
    tool_choice: "auto",
    parallel_tool_calls: prompt.parallel_tool_calls,
  };
  if (prompt.reasoning !== undefined) tail.reasoning = { ...prompt.reasoning };
  tail.store = false;
  tail.stream = true;
  // With `store: false` the server keeps no reasoning state; the encrypted copy is how reasoning
  // carries over to the next request. A model that does not reason would refuse the request.
  if (prompt.reasoning !== undefined) tail.include = ["reasoning.encrypted_content"];
  if (options.promptCacheKey !== undefined) tail.prompt_cache_key = options.promptCacheKey;
  if (options.maxOutputTokens !== undefined) tail.max_output_tokens = options.maxOutputTokens;
  if (prompt.text !== undefined) tail.text = { ...prompt.text };
  return { head, tail };
}

/**
 * The items a request carries: the prompt's, but for Claude's signed thinking, which a thread
 * that moved from an `anthropic` model holds and OpenAI could not decrypt.
 */
function sentItems(prompt: ModelPrompt): KnownResponseItem[] {
  const items = prompt.input.toArray();
  const foreign = (item: KnownResponseItem) =>
    item.type === "reasoning" && isRecordedThinking(item);
  return items.some(foreign) ? items.filter((item) => !foreign(item)) : items;
}

/** The `POST /responses` body for one sampling request (design §9). */
export function buildRequestBody(
  prompt: ModelPrompt,
  options: RequestBodyOptions,
): Record<string, unknown> {
  const { head, tail } = requestMembers(prompt, options);
  // A request holds every item: stored runs of history are read here.
  return { ...head, input: sentItems(prompt).map(modelVisibleItem), ...tail };
}

/**
 * `JSON.stringify(buildRequestBody(prompt, options))` as UTF-8, byte for byte, written by
 * `serializer` (which reuses what the thread's previous request serialized).
 */
export function requestBodyBytes(
  prompt: ModelPrompt,
  options: RequestBodyOptions,
  serializer: InputSerializer,
): Uint8Array {
  const { head, tail } = requestMembers(prompt, options);
  // Both objects have members, and JSON.stringify writes no space: `{…}` without its closing
  // brace and `,"input":`, the array, then `,` and the tail without its opening brace.
  return serializer.write(
    `${JSON.stringify(head).slice(0, -1)},"input":`,
    sentItems(prompt),
    `,${JSON.stringify(tail).slice(1)}`,
  );
}

const ApiErrorSchema = z.onFirstUse(() =>
  z.looseObject({
    message: z.nullish(z.string()),
    code: z.nullish(z.union([z.string(), z.number()])),
  }),
);

const UsageSchema = z.onFirstUse(() =>
  z.looseObject({
    input_tokens: z.number(),
    input_tokens_details: z.nullish(z.looseObject({ cached_tokens: z.nullish(z.number()) })),
    output_tokens: z.number(),
    output_tokens_details: z.nullish(z.looseObject({ reasoning_tokens: z.nullish(z.number()) })),
    total_tokens: z.nullish(z.number()),
  }),
);

const ResponseEnvelopeSchema = z.onFirstUse(() =>
  z.looseObject({
    response: z.nullish(
      z.looseObject({
        usage: z.optional(z.unknown()),
        error: z.nullish(ApiErrorSchema),
        incomplete_details: z.nullish(z.looseObject({ reason: z.nullish(z.string()) })),
      }),
    ),
  }),
);

const DeltaEventSchema = z.onFirstUse(() => z.looseObject({ delta: z.string() }));
const ItemDoneEventSchema = z.onFirstUse(() =>
  z.looseObject({ item: z.looseObject({ type: z.string() }) }),
);
const ErrorEventSchema = z.onFirstUse(() =>
  z.looseObject({
    message: z.nullish(z.string()),
    code: z.nullish(z.union([z.string(), z.number()])),
    error: z.nullish(ApiErrorSchema),
  }),
);

/** Maps the API's `usage` object onto our `TokenUsage`; undefined when absent or unreadable. */
export function toTokenUsage(raw: unknown): TokenUsage | undefined {
  const parsed = UsageSchema.safeParse(raw);
  if (!parsed.success) return undefined;
  const u = parsed.data;
  return {
    input_tokens: u.input_tokens,
    cached_input_tokens: u.input_tokens_details?.cached_tokens ?? 0,
    output_tokens: u.output_tokens,
    reasoning_output_tokens: u.output_tokens_details?.reasoning_tokens ?? 0,
    total_tokens: u.total_tokens ?? u.input_tokens + u.output_tokens,
  };
}

function completed(usage: unknown): ModelEvent {
  const mapped = toTokenUsage(usage);
  return mapped ? { type: "completed", usage: mapped } : { type: "completed" };
}

/** True when a failed item parse only means "a type this build does not know". */
function isUnknownItemType(error: z.core.$ZodError): boolean {
  return error.issues.every((i) => i.code === "invalid_union" && i.path[0] === "type");
}

/**
 * Turns one SSE event into a model event, or undefined for events the engine does not need
 * (`response.created`, `…added`, argument deltas, …). Failures reported by the API throw a
 * `ProviderError`. `completed` is always the last event of a response.
 */
export function interpretEvent(frame: SseEvent): ModelEvent | undefined {
  let json: unknown;
  try {
    json = parseJsonWithin(frame.data);
  } catch (cause) {
    const what = cause instanceof SyntaxError ? "that is not JSON" : (cause as Error).message;
    throw new ProviderError(`the model stream sent an event ${what} (${frame.event})`, undefined, {
      cause,
    });
  }
  if (typeof json !== "object" || json === null) return undefined;
  const typeField = (json as { type?: unknown }).type;
  const type = typeof typeField === "string" ? typeField : frame.event;

  switch (type) {
    case "response.output_text.delta": {
      const parsed = DeltaEventSchema.safeParse(json);
      return parsed.success ? { type: "output_text_delta", delta: parsed.data.delta } : undefined;
    }
    case "response.output_item.done": {
      const envelope = ItemDoneEventSchema.safeParse(json);
      if (!envelope.success)
        throw new ProviderError("the model stream sent an output item without a type");
      const item = KnownResponseItemSchema.safeParse(envelope.data.item);
      if (item.success) return { type: "output_item_done", item: item.data };
      // Items of types we do not know (built-in tool calls we never asked for, newer kinds) are
      // skipped, as Codex drops `Other`; a known type that fails to parse is a broken response.
      if (isUnknownItemType(item.error)) return undefined;
      throw new ProviderError(
        `the model stream sent a malformed ${envelope.data.item.type} item`,
        undefined,
        {
          cause: item.error,
        },
      );
    }
    case "response.completed":
      return completed(ResponseEnvelopeSchema.safeParse(json).data?.response?.usage);
    case "response.incomplete": {
      const response = ResponseEnvelopeSchema.safeParse(json).data?.response;
      const reason = response?.incomplete_details?.reason;
      // Running out of output tokens still leaves complete items; anything else (a content
      // filter, …) means the answer cannot be trusted.
      if (reason === "max_output_tokens") return completed(response?.usage);
      throw new ProviderError(`the response is incomplete: ${reason ?? "no reason given"}`);
    }
    case "response.failed": {
      const error = ResponseEnvelopeSchema.safeParse(json).data?.response?.error;
      throw new ProviderError(error?.message || "the response failed");
    }
    case "error": {
      const parsed = ErrorEventSchema.safeParse(json).data;
      throw new ProviderError(
        parsed?.message || parsed?.error?.message || "the model stream reported an error",
      );
    }
    default:
      return undefined;
  }
}
