/**
 * The Anthropic Messages stream (reference §2.4) read into model events: text deltas as they
 * come, each content block as a finished item when it stops, and `completed` with the usage at
 * `message_stop`.
 */
import { parseJsonWithin, type TokenUsage } from "../../protocol/index.ts";
import * as z from "../../zod/index.ts";
import { TransientFailure } from "../http/attempts.ts";
import type { SseEvent } from "../http/sse.ts";
import { type ModelEvent, ProviderError } from "../model-client.ts";
import { reasoningItemOf } from "./thinking.ts";

const UsageSchema = z.onFirstUse(() =>
  z.looseObject({
    input_tokens: z.nullish(z.number()),
    output_tokens: z.nullish(z.number()),
    cache_creation_input_tokens: z.nullish(z.number()),
    cache_read_input_tokens: z.nullish(z.number()),
  }),
);
type Usage = z.infer<typeof UsageSchema>;
const USAGE_COUNTERS = [
  "input_tokens",
  "output_tokens",
  "cache_creation_input_tokens",
  "cache_read_input_tokens",
] as const;

const MessageStartSchema = z.onFirstUse(() =>
  z.looseObject({ message: z.looseObject({ usage: z.nullish(UsageSchema) }) }),
);
const BlockStartSchema = z.onFirstUse(() =>
  z.looseObject({
    index: z.number(),
    content_block: z.looseObject({
      type: z.string(),
      id: z.optional(z.string()),
      name: z.optional(z.string()),
      input: z.optional(z.unknown()),
      text: z.optional(z.string()),
      thinking: z.optional(z.string()),
      signature: z.optional(z.string()),
      data: z.optional(z.string()),
    }),
  }),
);
const BlockDeltaSchema = z.onFirstUse(() =>
  z.looseObject({
    index: z.number(),
    delta: z.looseObject({
      type: z.string(),
      text: z.optional(z.string()),
      partial_json: z.optional(z.string()),
      thinking: z.optional(z.string()),
      signature: z.optional(z.string()),
    }),
  }),
);
const BlockStopSchema = z.onFirstUse(() => z.looseObject({ index: z.number() }));
const MessageDeltaSchema = z.onFirstUse(() =>
  z.looseObject({
    delta: z.looseObject({ stop_reason: z.nullish(z.string()) }),
    usage: z.nullish(UsageSchema),
  }),
);
const ErrorEventSchema = z.onFirstUse(() =>
  z.looseObject({
    error: z.nullish(
      z.looseObject({ type: z.nullish(z.string()), message: z.nullish(z.string()) }),
    ),
  }),
);

/** Error types of a mid-stream `error` event that a new attempt may not meet (§2.8). */
const TRANSIENT_ERRORS = new Set([
  "overloaded_error",
  "api_error",
  "timeout_error",
  "rate_limit_error",
]);

/** A content block being streamed. Server-tool and unknown blocks are read and dropped. */
type OpenBlock =
  | { kind: "text"; text: string }
  | { kind: "tool_use"; id: string; name: string; json: string; startInput: unknown }
  | { kind: "thinking"; thinking: string; signature: string }
  | { kind: "redacted_thinking"; data: string }
  | { kind: "other" };

/**
 * One message's stream, fed frame by frame. `finished` turns true at `message_stop`, after
 * which nothing more is read.
 */
export class MessageAssembly {
  readonly #model: string;
  readonly #blocks = new Map<number, OpenBlock>();
  #started = false;
  #usage: Usage = {};
  #stopReason: string | null | undefined;
  /** A tool call whose input is not a JSON object: only `max_tokens` may have cut it off. */
  #truncatedCall: string | undefined;
  finished = false;

  /** `model` is recorded with the thinking blocks it produced. */
  constructor(model: string) {
    this.#model = model;
  }

  /** The model events `frame` completes; throws a `ProviderError` on a failed or broken stream. */
  accept(frame: SseEvent): ModelEvent[] {
    const json = parseFrame(frame);
    const type = typeof json.type === "string" ? json.type : frame.event;
    switch (type) {
      case "message_start": {
        if (this.#started)
          throw new ProviderError("anthropic: a second message_start in one stream");
        this.#started = true;
        this.#usage = { ...parse(MessageStartSchema, json, type).message.usage };
        return [];
      }
      case "content_block_start":
        this.#open(parse(BlockStartSchema, json, type));
        return [];
      case "content_block_delta":
        return this.#delta(parse(BlockDeltaSchema, json, type));
      case "content_block_stop":
        return this.#close(parse(BlockStopSchema, json, type).index);
      case "message_delta": {
        const event = parse(MessageDeltaSchema, json, type);
        this.#stopReason = event.delta.stop_reason;
        // Counts here are cumulative: they replace those of `message_start`.
        for (const key of USAGE_COUNTERS) {
          const value = event.usage?.[key];
          if (typeof value === "number") this.#usage[key] = value;
        }
        if (this.#stopReason === "refusal") {
          throw new ProviderError("anthropic: the model refused to answer (stop_reason refusal)");
        }
        return [];
      }
      case "message_stop":
        return [this.#complete()];
      case "error":
        throw streamError(parse(ErrorEventSchema, json, type).error);
      default:
        // `ping` keep-alives, and event types newer than this reader.
        return [];
    }
  }

  #open(event: z.infer<typeof BlockStartSchema>): void {
    const block = event.content_block;
    let open: OpenBlock;
    switch (block.type) {
      case "text":
        open = { kind: "text", text: block.text ?? "" };
        break;
      case "tool_use":
        if (block.id === undefined || block.name === undefined) {
          throw new ProviderError("anthropic: the model stream sent a tool_use without id or name");
        }
        open = {
          kind: "tool_use",
          id: block.id,
          name: block.name,
          json: "",
          startInput: block.input,
        };
        break;
      case "thinking":
        open = {
          kind: "thinking",
          thinking: block.thinking ?? "",
          signature: block.signature ?? "",
        };
        break;
      case "redacted_thinking":
        open = { kind: "redacted_thinking", data: block.data ?? "" };
        break;
      default:
        open = { kind: "other" };
    }
    this.#blocks.set(event.index, open);
  }

  #delta(event: z.infer<typeof BlockDeltaSchema>): ModelEvent[] {
    const block = this.#blocks.get(event.index);
    if (!block)
      throw new ProviderError(`anthropic: a delta for block ${event.index}, which is not open`);
    const { delta } = event;
    if (block.kind === "text" && delta.type === "text_delta" && delta.text) {
      block.text += delta.text;
      return [{ type: "output_text_delta", delta: delta.text }];
    }
    if (block.kind === "tool_use" && delta.type === "input_json_delta") {
      block.json += delta.partial_json ?? "";
    } else if (block.kind === "thinking" && delta.type === "thinking_delta") {
      block.thinking += delta.thinking ?? "";
    } else if (block.kind === "thinking" && delta.type === "signature_delta") {
      block.signature += delta.signature ?? "";
    }
    // Other deltas (citations, server tools) carry nothing the engine keeps.
    return [];
  }

  #close(index: number): ModelEvent[] {
    const block = this.#blocks.get(index);
    if (!block) throw new ProviderError(`anthropic: block ${index} stopped, but it is not open`);
    this.#blocks.delete(index);
    switch (block.kind) {
      case "text":
        if (!block.text) return [];
        return [
          {
            type: "output_item_done",
            item: {
              type: "message",
              role: "assistant",
              content: [{ type: "output_text", text: block.text }],
            },
          },
        ];
      case "tool_use": {
        const args = toolArguments(block);
        if (args === undefined) {
          this.#truncatedCall = block.name;
          return [];
        }
        return [
          {
            type: "output_item_done",
            item: { type: "function_call", name: block.name, arguments: args, call_id: block.id },
          },
        ];
      }
      case "thinking":
        return [
          {
            type: "output_item_done",
            item: reasoningItemOf(
              { type: "thinking", thinking: block.thinking, signature: block.signature },
              this.#model,
            ),
          },
        ];
      case "redacted_thinking":
        return [
          {
            type: "output_item_done",
            item: reasoningItemOf({ type: "redacted_thinking", data: block.data }, this.#model),
          },
        ];
      default:
        return [];
    }
  }

  #complete(): ModelEvent {
    if (!this.#started) throw new ProviderError("anthropic: message_stop without message_start");
    // Running out of output tokens may cut a call's input short: that call is not yielded, the
    // rest is complete. Anywhere else, a call that is not a JSON object is a broken answer.
    if (this.#truncatedCall !== undefined && this.#stopReason !== "max_tokens") {
      throw new ProviderError(
        `anthropic: the model's call of ${this.#truncatedCall} has input that is not a JSON object`,
      );
    }
    this.finished = true;
    return { type: "completed", usage: toTokenUsage(this.#usage) };
  }
}

/**
 * Spindle's usage from Anthropic's (§4.2): `input_tokens` counts only what follows the last
 * breakpoint, so the prompt is the sum of it and both cache counters; cached input is what was
 * read from the cache.
 */
export function toTokenUsage(usage: Usage): TokenUsage {
  const read = usage.cache_read_input_tokens ?? 0;
  const input = (usage.input_tokens ?? 0) + read + (usage.cache_creation_input_tokens ?? 0);
  const output = usage.output_tokens ?? 0;
  return {
    input_tokens: input,
    cached_input_tokens: read,
    output_tokens: output,
    // Thinking is part of `output_tokens`; the API does not count it apart.
    reasoning_output_tokens: 0,
    total_tokens: input + output,
  };
}

/** The call's arguments as the model wrote them (`{}` for none), or undefined if not an object. */
function toolArguments(block: Extract<OpenBlock, { kind: "tool_use" }>): string | undefined {
  let json = block.json;
  if (json.trim() === "") {
    // No deltas: the input, if any, came whole with the block's start.
    const start = block.startInput;
    json = typeof start === "object" && start !== null ? JSON.stringify(start) : "{}";
  }
  try {
    const value: unknown = JSON.parse(json);
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return json;
  } catch {
    // cut off, or not JSON
  }
  return undefined;
}

function parseFrame(frame: SseEvent): Record<string, unknown> {
  let json: unknown;
  try {
    json = parseJsonWithin(frame.data);
  } catch (cause) {
    const what = cause instanceof SyntaxError ? "that is not JSON" : (cause as Error).message;
    throw new ProviderError(
      `anthropic: the model stream sent an event ${what} (${frame.event})`,
      undefined,
      {
        cause,
      },
    );
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new ProviderError(
      `anthropic: the model stream sent an event that is not an object (${frame.event})`,
    );
  }
  return json as Record<string, unknown>;
}

function parse<T>(schema: z.ZodMiniType<T>, json: unknown, type: string): T {
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new ProviderError(
      `anthropic: the model stream sent a malformed ${type} event`,
      undefined,
      {
        cause: parsed.error,
      },
    );
  }
  return parsed.data;
}

/** A mid-stream `error` event: overloaded and server errors are worth another attempt. */
function streamError(error: { type?: string | null; message?: string | null } | null | undefined) {
  const type = error?.type ?? "error";
  const failure = new ProviderError(
    `anthropic: ${type}: ${error?.message || "the model stream reported an error"}`,
  );
  return TRANSIENT_ERRORS.has(type) ? new TransientFailure(failure) : failure;
}
