import { sha1 } from "@noble/hashes/legacy.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";
import { isUserTurnBoundary } from "../context/index.ts";
import { estimateSentItemTokenCount, type PromptInput } from "../context-manager/index.ts";
import type {
  FunctionCallItem,
  KnownResponseItem,
  MessageItem,
  TokenUsage,
  ToolOutput,
} from "../protocol/index.ts";
import { SUMMARIZATION_REQUEST, SUMMARY_PREFIX } from "../session/index.ts";
import type { ModelClient, ModelEvent, ModelPrompt } from "./model-client.ts";

/** `/call NAME {json arguments}`: asks the local model to call a declared tool. */
const CALL_COMMAND = /^\/call\s+([A-Za-z0-9_-]+)(?:\s+([\s\S]*))?$/;
/** `/slow MS …`: the answer waits MS milliseconds before each delta (interrupt and steer tests). */
const SLOW_COMMAND = /^\/slow\s+(\d{1,5})\b/;
/** Splits answers into a few deltas so streaming can be observed... */
const DELTA_CHARS = 24;
/** ...but never into more than this many (a longer answer gets longer deltas). */
const MAX_DELTAS = 1_000;

/** Waits, or rejects with the signal's reason as soon as it aborts. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

const timerSleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    signal?.throwIfAborted();
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });

function userText(item: MessageItem): string {
  return item.content
    .map((part) =>
      part.type === "input_text" ? part.text : part.type === "input_image" ? "[image]" : "",
    )
    .join("");
}

function outputText(output: ToolOutput): string {
  if (typeof output === "string") return output;
  return output.map((p) => (p.type === "input_text" ? p.text : `[${p.type}]`)).join("");
}

/** The newest real user message (a turn boundary) and where it is, if any. */
function lastUserMessage(input: PromptInput): { index: number; item?: MessageItem } {
  const index = input.findLastIndex(isUserTurnBoundary);
  const item = index >= 0 ? input.slice(index, index + 1)[0] : undefined;
  return item?.type === "message" ? { index, item } : { index };
}

/** The text of the newest real user message, or "". */
function lastUserText(prompt: ModelPrompt): string {
  const { item } = lastUserMessage(prompt.input);
  return item ? userText(item).trim() : "";
}

function approxTokens(text: string): number {
  return Math.ceil(utf8ToBytes(text).length / 4);
}

/**
 * The embedded default model (design §9): offline and deterministic. It answers from the prompt it
 * received so tests can see what the model saw:
 * - normally: `Received N input items. Last user message: "…"`;
 * - last user text `/call NAME {json}` with NAME declared in tools: a `function_call` (call id
 *   derived from the prompt, so retries are stable); an undeclared tool gets an explanation;
 * - after tool outputs follow the last user message: a message quoting each output;
 * - last user text is the engine's summarization request (a compaction): a summary
 *   `Summary of N earlier items; last user request: "…"`, N counting the items before the request
 *   and the quote being the newest real user message before it (earlier summaries skipped).
 * - last user text `/slow MS …`: the usual answer, but each delta waits MS milliseconds first, so
 *   a turn stays running long enough to be steered, queued behind or interrupted.
 * A message answer longer than the model's output limit is cut to it. Usage is estimated from the
 * prompt with the context manager's estimator, counting what a model would be sent (no turn-id
 * bookkeeping).
 */
export class LocalModelClient implements ModelClient {
  readonly #sleep: Sleep;
  readonly #maxOutputTokens: number | undefined;

  /** `maxOutputTokens`: the catalog entry's limit on an answer (none: answers are not cut). */
  constructor(options: { sleep?: Sleep; maxOutputTokens?: number } = {}) {
    this.#sleep = options.sleep ?? timerSleep;
    this.#maxOutputTokens = options.maxOutputTokens;
  }

  async *stream(prompt: ModelPrompt, signal?: AbortSignal): AsyncIterable<ModelEvent> {
    signal?.throwIfAborted();
    const item = withinOutputLimit(this.respond(prompt), this.#maxOutputTokens);
    const delayMs = Number(SLOW_COMMAND.exec(lastUserText(prompt))?.[1] ?? 0);
    if (item.type === "message") {
      const text = item.content.map((p) => (p.type === "output_text" ? p.text : "")).join("");
      // An answer echoing a long input would otherwise be thousands of events.
      const size = Math.max(DELTA_CHARS, Math.ceil(text.length / MAX_DELTAS));
      for (let i = 0; i < text.length; i += size) {
        if (delayMs > 0) await this.#sleep(delayMs, signal);
        signal?.throwIfAborted();
        yield { type: "output_text_delta", delta: text.slice(i, i + size) };
      }
    }
    yield { type: "output_item_done", item };
    yield { type: "completed", usage: this.usage(prompt, item) };
  }

  respond(prompt: ModelPrompt): KnownResponseItem {
    const input = prompt.input;
    const { index: lastUser, item: last } = lastUserMessage(input);
    const text = last ? userText(last).trim() : "";
    const after = input.slice(lastUser + 1);
    const outputs = after.filter(
      (i) => i.type === "function_call_output" || i.type === "custom_tool_call_output",
    );
    if (outputs.length > 0) {
      const quoted = outputs
        .map((o) =>
          o.type === "function_call_output" || o.type === "custom_tool_call_output"
            ? `${o.call_id}: ${outputText(o.output)}`
            : "",
        )
        .join("\n");
      return assistant(`Tool output received.\n${quoted}`);
    }
    if (last !== undefined && text === SUMMARIZATION_REQUEST) {
      return assistant(summarize(input.slice(0, lastUser)));
    }
    const call = CALL_COMMAND.exec(text);
    if (call) {
      const name = call[1] ?? "";
      const args = (call[2] ?? "{}").trim() || "{}";
      if (!prompt.tools.some((t) => t.name === name)) {
        return assistant(`I cannot call "${name}": it is not a declared tool.`);
      }
      const digest = bytesToHex(sha1(utf8ToBytes(`${input.length}\n${text}`))).slice(0, 24);
      const fc: FunctionCallItem = {
        type: "function_call",
        name,
        arguments: args,
        call_id: `call_${digest}`,
      };
      return fc;
    }
    return assistant(
      `Received ${input.length} input items. Last user message: ${JSON.stringify(text)}`,
    );
  }

  usage(prompt: ModelPrompt, output: KnownResponseItem): TokenUsage {
    const input = approxTokens(prompt.instructions) + prompt.input.sentTokens();
    const out = estimateSentItemTokenCount(output);
    return {
      input_tokens: input,
      cached_input_tokens: 0,
      output_tokens: out,
      reasoning_output_tokens: 0,
      total_tokens: input + out,
    };
  }
}

/** The deterministic compaction summary of the items before the summarization request. */
function summarize(earlier: readonly KnownResponseItem[]): string {
  let request = "";
  for (let i = earlier.length - 1; i >= 0; i--) {
    const item = earlier[i];
    if (item?.type !== "message" || item.role !== "user" || !isUserTurnBoundary(item)) continue;
    const text = userText(item).trim();
    if (text.startsWith(SUMMARY_PREFIX)) continue;
    request = text;
    break;
  }
  return `Summary of ${earlier.length} earlier items; last user request: ${JSON.stringify(request)}`;
}

/**
 * The answer within `max` output tokens, as a model stops at `max_output_tokens`: a message's
 * text cut until it fits. A call is the one the user wrote in `/call`, as it is.
 */
function withinOutputLimit(item: KnownResponseItem, max: number | undefined): KnownResponseItem {
  if (item.type !== "message" || max === undefined) return item;
  if (estimateSentItemTokenCount(item) <= max) return item;
  let text = item.content.map((p) => (p.type === "output_text" ? p.text : "")).join("");
  for (;;) {
    const cut = assistant(text);
    const tokens = estimateSentItemTokenCount(cut);
    if (tokens <= max || text === "") return cut;
    text = text.slice(0, Math.max(0, Math.floor((text.length * max) / tokens) - 1));
  }
}

function assistant(text: string): MessageItem {
  return { type: "message", role: "assistant", content: [{ type: "output_text", text }] };
}
