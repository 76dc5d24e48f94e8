import type { CacheBreakReason, CacheReport } from "../api/index.ts";
import { utf8ByteLength } from "../context-manager/index.ts";

/**
 * A request's parts as the cache report compares them: its instructions, then its tools, then
 * each input item, each serialized as JSON. Providers cache the longest prefix of what they were
 * sent; this order (the stable channels first) is the order their prompts put them in.
 */
export interface RequestParts {
  readonly count: number;
  /** The UTF-8 length of part `i`. */
  bytes(i: number): number;
  /** Part `i` as JSON. */
  text(i: number): string;
  /** Whether part `i` is byte for byte part `i` of `other` (which has one). */
  same(i: number, other: RequestParts): boolean;
  /**
   * Parts from `i` on known to be byte for byte `other`'s without reading them (a stored run of
   * history both hold), with their bytes; undefined: none known, compare part by part.
   */
  sameSpan?(i: number, other: RequestParts): PartSpan | undefined;
  /** The bytes of all parts (`other`: the previous request, whose spans it may share). */
  totalBytes?(other: RequestParts | undefined): number;
}

/** Consecutive parts two requests share, known without reading them. */
export interface PartSpan {
  readonly parts: number;
  readonly bytes: number;
}

/** A request as the cache report compares it. */
export interface ComparedRequest {
  readonly model: string;
  /** Epoch milliseconds of its line. */
  readonly atMs: number;
  readonly parts: RequestParts;
}

/** What happened to history between two requests, as the rollout between them says. */
export interface Between {
  readonly compacted: boolean;
  readonly rolledBack: boolean;
  /** The previous request was a compaction's: its last item (the summary request) is never kept. */
  readonly afterCompactionRequest: boolean;
}

/** Parts held as their JSON. */
export class JsonParts implements RequestParts {
  readonly #texts: readonly string[];
  readonly #bytes: number[] = [];

  constructor(texts: readonly string[]) {
    this.#texts = texts;
  }

  get count(): number {
    return this.#texts.length;
  }

  text(i: number): string {
    return this.#texts[i] as string;
  }

  bytes(i: number): number {
    this.#bytes[i] ??= utf8ByteLength(this.text(i));
    return this.#bytes[i];
  }

  same(i: number, other: RequestParts): boolean {
    return this.text(i) === other.text(i);
  }
}

/** The parts of a request with these channels, as JSON. */
export function requestTexts(
  instructions: string,
  tools: readonly unknown[],
  input: readonly unknown[],
): string[] {
  return [
    JSON.stringify(instructions),
    JSON.stringify(tools),
    ...input.map((item) => JSON.stringify(item)),
  ];
}

export function comparedRequest(
  model: string,
  instructions: string,
  tools: readonly unknown[],
  input: readonly unknown[],
  atMs: number,
): ComparedRequest {
  return { model, atMs, parts: new JsonParts(requestTexts(instructions, tools, input)) };
}

/** The UTF-8 length of the longest common prefix of two strings. */
function commonPrefixBytes(a: string, b: string): number {
  const end = Math.min(a.length, b.length);
  let i = 0;
  while (i < end && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  // A cut inside a surrogate pair shares no byte of that code point.
  const code = a.charCodeAt(i - 1);
  if (i > 0 && i < end && code >= 0xd800 && code <= 0xdbff) i--;
  return utf8ByteLength(a.slice(0, i));
}

/**
 * The cache report of `current` against the thread's previous request (design §14): the longest
 * byte-prefix both share, in whole input items and in bytes, and why it is not all of `previous`.
 * `ttlS` is the model's `prompt_cache_ttl_s` (null: unknown, never `expired`).
 */
export function cacheReport(
  previous: ComparedRequest | undefined,
  current: ComparedRequest,
  between: Between,
  providerCachedTokens: number | null,
  ttlS: number | null,
): CacheReport {
  const parts = current.parts;
  const total = totalBytes(parts, previous?.parts);
  if (previous === undefined) {
    return report(0, 0, total, providerCachedTokens, "first_request");
  }
  const before = previous.parts;
  let shared = 0;
  let reused = 0;
  while (shared < before.count && shared < parts.count) {
    const span = parts.sameSpan?.(shared, before);
    if (span !== undefined) {
      reused += span.bytes;
      shared += span.parts;
      continue;
    }
    if (!parts.same(shared, before)) break;
    reused += parts.bytes(shared);
    shared++;
  }
  const whole = shared === before.count;
  if (!whole && shared < parts.count) {
    reused += commonPrefixBytes(before.text(shared), parts.text(shared));
  }
  const items = Math.max(0, shared - 2);
  const reason = whole
    ? ttlS !== null && current.atMs - previous.atMs > ttlS * 1000
      ? "expired"
      : null
    : breakReason(previous, current, between);
  return report(items, reused, total - reused, providerCachedTokens, reason);
}

function totalBytes(parts: RequestParts, other: RequestParts | undefined): number {
  if (parts.totalBytes !== undefined) return parts.totalBytes(other);
  let total = 0;
  for (let i = 0; i < parts.count; i++) total += parts.bytes(i);
  return total;
}

function breakReason(
  previous: ComparedRequest,
  current: ComparedRequest,
  between: Between,
): CacheBreakReason {
  if (previous.model !== current.model) return "model_switch";
  if (between.compacted || between.afterCompactionRequest) return "compaction";
  if (between.rolledBack) return "rollback";
  if (!current.parts.same(0, previous.parts)) return "instructions_changed";
  if (!current.parts.same(1, previous.parts)) return "tools_changed";
  return "history_changed";
}

function report(
  items: number,
  reused: number,
  fresh: number,
  cached: number | null,
  reason: CacheBreakReason | null,
): CacheReport {
  return {
    reused_prefix_items: items,
    reused_prefix_bytes: reused,
    new_bytes: fresh,
    provider_cached_tokens: cached,
    break_reason: reason,
  };
}
