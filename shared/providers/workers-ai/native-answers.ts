/**
 * Workers AI's native answer shape, that of its older text-generation models
 * (`@cf/meta/llama-3.1-8b-instruct` and the like, reference providers.md §3.2–3.3), read as the
 * Chat Completions chunks the `openai-chat` parser takes: `{response}` is a text delta, top-level
 * `tool_calls` (without ids, arguments as objects or strings) are call deltas, a top-level
 * `finish_reason` is the choice's. A chunk in the Chat shape (`choices`) or an `error` passes
 * unchanged, so one stream reader serves both families.
 */
import { isPlainObject } from "../../protocol/index.ts";
import { SseParser } from "../http/sse.ts";

type Json = Record<string, unknown>;

/** Whether `value` is in the native shape rather than the Chat one. */
export function isNativeAnswer(value: unknown): value is Json {
  return (
    isPlainObject(value) &&
    !("choices" in value) &&
    !("error" in value) &&
    ("response" in value || "tool_calls" in value || "finish_reason" in value)
  );
}

/** The native stream closes each call with a fragment of nulls only: nothing to assemble. */
function isClosingFragment(call: Json): boolean {
  const fn = isPlainObject(call.function) ? call.function : {};
  const name = fn.name ?? call.name;
  const args = fn.arguments ?? call.arguments;
  return !call.id && !name && (args === undefined || args === null || args === "");
}

/**
 * A call of an answer (`{name, arguments}` natively, `{function: {name, arguments}}` in the Chat
 * shape) as a Chat call delta, at `position` when it has no index.
 */
export function chatCallOf(call: Json, position: number): Json {
  const fn = isPlainObject(call.function) ? call.function : {};
  const name = fn.name ?? call.name;
  const args = fn.arguments ?? call.arguments;
  const argsText =
    typeof args === "string" ? args : args == null ? undefined : JSON.stringify(args);
  return {
    index: typeof call.index === "number" ? call.index : position,
    ...(typeof call.id === "string" && call.id !== "" ? { id: call.id } : {}),
    type: "function",
    function: {
      ...(typeof name === "string" && name !== "" ? { name } : {}),
      ...(argsText === undefined ? {} : { arguments: argsText }),
    },
  };
}

/** A Chat chunk of one choice, as the native shape becomes. */
export interface ChatChunk {
  choices: [
    { index: 0; delta: { content?: string; tool_calls?: Json[] }; finish_reason: string | null },
  ];
  usage?: unknown;
}

/** One native answer or chunk as a Chat chunk. */
export function chatChunkOf(native: Json): ChatChunk {
  const calls = (Array.isArray(native.tool_calls) ? native.tool_calls : [])
    .filter(isPlainObject)
    .filter((call) => !isClosingFragment(call))
    .map(chatCallOf);
  const text = typeof native.response === "string" ? native.response : "";
  return {
    choices: [
      {
        index: 0,
        delta: {
          ...(text !== "" ? { content: text } : {}),
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
        },
        finish_reason: typeof native.finish_reason === "string" ? native.finish_reason : null,
      },
    ],
    ...(native.usage === undefined ? {} : { usage: native.usage }),
  };
}

/** One event again: a data of several lines (which SSE joined with `\n`) keeps its lines. */
const frame = (data: string) =>
  new TextEncoder().encode(`${data.replaceAll("\n", "\ndata: ").replace(/^/, "data: ")}\n\n`);

/**
 * A streamed answer with its native chunks rewritten as Chat chunks. A native stream may end
 * with `[DONE]` and no `finish_reason` at all: `[DONE]` then finishes it (`tool_calls` when it
 * made calls, else `stop`), since the Chat parser takes a stream without one as cut short. A
 * stream that ends without `[DONE]` is left so.
 */
export function asChatStream(stream: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const parser = new SseParser();
  // A stream is of one family: once a chunk is Chat-shaped, the rest is not parsed here again.
  let chat = false;
  let native = false;
  let finished = false;
  let called = false;
  return stream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(bytes, controller) {
        for (const event of parser.push(bytes)) {
          if (event.data === "[DONE]") {
            if (native && !finished) {
              const reason = called ? "tool_calls" : "stop";
              controller.enqueue(frame(JSON.stringify(chatChunkOf({ finish_reason: reason }))));
            }
            controller.enqueue(frame(event.data));
            continue;
          }
          if (chat) {
            controller.enqueue(frame(event.data));
            continue;
          }
          let value: unknown;
          try {
            value = JSON.parse(event.data);
          } catch {
            controller.enqueue(frame(event.data));
            continue;
          }
          if (!isNativeAnswer(value)) {
            chat = isPlainObject(value) && "choices" in value;
            controller.enqueue(frame(event.data));
            continue;
          }
          native = true;
          const chunk = chatChunkOf(value);
          const [choice] = chunk.choices;
          if (choice.finish_reason !== null) finished = true;
          if (choice.delta.tool_calls) called = true;
          controller.enqueue(frame(JSON.stringify(chunk)));
        }
      },
    }),
  );
}
