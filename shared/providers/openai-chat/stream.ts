/**
 * A streamed chat completion assembled into model events: text deltas as they
 * come; at the end, the finished reasoning, message and function-call items, then `completed`.
 * Tool calls arrive in fragments keyed by `index` and are only yielded whole.
 */
import type { FunctionCallItem, KnownResponseItem, TokenUsage } from "../../protocol/index.ts";
import { uuidv7 } from "../../uuid/index.ts";
import { endedEarly } from "../http/attempts.ts";
import { type ModelEvent, ProviderError } from "../model-client.ts";
import { type ChatChoice, type ChatChunk, type ToolCallDelta, toTokenUsage } from "./wire.ts";

interface PartialCall {
  id?: string;
  name?: string;
  arguments: string;
}

export class ChatStreamAssembler {
  #text = "";
  #reasoning = "";
  readonly #calls: PartialCall[] = [];
  readonly #byIndex = new Map<number, PartialCall>();
  #finishReason: string | undefined;
  #usage: TokenUsage | undefined;

  /** Reads one chunk; returns the text delta it carries, if any. */
  push(chunk: ChatChunk): ModelEvent[] {
    // Usage comes on its own chunk (`choices: []`) or on the finishing one (Groq); an empty
    // `choices` alone proves nothing (Azure opens with one).
    const usage = toTokenUsage(chunk.usage);
    if (usage) this.#usage = usage;
    // Only one choice is asked for (`n` is never sent).
    const choice = chunk.choices?.find((c) => (c.index ?? 0) === 0);
    return choice ? this.#choice(choice) : [];
  }

  #choice(choice: ChatChoice): ModelEvent[] {
    const delta = choice.delta;
    if (choice.finish_reason) this.#finishReason ??= choice.finish_reason;
    if (!delta) return [];
    this.#reasoning += delta.reasoning ?? delta.reasoning_content ?? "";
    for (const call of delta.tool_calls ?? []) this.#toolCall(call);
    // A refusal is the model's answer to show: it is taken as text.
    const text = (delta.content ?? "") + (delta.refusal ?? "");
    if (!text) return [];
    this.#text += text;
    return [{ type: "output_text_delta", delta: text }];
  }

  #toolCall(delta: ToolCallDelta): void {
    const call = this.#callOf(delta);
    // Gateways repeat `id` and `name` in every fragment: the first one stands.
    call.id ??= delta.id ?? undefined;
    call.name ??= delta.function?.name || undefined;
    call.arguments += delta.function?.arguments ?? "";
  }

  #callOf(delta: ToolCallDelta): PartialCall {
    const index = delta.index;
    if (index !== undefined && index !== null) {
      let call = this.#byIndex.get(index);
      if (!call) {
        call = { arguments: "" };
        this.#byIndex.set(index, call);
        this.#calls.push(call);
      }
      return call;
    }
    // No index: the open call, unless the fragment names another id.
    const last = this.#calls.at(-1);
    if (last && (!delta.id || !last.id || last.id === delta.id)) return last;
    const call: PartialCall = { arguments: "" };
    this.#calls.push(call);
    return call;
  }

  /**
   * The stream ended (`data: [DONE]`, or the body): the finished items and `completed`. A stream
   * that never said why it finished was cut short.
   */
  end(): ModelEvent[] {
    const reason = this.#finishReason;
    if (reason === undefined) throw endedEarly();
    if (reason === "content_filter") {
      throw new ProviderError("the response was stopped by a content filter");
    }
    if (reason === "error") throw new ProviderError("the model stream reported an error");
    const items: KnownResponseItem[] = [];
    if (this.#reasoning) {
      items.push({
        type: "reasoning",
        summary: [],
        content: [{ type: "reasoning_text", text: this.#reasoning }],
      });
    }
    if (this.#text) {
      items.push({
        type: "message",
        role: "assistant",
        content: [{ type: "output_text", text: this.#text }],
      });
    }
    for (const call of this.#calls) {
      const item = functionCall(call);
      // Output cut at the token limit may leave the last call's arguments unfinished: it is
      // dropped rather than run with half its arguments.
      if (reason === "length" && !isJson(item.arguments)) continue;
      items.push(item);
    }
    const events: ModelEvent[] = items.map((item) => ({ type: "output_item_done", item }));
    // No usage chunk (an older host, or one that ignores `include_usage`): usage stays unknown.
    events.push(this.#usage ? { type: "completed", usage: this.#usage } : { type: "completed" });
    return events;
  }
}

function functionCall(call: PartialCall): FunctionCallItem {
  if (!call.name) throw new ProviderError("the model stream sent a tool call without a name");
  return {
    type: "function_call",
    name: call.name,
    // A call without arguments may stream none; hosts that parse replayed arguments (Ollama)
    // refuse an empty string.
    arguments: call.arguments || "{}",
    // Some hosts send no id (Ollama with gpt-oss): one is made, unique within the thread.
    call_id: call.id ?? `call_${uuidv7().replaceAll("-", "")}`,
  };
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
