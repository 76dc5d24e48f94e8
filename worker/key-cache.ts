import type { Principal } from "./app-env.ts";
import { TtlCache } from "./ttl-cache.ts";

/**
 * How long a tenant key, once its tenant's object has verified it, is taken on the isolate's word.
 * A revoked key (or one of a deleted tenant) therefore fails everywhere within this long: the
 * bound the README states.
 */
export const KEY_CACHE_TTL_MS = 30_000;
/** Entries per isolate; the oldest go first. */
export const KEY_CACHE_MAX_ENTRIES = 10_000;

type TenantPrincipal = Extract<Principal, { kind: "tenant" }>;

/**
 * Verified tenant keys of this isolate, by the SHA-256 of the key (never the key itself). An
 * entry expires `ttlMs` after its verification was *asked*, so no answer given before a
 * revocation outlives the revocation by more than the bound. Failures are not cached: a new key
 * works at once.
 */
export class KeyCache {
  readonly #entries: TtlCache<TenantPrincipal>;
  readonly #ttlMs: number;

  constructor(options: { ttlMs?: number; maxEntries?: number; nowMs?: () => number } = {}) {
    this.#ttlMs = options.ttlMs ?? KEY_CACHE_TTL_MS;
    this.#entries = new TtlCache(
      options.maxEntries ?? KEY_CACHE_MAX_ENTRIES,
      options.nowMs ?? Date.now,
    );
  }

  now(): number {
    return this.#entries.now();
  }

  get(digest: string): TenantPrincipal | undefined {
    return this.#entries.get(digest);
  }

  /** Keeps a key verified by a request sent at `askedAtMs`. */
  set(digest: string, principal: TenantPrincipal, askedAtMs: number): void {
    this.#entries.set(digest, principal, askedAtMs + this.#ttlMs);
  }

  /**
   * Drops the entries of a tenant (one key of it, with `keyId`): a revocation, a quota change or
   * a delete made through this isolate takes effect here at once.
   */
  forget(tenant: string, keyId?: string): void {
    this.#entries.deleteWhere(
      (principal) =>
        principal.tenant === tenant && (keyId === undefined || principal.keyId === keyId),
    );
  }
}
