import type { HookTarget, Jurisdiction } from "../shared/api/index.ts";
import { TtlCache } from "./ttl-cache.ts";

/**
 * How long a hook's configuration (its secrets, templates, the tenant's policy and endpoint
 * subscriptions), once read from the tenant's object, is used by the isolate. So a deleted hook
 * keeps verifying in another isolate for at most this long (in the isolate that deleted it, not
 * at all), and a new secret verifies there within `RECHECK_AFTER_MS` of a delivery signed with
 * it (a verification that fails reads the hook again).
 */
export const HOOK_CACHE_TTL_MS = 30_000;
/** A verification that fails against an entry at least this old reads the hook once more. */
export const RECHECK_AFTER_MS = 1_000;
/** Entries per isolate; the oldest go first. */
export const HOOK_CACHE_MAX_ENTRIES = 10_000;

export interface CachedHook {
  target: HookTarget;
  /** When the tenant's object was asked. */
  fetchedAt: number;
}

/**
 * The hooks of this isolate, by `{jurisdiction}:{tenant}:{hook}`. An entry expires
 * `HOOK_CACHE_TTL_MS` after it was asked for, or sooner when its previous secret stops verifying
 * before that. Unknown hooks are not cached: a new hook works at once.
 */
export class HookCache {
  readonly #entries: TtlCache<CachedHook>;

  constructor(options: { nowMs?: () => number } = {}) {
    this.#entries = new TtlCache(HOOK_CACHE_MAX_ENTRIES, options.nowMs ?? (() => Date.now()));
  }

  now(): number {
    return this.#entries.now();
  }

  get(key: string): CachedHook | undefined {
    return this.#entries.get(key);
  }

  set(key: string, target: HookTarget, fetchedAt: number): CachedHook {
    const expiresAt = Math.min(
      fetchedAt + HOOK_CACHE_TTL_MS,
      target.previousUntil ?? Number.POSITIVE_INFINITY,
    );
    const entry = { target, fetchedAt };
    this.#entries.set(key, entry, expiresAt);
    return entry;
  }

  /** A hook deleted or rotated through this isolate takes effect here at once. */
  forget(key: string): void {
    this.#entries.delete(key);
  }

  /** A tenant deleted through this isolate: none of its hooks verifies here any more. */
  forgetTenant(jurisdiction: Jurisdiction, tenant: string): void {
    const prefix = hookCacheKey(jurisdiction, tenant, "");
    this.#entries.deleteWhere((_, key) => key.startsWith(prefix));
  }
}

export const isolateHookCache = new HookCache();

export function hookCacheKey(jurisdiction: string | null, tenant: string, hookId: string): string {
  return `${jurisdiction ?? "g"}:${tenant}:${hookId}`;
}
