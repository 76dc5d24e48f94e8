import type { PromptInput } from "../context-manager/index.ts";
import type { KnownResponseItem, Prompt, TokenUsage } from "../protocol/index.ts";

/**
 * A model request: a `Prompt` (the wire shape of `GET …/prompt`) whose input is history as
 * `PromptInput`, stored runs possibly unread. `input.toArray()` gives the plain items.
 */
export type ModelPrompt = Omit<Prompt, "input"> & { input: PromptInput };

/** What a provider streams back for one sampling request (design §9). */
export type ModelEvent =
  | { type: "output_text_delta"; delta: string }
  /** A finished output item: message, reasoning, function call, … */
  | { type: "output_item_done"; item: KnownResponseItem }
  | { type: "completed"; usage?: TokenUsage };

/**
 * One sampling request. The prompt's items are history's own: they are frozen and may carry
 * Spindle/Codex bookkeeping (item ids, `internal_chat_message_metadata_passthrough`) that a
 * provider must not send upstream. Implementations must stop promptly when `signal` aborts, and
 * must not yield an output item they have not finished (no half a tool call).
 */
export interface ModelClient {
  stream(prompt: ModelPrompt, signal?: AbortSignal): AsyncIterable<ModelEvent>;
}

/** A provider failed in a way the caller should report (HTTP 502 `provider_error`). */
export class ProviderError extends Error {
  constructor(
    message: string,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "ProviderError";
  }
}
