import type { CacheBreakReason, CacheReport } from "../api/index.ts";
import { utf8ByteLength } from "../context-manager/index.ts";

/**
 * A request as the cache report compares it: its instructions, then its tools, then each input
 * item, each serialized as JSON. Providers cache the longest prefix of what they were sent; this
 * order (the stable channels first) is the order their prompts put them in.
 */
export interface ComparedRequest {
  readonly model: string;
  readonly instructions: string;
  readonly tools: string;
  readonly items: readonly string[];
  /** Epoch milliseconds of its line. */
  readonly atMs: number;
}

/** What happened to history between two requests, as the rollout between them says. */
export interface Between {
  readonly compacted: boolean;
  readonly rolledBack: boolean;
  /** The previous request was a compaction's: its last item (the summary request) is never kept. */
  readonly afterCompactionRequest: boolean;
}

export function comparedRequest(
  model: string,
  instructions: string,
  tools: readonly unknown[],
  input: readonly unknown[],
  atMs: number,
): ComparedRequest {
  return {
    model,
    instructions: JSON.stringify(instructions),
    tools: JSON.stringify(tools),
    items: input.map((item) => JSON.stringify(item)),
    atMs,
  };
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

const sumBytes = (parts: readonly string[]) =>
  parts.reduce((sum, part) => sum + utf8ByteLength(part), 0);

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
  const parts = [current.instructions, current.tools, ...current.items];
  const total = sumBytes(parts);
  if (previous === undefined) {
    return report(0, 0, total, providerCachedTokens, "first_request");
  }
  const before = [previous.instructions, previous.tools, ...previous.items];
  let shared = 0;
  let reused = 0;
  while (shared < before.length && shared < parts.length && before[shared] === parts[shared]) {
    reused += utf8ByteLength(parts[shared] as string);
    shared++;
  }
  const whole = shared === before.length;
  if (!whole && shared < parts.length) {
    reused += commonPrefixBytes(before[shared] as string, parts[shared] as string);
  }
  const items = Math.max(0, shared - 2);
  const reason = whole
    ? ttlS !== null && current.atMs - previous.atMs > ttlS * 1000
      ? "expired"
      : null
    : breakReason(previous, current, between);
  return report(items, reused, total - reused, providerCachedTokens, reason);
}

function breakReason(
  previous: ComparedRequest,
  current: ComparedRequest,
  between: Between,
): CacheBreakReason {
  if (previous.model !== current.model) return "model_switch";
  if (between.compacted || between.afterCompactionRequest) return "compaction";
  if (between.rolledBack) return "rollback";
  if (previous.instructions !== current.instructions) return "instructions_changed";
  if (previous.tools !== current.tools) return "tools_changed";
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
