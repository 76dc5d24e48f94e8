import { isUserTurnBoundary } from "../context/index.ts";
import type { ResponseItem, ToolOutput } from "../protocol/index.ts";
import { freezeInPlace, withFrozenMembers } from "./immutable.ts";
import { approxTokensFromByteCount, utf8ByteLength } from "./truncate.ts";

/**
 * What one inline image costs (reference §4.6): 7373 bytes, about 1844 tokens.
 *
 * Codex decodes `detail: "original"` images and counts 32×32 patches instead. The core does not
 * decode images, so original-detail images use this same figure (a deliberate deviation).
 */
const INLINE_IMAGE_ESTIMATE_BYTES = 7373;

/** Encrypted reasoning decodes to about 3/4 of its base64 length, minus fixed overhead. */
const ENCRYPTED_REASONING_OVERHEAD_BYTES = 650;

function encryptedReasoningBytes(encryptedLength: number): number {
  return Math.max(0, Math.floor((encryptedLength * 3) / 4) - ENCRYPTED_REASONING_OVERHEAD_BYTES);
}

/** Encrypted content parts in tool outputs count as 9/16 of their length, rounded up. */
function encryptedOutputPartBytes(encryptedLength: number): number {
  return Math.ceil((encryptedLength * 9) / 16);
}

/** Bytes a string value takes inside a JSON serialization, quotes excluded. */
function serializedStringBytes(s: string): number {
  return utf8ByteLength(JSON.stringify(s)) - 2;
}

/** The base64 payload of a `data:image/…;base64,` URL, or undefined for anything else. */
function base64ImagePayload(url: string): string | undefined {
  const comma = url.indexOf(",");
  if (comma < 0) return undefined;
  const header = url.slice(0, comma).toLowerCase();
  if (!header.startsWith("data:image/") || !header.endsWith(";base64")) return undefined;
  return url.slice(comma + 1);
}

/** Serialized bytes to take away and estimated bytes to add for one inline image. */
function imageAdjustment(url: string): number {
  const payload = base64ImagePayload(url);
  if (payload === undefined || payload === "") return 0;
  return INLINE_IMAGE_ESTIMATE_BYTES - serializedStringBytes(payload);
}

function toolOutputAdjustment(output: ToolOutput): number {
  if (typeof output === "string") return 0;
  let delta = 0;
  for (const part of output) {
    if (part.type === "input_image") delta += imageAdjustment(part.image_url);
    else if (part.type === "encrypted_content") {
      const content = part.encrypted_content;
      delta += encryptedOutputPartBytes(utf8ByteLength(content)) - serializedStringBytes(content);
    }
  }
  return delta;
}

/** Items counted by the size of their encrypted content rather than by their JSON. */
function countsEncryptedContent(item: ResponseItem): boolean {
  if (item.type === "compaction") return true;
  return item.type === "reasoning" && typeof item.encrypted_content === "string";
}

/**
 * Model-visible bytes of one item (reference §4.6): encrypted reasoning and compaction count by
 * their decoded size; anything else by its JSON serialization, with inline image payloads and
 * encrypted tool-output parts replaced by their estimates.
 */
function modelVisibleBytes(item: ResponseItem): number {
  if (item.type === "compaction") {
    return encryptedReasoningBytes(utf8ByteLength(item.encrypted_content));
  }
  if (item.type === "reasoning" && typeof item.encrypted_content === "string") {
    return encryptedReasoningBytes(utf8ByteLength(item.encrypted_content));
  }
  let bytes = utf8ByteLength(JSON.stringify(item));
  if (item.type === "message") {
    for (const part of item.content) {
      if (part.type === "input_image") bytes += imageAdjustment(part.image_url);
    }
  } else if (item.type === "function_call_output" || item.type === "custom_tool_call_output") {
    bytes += toolOutputAdjustment(item.output);
  }
  return Math.max(0, bytes);
}

/**
 * Byte counts of a history item, kept on the item itself under hidden keys (symbols, not
 * enumerable: JSON, spreads, `structuredClone` and deep equality never see them), set when the
 * item is frozen into history (`frozenItem`, `freezeItemsInPlace`). Every prompt spans the whole
 * history, so estimates must cost only new items. Properties rather than `WeakMap`s: restoring
 * 10,000 items filled a map in 10-14 ms (and its entries slowed every GC after), the properties
 * take about 1 ms with the freeze itself.
 */
const ITEM_BYTES = Symbol("spindle.itemBytes");
/** Bytes of the item as a provider sends it (see `estimateSentItemTokenCount`). */
const SENT_BYTES = Symbol("spindle.sentBytes");

type WithBytes = { [ITEM_BYTES]?: number; [SENT_BYTES]?: number };

/** `modelVisibleBytes`, read from the item when it was frozen into history. */
export function estimateItemBytes(item: ResponseItem): number {
  return (item as WithBytes)[ITEM_BYTES] ?? modelVisibleBytes(item);
}

/** Defines the hidden byte counts on an item about to be frozen. */
function attachByteCounts(item: ResponseItem, modelBytes: number): void {
  Object.defineProperty(item, ITEM_BYTES, { value: modelBytes });
  Object.defineProperty(item, SENT_BYTES, { value: sentBytes(item, modelBytes) });
}

/** An item `frozenItem` or `freezeItemsInPlace` made. */
function isFrozenItem(item: ResponseItem): boolean {
  return Object.isFrozen(item) && ITEM_BYTES in item;
}

/**
 * A deep-frozen copy of a history item carrying its byte counts. An item this function (or
 * `freezeItemsInPlace`) already made is returned as it is.
 */
export function frozenItem<T extends ResponseItem>(item: T): T {
  if (isFrozenItem(item)) return item;
  const copy = withFrozenMembers(item);
  attachByteCounts(copy as T, modelVisibleBytes(item));
  return Object.freeze(copy) as T;
}

/** Arrays `freezeItemsInPlace` made: frozen, and holding only items `frozenItem` would keep. */
const frozenHistories = new WeakSet<readonly ResponseItem[]>();

/**
 * True for an array `freezeItemsInPlace` made: a history can share it as it is (copying it on
 * its first write) instead of checking every item again.
 */
export function isFrozenHistory(items: readonly ResponseItem[]): boolean {
  return frozenHistories.has(items);
}

/**
 * A frozen copy of `items` that a history can share: only for arrays whose items all came from
 * `frozenItem` or `freezeItemsInPlace` (a history's own).
 */
export function frozenHistoryCopy(items: readonly ResponseItem[]): ResponseItem[] {
  const copy = Object.freeze(items.slice()) as ResponseItem[];
  frozenHistories.add(copy);
  return copy;
}

/**
 * Freezes items nobody else holds (just parsed) in place, with their byte counts: `bytes` when
 * it has one non-negative integer per item (saved with a checkpoint), else computed. Restoring a
 * long thread then allocates no second copy of its history and re-serializes none of it.
 */
export function freezeItemsInPlace(items: ResponseItem[], bytes?: readonly unknown[]): void {
  const known =
    bytes?.length === items.length &&
    bytes.every((b) => Number.isSafeInteger(b) && (b as number) >= 0);
  // An item frozen elsewhere is left as it is; `frozenItem` would copy it unless it made it.
  let allKept = true;
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as ResponseItem;
    if (Object.isFrozen(item)) {
      allKept &&= isFrozenItem(item);
      continue;
    }
    const record = item as Record<string, unknown>;
    for (const key in record) freezeInPlace(record[key]);
    attachByteCounts(item, known ? (bytes[i] as number) : modelVisibleBytes(item));
    Object.freeze(item);
  }
  Object.freeze(items);
  if (allKept) frozenHistories.add(items);
}

/** Estimated tokens of one item: `ceil(model-visible bytes / 4)` (reference §4.6). */
export function estimateItemTokenCount(item: ResponseItem): number {
  return approxTokensFromByteCount(estimateItemBytes(item));
}

const PASSTHROUGH_KEY = "internal_chat_message_metadata_passthrough";
/** `,"internal_chat_message_metadata_passthrough":` */
const PASSTHROUGH_MEMBER_BYTES = PASSTHROUGH_KEY.length + 4;

/**
 * Printable ASCII other than `"` and `\`: characters JSON writes as they are. A regular
 * expression rather than a loop: restoring a history tests every item's turn id, and a new
 * isolate runs a loop in its interpreter, a pattern natively.
 */
const PLAIN_ASCII = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** Serialized bytes of a passthrough value; the usual `{"turn_id":"…"}` without serializing. */
function passthroughValueBytes(value: unknown): number {
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    let keys = 0;
    for (const _ in value) keys += 1;
    const turnId = (value as { turn_id?: unknown }).turn_id;
    if (keys === 1 && typeof turnId === "string" && PLAIN_ASCII.test(turnId)) {
      return '{"turn_id":""}'.length + turnId.length;
    }
  }
  return utf8ByteLength(JSON.stringify(value));
}

/**
 * Bytes of an item as a provider sends it: its model-visible bytes without the turn-id
 * passthrough, which Codex's estimate counts (it serializes the whole item) but no model sees.
 * Exact: the field's bytes are taken away from the item's serialized bytes, one comma included.
 */
function sentBytes(item: ResponseItem, modelBytes: number): number {
  const value = (item as Record<string, unknown>)[PASSTHROUGH_KEY];
  if (value === undefined || countsEncryptedContent(item)) return modelBytes;
  return Math.max(0, modelBytes - PASSTHROUGH_MEMBER_BYTES - passthroughValueBytes(value));
}

/**
 * Estimated tokens of an item as a provider sends it (`sentBytes`), for providers that report
 * usage from an estimate (the local model). Read from the item when it was frozen into history.
 */
export function estimateSentItemTokenCount(item: ResponseItem): number {
  const bytes = (item as WithBytes)[SENT_BYTES] ?? sentBytes(item, estimateItemBytes(item));
  return approxTokensFromByteCount(bytes);
}

/** Items the model produced; usage reported by the provider already covers them. */
export function isModelGeneratedItem(item: ResponseItem): boolean {
  switch (item.type) {
    case "message":
      return item.role === "assistant";
    case "reasoning":
    case "function_call":
    case "web_search_call":
    case "custom_tool_call":
    case "local_shell_call":
    case "compaction":
      return true;
    default:
      return false;
  }
}

function sumTokens(items: readonly ResponseItem[], from: number, to: number): number {
  let total = 0;
  for (let i = from; i < to; i++) {
    const item = items[i];
    if (item !== undefined) total += estimateItemTokenCount(item);
  }
  return total;
}

/** Estimated tokens of the items after the last model-generated one (none if there is none). */
export function tokensAfterLastModelGeneratedItem(items: readonly ResponseItem[]): number {
  const last = items.findLastIndex(isModelGeneratedItem);
  if (last < 0) return 0;
  return sumTokens(items, last + 1, items.length);
}

/** Estimated tokens of encrypted reasoning items before the last user-turn boundary. */
export function tokensOfReasoningBeforeLastUserTurn(items: readonly ResponseItem[]): number {
  const boundary = items.findLastIndex(isUserTurnBoundary);
  let total = 0;
  for (let i = 0; i < boundary; i++) {
    const item = items[i];
    if (item?.type === "reasoning" && typeof item.encrypted_content === "string") {
      total += estimateItemTokenCount(item);
    }
  }
  return total;
}

export function estimateItemsTokenCount(items: readonly ResponseItem[]): number {
  return sumTokens(items, 0, items.length);
}

export function estimateTextTokenCount(text: string): number {
  return approxTokensFromByteCount(utf8ByteLength(text));
}
