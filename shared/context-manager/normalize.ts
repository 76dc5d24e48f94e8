import { v5 as uuidv5 } from "uuid";
import type {
  ContentItem,
  CustomToolCallOutputItem,
  FunctionCallOutputItem,
  KnownResponseItem,
  ResponseItem,
  ToolOutput,
} from "../protocol/index.ts";
import type { InputModality } from "./types.ts";

/**
 * Namespace of the synthetic output ids (reference §4.3). Persisted in prompts that providers
 * cache: changing it changes model-visible ids and invalidates prompt caches.
 */
export const SYNTHETIC_OUTPUT_NAMESPACE = "90d38d3e-6a5b-4d52-bfe2-2f1e634bfac4";

/** The output a call gets in the prompt when history has none for it. */
const ABORTED_OUTPUT = "aborted";

/** Model-visible stand-in for an image sent to a model without image input (a Codex format fact). */
const IMAGE_OMITTED_TEXT = "image content omitted because you do not support image input";

/**
 * `{prefix}_{uuidv5(namespace, "{prefix}:{callItemId}")}` when the call item has a non-empty id,
 * else no id. Stable across retries and resumes so the prompt prefix stays cacheable.
 */
function syntheticOutputId(prefix: "fco" | "ctco", callItemId: string | null | undefined) {
  if (callItemId === undefined || callItemId === null || callItemId === "") return undefined;
  return `${prefix}_${uuidv5(`${prefix}:${callItemId}`, SYNTHETIC_OUTPUT_NAMESPACE)}`;
}

function abortedFunctionOutput(
  callId: string,
  callItemId: string | null | undefined,
): FunctionCallOutputItem {
  const id = syntheticOutputId("fco", callItemId);
  return id === undefined
    ? { type: "function_call_output", call_id: callId, output: ABORTED_OUTPUT }
    : { type: "function_call_output", id, call_id: callId, output: ABORTED_OUTPUT };
}

function abortedCustomOutput(
  callId: string,
  callItemId: string | null | undefined,
): CustomToolCallOutputItem {
  const id = syntheticOutputId("ctco", callItemId);
  return id === undefined
    ? { type: "custom_tool_call_output", call_id: callId, output: ABORTED_OUTPUT }
    : { type: "custom_tool_call_output", id, call_id: callId, output: ABORTED_OUTPUT };
}

function stripMessageImages(content: readonly ContentItem[]): ContentItem[] | undefined {
  if (!content.some((part) => part.type === "input_image")) return undefined;
  return content.map((part) =>
    part.type === "input_image" ? { type: "input_text", text: IMAGE_OMITTED_TEXT } : part,
  );
}

function stripOutputImages(output: ToolOutput): ToolOutput | undefined {
  if (typeof output === "string" || !output.some((part) => part.type === "input_image")) {
    return undefined;
  }
  return output.map((part) =>
    part.type === "input_image" ? { type: "input_text", text: IMAGE_OMITTED_TEXT } : part,
  );
}

/** The item with its images replaced by the placeholder text; the item itself if it has none. */
function withoutImages(item: KnownResponseItem): KnownResponseItem {
  if (item.type === "message") {
    const content = stripMessageImages(item.content);
    return content === undefined ? item : { ...item, content };
  }
  if (item.type === "function_call_output" || item.type === "custom_tool_call_output") {
    const output = stripOutputImages(item.output);
    return output === undefined ? item : { ...item, output };
  }
  return item;
}

/**
 * The prompt view of history (reference §4.3), in one pass:
 * 1. every call without an output gets a synthetic `aborted` output right after it
 *    (`function_call` and `local_shell_call` with a call id → `function_call_output`,
 *    `custom_tool_call` → `custom_tool_call_output` without a name);
 * 2. outputs whose call is not in history are dropped (a `function_call_output` may answer a
 *    `function_call` or a `local_shell_call`; a `custom_tool_call_output` only a `custom_tool_call`);
 * 3. without the image modality, images in messages and tool outputs become placeholder text.
 * `other` items are never sent and are skipped.
 *
 * Returns a new array and never changes `items` or any item object (design §10 invariant 4).
 * Unchanged items are shared with the input; changed ones are new objects. The result depends
 * only on `items` and `modalities`.
 */
export function normalizeForPrompt(
  items: readonly ResponseItem[],
  modalities: readonly InputModality[],
): KnownResponseItem[] {
  const functionOutputIds = new Set<string>();
  const customOutputIds = new Set<string>();
  const functionCallIds = new Set<string>(); // function calls and local shell calls
  const customCallIds = new Set<string>();
  // Indexed loops: this runs over the whole history every turn (see `someRetainedText`).
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as ResponseItem;
    switch (item.type) {
      case "function_call_output":
        functionOutputIds.add(item.call_id);
        break;
      case "custom_tool_call_output":
        customOutputIds.add(item.call_id);
        break;
      case "function_call":
        functionCallIds.add(item.call_id);
        break;
      case "local_shell_call":
        if (item.call_id !== null) functionCallIds.add(item.call_id);
        break;
      case "custom_tool_call":
        customCallIds.add(item.call_id);
        break;
    }
  }

  const stripImages = !modalities.includes("image");
  // Sized up front (every item, plus a synthetic output per call id; a repeated call id just grows
  // it), then trimmed: a long history's array grown by `push` was copied several times a turn.
  const out = new Array<KnownResponseItem>(
    items.length + functionCallIds.size + customCallIds.size,
  );
  let n = 0;
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as ResponseItem;
    switch (item.type) {
      case "other":
        continue;
      case "function_call_output":
        if (!functionCallIds.has(item.call_id)) continue;
        break;
      case "custom_tool_call_output":
        if (!customCallIds.has(item.call_id)) continue;
        break;
    }
    out[n++] = stripImages ? withoutImages(item) : item;
    switch (item.type) {
      case "function_call":
        if (!functionOutputIds.has(item.call_id)) {
          out[n++] = abortedFunctionOutput(item.call_id, item.id);
        }
        break;
      case "local_shell_call":
        if (item.call_id !== null && !functionOutputIds.has(item.call_id)) {
          out[n++] = abortedFunctionOutput(item.call_id, item.id);
        }
        break;
      case "custom_tool_call":
        if (!customOutputIds.has(item.call_id)) {
          out[n++] = abortedCustomOutput(item.call_id, item.id);
        }
        break;
    }
  }
  out.length = n;
  return out;
}

/**
 * Where the counterpart of a removed item sits (reference §4.4): call → its first output,
 * output → its first call (a `function_call_output` falls back to a `local_shell_call`).
 * -1 when there is none.
 */
export function counterpartIndex(items: readonly ResponseItem[], removed: ResponseItem): number {
  switch (removed.type) {
    case "function_call":
      return items.findIndex(
        (i) => i.type === "function_call_output" && i.call_id === removed.call_id,
      );
    case "local_shell_call":
      if (removed.call_id === null) return -1;
      return items.findIndex(
        (i) => i.type === "function_call_output" && i.call_id === removed.call_id,
      );
    case "function_call_output": {
      const call = items.findIndex(
        (i) => i.type === "function_call" && i.call_id === removed.call_id,
      );
      if (call >= 0) return call;
      return items.findIndex((i) => i.type === "local_shell_call" && i.call_id === removed.call_id);
    }
    case "custom_tool_call":
      return items.findIndex(
        (i) => i.type === "custom_tool_call_output" && i.call_id === removed.call_id,
      );
    case "custom_tool_call_output":
      return items.findIndex((i) => i.type === "custom_tool_call" && i.call_id === removed.call_id);
    default:
      return -1;
  }
}
