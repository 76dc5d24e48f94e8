import {
  isContextualDevMessageContent,
  isContextualUserMessageContent,
  MARKERS,
} from "../context/index.ts";
import type { ResponseItem } from "../protocol/index.ts";

/**
 * Whether an item is one a client sent or received, as opposed to Spindle's own context (world
 * state, diffs, reminders, `<turn_aborted>`), which the OpenAI surface never lists. Context
 * messages are recognised as the engine writes them: marked fragments, and developer messages
 * recorded without an id (the world-state bundle). A client's developer or system message is
 * recorded with an id, so it is listed.
 */
export function isClientVisible(item: ResponseItem): boolean {
  switch (item.type) {
    case "message":
      if (item.role === "assistant") return true;
      if (item.role === "user") return !isContextualUserMessageContent(item.content);
      return (
        item.id !== undefined &&
        !isContextualDevMessageContent(item.content) &&
        !item.content.some(
          (part) => part.type === "input_text" && part.text.startsWith(MARKERS.currentTime.start),
        )
      );
    case "compaction":
    case "other":
      return false;
    default:
      return true;
  }
}

/** `mcp__{label}__{tool}`: a server-side tool as the model names it (design §16). */
export function serverToolOf(name: string): { server_label: string; name: string } | undefined {
  if (!name.startsWith("mcp__")) return undefined;
  const rest = name.slice("mcp__".length);
  const cut = rest.indexOf("__");
  if (cut <= 0) return undefined;
  return { server_label: rest.slice(0, cut), name: rest.slice(cut + 2) };
}

/**
 * The part of a turn's items one response covers: from `start`, up to the outputs a later
 * resume recorded (the answers to this stretch's client calls), split into the client's input
 * (its first `inputs` visible items) and the output after it. Context items are in neither.
 * `resumed`: a later response took the turn on from here.
 */
export function responseStretch(
  items: readonly ResponseItem[],
  start: number,
  inputs: number,
): { input: ResponseItem[]; output: ResponseItem[]; resumed: boolean } {
  const input: ResponseItem[] = [];
  const output: ResponseItem[] = [];
  const clientCalls = new Set<string>();
  for (const item of items.slice(start)) {
    if (!isClientVisible(item)) continue;
    if (input.length < inputs) {
      input.push(item);
      continue;
    }
    if (item.type === "function_call_output" && clientCalls.has(item.call_id)) {
      return { input, output, resumed: true };
    }
    if (item.type === "function_call" && serverToolOf(item.name) === undefined) {
      clientCalls.add(item.call_id);
    }
    output.push(item);
  }
  return { input, output, resumed: false };
}
