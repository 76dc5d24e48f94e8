import type {
  ContentItem,
  CustomToolCallOutputItem,
  FunctionCallOutputItem,
  KnownResponseItem,
  ResponseItem,
  ToolOutput,
} from "../protocol/index.ts";
import { uuidv5 } from "../uuid/index.ts";
import { frozenItem } from "./estimate.ts";
import { PromptInput } from "./prompt-input.ts";
import { type CallIdKind, callIdKind, type RunSummary, type SealedItems } from "./sealed.ts";
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

function hasImage(parts: readonly { type: string }[]): boolean {
  return parts.some((part) => part.type === "input_image");
}

function messageWithoutImages(content: readonly ContentItem[]): ContentItem[] {
  return content.map((part) =>
    part.type === "input_image" ? { type: "input_text", text: IMAGE_OMITTED_TEXT } : part,
  );
}

function outputWithoutImages(output: Exclude<ToolOutput, string>): ToolOutput {
  return output.map((part) =>
    part.type === "input_image" ? { type: "input_text", text: IMAGE_OMITTED_TEXT } : part,
  );
}

/** The item with its images replaced by the placeholder text; the item itself if it has none. */
function withoutImages(item: KnownResponseItem): KnownResponseItem {
  if (item.type === "message") {
    if (!hasImage(item.content)) return item;
    return derived(textOnlyCopies, item, () => ({
      ...item,
      content: messageWithoutImages(item.content),
    }));
  }
  if (item.type === "function_call_output" || item.type === "custom_tool_call_output") {
    const output = item.output;
    if (typeof output === "string" || !hasImage(output)) return item;
    return derived(textOnlyCopies, item, () => ({ ...item, output: outputWithoutImages(output) }));
  }
  return item;
}

/**
 * Items normalization makes from a history item (its text-only copy, the synthetic output of a
 * call), kept per item. A thread's prompts then hold the same objects at the same places, turn
 * after turn, as they do history's own: a provider can tell what it already serialized by
 * identity (`InputSerializer`). Weak: they go with their item.
 */
const textOnlyCopies = new WeakMap<ResponseItem, KnownResponseItem>();
const syntheticOutputs = new WeakMap<ResponseItem, KnownResponseItem>();

/**
 * `make()` for `item`, made once and frozen when `item` is frozen (so it cannot change and the
 * result is still its own); made anew otherwise.
 */
function derived<T extends KnownResponseItem>(
  cache: WeakMap<ResponseItem, KnownResponseItem>,
  item: ResponseItem,
  make: () => T,
): T {
  if (!Object.isFrozen(item)) return make();
  let made = cache.get(item) as T | undefined;
  if (made === undefined) {
    made = frozenItem(make());
    cache.set(item, made);
  }
  return made;
}

/** The call ids a history holds, by kind (`callIdKind`): what decides which pair up. */
type CallIds = Record<CallIdKind, Set<string>>;

function emptyCallIds(): CallIds {
  return { calls: new Set(), customCalls: new Set(), outputs: new Set(), customOutputs: new Set() };
}

const CALL_ID_KINDS: readonly CallIdKind[] = ["calls", "customCalls", "outputs", "customOutputs"];

function addCallIds(items: readonly ResponseItem[], ids: CallIds): void {
  // Indexed loops: this runs over the whole history every turn (see `someRetainedText`).
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as ResponseItem;
    const kind = callIdKind(item);
    if (kind !== undefined) ids[kind].add((item as { call_id: string }).call_id);
  }
}

function addSummaryIds(summary: RunSummary, ids: CallIds): void {
  for (const kind of CALL_ID_KINDS) for (const id of summary[kind]) ids[kind].add(id);
}

/** True when normalizing the run would change nothing: it can be sent as stored. */
function passesUnchanged(summary: RunSummary, ids: CallIds, stripImages: boolean): boolean {
  if (summary.other || (stripImages && summary.images)) return false;
  return (
    summary.calls.every((id) => ids.outputs.has(id)) &&
    summary.customCalls.every((id) => ids.customOutputs.has(id)) &&
    summary.outputs.every((id) => ids.calls.has(id)) &&
    summary.customOutputs.every((id) => ids.customCalls.has(id))
  );
}

/** `items` normalized against the call ids of the whole history (see `normalizeForPrompt`). */
function normalizeItems(
  items: readonly ResponseItem[],
  ids: CallIds,
  stripImages: boolean,
): KnownResponseItem[] {
  // Sized up front (every item, plus a synthetic output per call id of the history), then
  // trimmed: a long history's array grown by `push` was copied several times a turn.
  const out = new Array<KnownResponseItem>(items.length + ids.calls.size + ids.customCalls.size);
  let n = 0;
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as ResponseItem;
    switch (item.type) {
      case "other":
        continue;
      case "function_call_output":
        if (!ids.calls.has(item.call_id)) continue;
        break;
      case "custom_tool_call_output":
        if (!ids.customCalls.has(item.call_id)) continue;
        break;
    }
    out[n++] = stripImages ? withoutImages(item) : item;
    switch (item.type) {
      case "function_call":
      case "local_shell_call": {
        const callId = item.call_id;
        if (callId !== null && !ids.outputs.has(callId)) {
          out[n++] = derived(syntheticOutputs, item, () => abortedFunctionOutput(callId, item.id));
        }
        break;
      }
      case "custom_tool_call":
        if (!ids.customOutputs.has(item.call_id)) {
          out[n++] = derived(syntheticOutputs, item, () =>
            abortedCustomOutput(item.call_id, item.id),
          );
        }
        break;
    }
  }
  out.length = n;
  return out;
}

/**
 * The prompt view of history (reference §4.3):
 * 1. every call without an output gets a synthetic `aborted` output right after it
 *    (`function_call` and `local_shell_call` with a call id → `function_call_output`,
 *    `custom_tool_call` → `custom_tool_call_output` without a name);
 * 2. outputs whose call is not in history are dropped (a `function_call_output` may answer a
 *    `function_call` or a `local_shell_call`; a `custom_tool_call_output` only a `custom_tool_call`);
 * 3. without the image modality, images in messages and tool outputs become placeholder text.
 * `other` items are never sent and are skipped.
 *
 * History is `runs` (stored, possibly unread) followed by `items`. A run whose summary shows
 * that none of this would change it stays in the result unread; any other is read and
 * normalized like `items`.
 *
 * Never changes history or any item object (design §10 invariant 4). Unchanged items are shared
 * with history; a changed item and a synthetic output are made once per history item, frozen,
 * and shared by every prompt after (`derived`). The result depends only on the items and
 * `modalities`, not on how they are split into runs.
 */
export function normalizeForPrompt(
  runs: readonly SealedItems[],
  items: readonly ResponseItem[],
  modalities: readonly InputModality[],
): PromptInput {
  const ids = emptyCallIds();
  for (const run of runs) {
    if (run.summary === undefined) addCallIds(run.items, ids);
    else addSummaryIds(run.summary, ids);
  }
  addCallIds(items, ids);
  const stripImages = !modalities.includes("image");
  const segments = runs.map((run) =>
    run.summary !== undefined && passesUnchanged(run.summary, ids, stripImages)
      ? run
      : normalizeItems(run.items, ids, stripImages),
  );
  return new PromptInput([...segments, normalizeItems(items, ids, stripImages)]);
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
