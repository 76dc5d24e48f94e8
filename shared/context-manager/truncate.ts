import type { FunctionCallOutputContentItem, ToolOutput } from "../protocol/index.ts";
import type { TruncationPolicy } from "./types.ts";

/** The byte-per-token heuristic used for every estimate and budget (reference §4.2). */
const APPROX_BYTES_PER_TOKEN = 4;

/**
 * Headroom for serialization and headers when tool outputs are stored (reference §4.1):
 * history keeps `policy × 1.2`, rounded up.
 */
const SERIALIZATION_ALLOWANCE = 1.2;

/** `ceil(bytes / 4)`; zero for non-positive counts. */
export function approxTokensFromByteCount(bytes: number): number {
  if (!(bytes > 0)) return 0;
  return Math.ceil(bytes / APPROX_BYTES_PER_TOKEN);
}

function approxBytesForTokens(tokens: number): number {
  return tokens * APPROX_BYTES_PER_TOKEN;
}

/** The UTF-8 length of one code point; a lone surrogate counts as U+FFFD (3 bytes), as TextEncoder writes it. */
function codePointByteLength(cp: number): number {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  return 4;
}

/** UTF-8 byte length of a string, without allocating the encoding. */
export function utf8ByteLength(s: string): number {
  let bytes = 0;
  for (let i = 0; i < s.length; i++) {
    const unit = s.charCodeAt(i);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit <= 0xdbff && isLowSurrogate(s.charCodeAt(i + 1))) {
      bytes += 4;
      i += 1;
    } else bytes += 3;
  }
  return bytes;
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

function codePointCount(s: string): number {
  let n = 0;
  for (const _ of s) n += 1;
  return n;
}

/** A non-negative integer budget; fractional limits round down. */
function budgetOf(policy: TruncationPolicy): number {
  return Math.max(0, Math.floor(policy.limit));
}

/** `policy × factor`, rounded up so the scaled budget never under-allots (reference §4.1). */
export function scalePolicy(policy: TruncationPolicy, factor: number): TruncationPolicy {
  return { mode: policy.mode, limit: Math.ceil(budgetOf(policy) * factor) };
}

/** The policy history applies to tool outputs: the caller's policy with the 20% allowance. */
export function historyOutputPolicy(policy: TruncationPolicy): TruncationPolicy {
  return scalePolicy(policy, SERIALIZATION_ALLOWANCE);
}

function truncationMarker(unit: "tokens" | "chars", removed: number): string {
  return `…${removed} ${unit} truncated…`;
}

/**
 * Keeps a head and a tail of `s` within `maxBytes` UTF-8 bytes (half each, the tail getting the
 * odd byte) and puts a marker in the middle. Cuts fall on code-point boundaries, so a surrogate
 * pair is never split. The tokens marker counts the bytes over budget / 4 (rounded up); the
 * chars marker counts the code points actually dropped.
 */
function truncateMiddle(s: string, maxBytes: number, unit: "tokens" | "chars"): string {
  if (s === "") return "";
  const totalBytes = utf8ByteLength(s);
  if (maxBytes === 0) {
    const removed = unit === "tokens" ? approxTokensFromByteCount(totalBytes) : codePointCount(s);
    return truncationMarker(unit, removed);
  }
  if (totalBytes <= maxBytes) return s;

  const headBudget = Math.floor(maxBytes / 2);
  const tailBudget = maxBytes - headBudget;
  const tailStartByte = totalBytes - tailBudget;

  let byte = 0;
  let headEnd = 0; // string index just past the head
  let tailStart = s.length; // string index where the tail begins
  let tailStarted = false;
  let removedChars = 0;
  for (let i = 0; i < s.length; ) {
    const cp = s.codePointAt(i) ?? 0;
    const units = cp > 0xffff ? 2 : 1;
    const end = byte + codePointByteLength(cp);
    if (end <= headBudget) {
      headEnd = i + units;
    } else if (byte >= tailStartByte) {
      if (!tailStarted) {
        tailStart = i;
        tailStarted = true;
      }
    } else {
      removedChars += 1;
    }
    byte = end;
    i += units;
  }
  if (tailStart < headEnd) tailStart = headEnd;

  const removed =
    unit === "tokens" ? approxTokensFromByteCount(totalBytes - maxBytes) : removedChars;
  return s.slice(0, headEnd) + truncationMarker(unit, removed) + s.slice(tailStart);
}

/**
 * Middle-truncates text to the policy's budget (reference §4.2). Text within budget comes back
 * unchanged; a zero budget leaves only the marker.
 */
export function truncateText(s: string, policy: TruncationPolicy): string {
  const limit = budgetOf(policy);
  if (policy.mode === "bytes") return truncateMiddle(s, limit, "chars");
  if (s === "") return "";
  const maxBytes = approxBytesForTokens(limit);
  if (limit > 0 && utf8ByteLength(s) <= maxBytes) return s;
  return truncateMiddle(s, maxBytes, "tokens");
}

/**
 * Walks content items with one budget (tokens for a tokens policy, bytes for a bytes policy):
 * text that fits is kept, the first text that overflows is middle-truncated to what is left,
 * later text is omitted and counted, and images and encrypted parts are always kept.
 */
function truncateContentItems(
  items: readonly FunctionCallOutputContentItem[],
  policy: TruncationPolicy,
): FunctionCallOutputContentItem[] {
  const out: FunctionCallOutputContentItem[] = [];
  let remaining = budgetOf(policy);
  let omittedTextItems = 0;
  for (const item of items) {
    if (item.type !== "input_text") {
      out.push(item);
      continue;
    }
    if (remaining === 0) {
      omittedTextItems += 1;
      continue;
    }
    const bytes = utf8ByteLength(item.text);
    const cost = policy.mode === "bytes" ? bytes : approxTokensFromByteCount(bytes);
    if (cost <= remaining) {
      out.push(item);
      remaining -= cost;
      continue;
    }
    const snippet = truncateText(item.text, { mode: policy.mode, limit: remaining });
    if (snippet === "") omittedTextItems += 1;
    else out.push({ ...item, text: snippet });
    remaining = 0;
  }
  if (omittedTextItems > 0) {
    out.push({ type: "input_text", text: `[omitted ${omittedTextItems} text items ...]` });
  }
  return out;
}

/**
 * Truncates a tool output to `policy` (reference §4.2): a string is middle-truncated, a list of
 * content items is walked with one budget. The input is never changed; a string within budget is
 * returned as is.
 */
export function truncateToolOutput(output: ToolOutput, policy: TruncationPolicy): ToolOutput {
  if (typeof output === "string") return truncateText(output, policy);
  return truncateContentItems(output, policy);
}
