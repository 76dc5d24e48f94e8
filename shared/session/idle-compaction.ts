/**
 * Idle compaction (design §14): a large thread left idle is compacted shortly before the
 * provider's prompt cache of its last request expires, so the summary request reuses the cached
 * prefix instead of paying for the whole context again at the next turn.
 */

import type { IdleCompactionConfig, SessionConfiguration } from "../protocol/index.ts";

/**
 * The idle compaction a thread runs under: its own setting, null when it turned it off, else its
 * tenant's default (`thread_defaults.idle_compaction`).
 */
export function idleCompactionOf(
  config: Pick<SessionConfiguration, "idle_compaction">,
  tenantDefault: IdleCompactionConfig | null,
): IdleCompactionConfig | null {
  return config.idle_compaction === undefined ? tenantDefault : config.idle_compaction;
}

/** The most that idle compaction fires ahead of the cache's expiry (a tenth of a shorter one). */
export const IDLE_COMPACTION_MARGIN_MAX_MS = 30_000;

/** How far ahead of a `ttlMs` cache's expiry idle compaction fires: min(30 s, ttl / 10). */
export function idleCompactionMarginMs(ttlMs: number): number {
  return Math.min(IDLE_COMPACTION_MARGIN_MAX_MS, Math.floor(ttlMs / 10));
}

export interface IdleCompactionTiming {
  /** When the thread's last provider request started: the cache's lifetime counts from it. */
  lastRequestStartMs: number;
  /** When the thread went idle (its last task ended). */
  idleSinceMs: number;
  /** The model's `prompt_cache_ttl_s`; null: the cache has no known lifetime. */
  promptCacheTtlS: number | null;
  /** The thread's `idle_compaction.after_idle_s`. */
  afterIdleS: number;
}

/**
 * When an idle thread is compacted (epoch ms): at the last request's start + ttl − margin, but
 * never before it has been idle `after_idle_s`; when that comes after the expiry, then (the cache
 * is cold by then, and the compaction still shortens the next turn's prompt). Undefined: the
 * model's cache has no known lifetime, and idle compaction never fires.
 */
export function idleCompactionDueMs(timing: IdleCompactionTiming): number | undefined {
  const { promptCacheTtlS, lastRequestStartMs, idleSinceMs, afterIdleS } = timing;
  if (promptCacheTtlS === null) return undefined;
  const ttlMs = promptCacheTtlS * 1000;
  const beforeExpiry = lastRequestStartMs + ttlMs - idleCompactionMarginMs(ttlMs);
  return Math.max(beforeExpiry, idleSinceMs + afterIdleS * 1000);
}
