import type { Principal } from "./app-env.ts";

/**
 * How long a tenant key, once its tenant's object has verified it, is taken on the isolate's word.
 * A revoked key (or one of a deleted tenant) therefore fails everywhere within this long: the
 * bound the README states.
 */
export const KEY_CACHE_TTL_MS = 30_000;
/** Entries per isolate; the oldest go first. */
export const KEY_CACHE_MAX_ENTRIES = 10_000;

interface Entry {
  principal: Extract<Principal, { kind: "tenant" }>;
  expiresAtMs: number;
}

/**
 * Verified tenant keys of this isolate, by the SHA-256 of the key (never the key itself). An
 * entry expires `ttlMs` after its verification was *asked*, so no answer given before a
 * revocation outlives the revocation by more than the bound. Failures are not cached: a new key
 * works at once.
 */
export class KeyCache {
  readonly #entries = new Map<string, Entry>();
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #nowMs: () => number;

  constructor(options: { ttlMs?: number; maxEntries?: number; nowMs?: () => number } = {}) {
    this.#ttlMs = options.ttlMs ?? KEY_CACHE_TTL_MS;
    this.#maxEntries = options.maxEntries ?? KEY_CACHE_MAX_ENTRIES;
    this.#nowMs = options.nowMs ?? Date.now;
  }

  now(): number {
    return this.#nowMs();
  }

  get(digest: string): Entry["principal"] | undefined {
    const entry = this.#entries.get(digest);
    if (entry === undefined) return undefined;
    if (this.#nowMs() >= entry.expiresAtMs) {
      this.#entries.delete(digest);
      return undefined;
    }
    return entry.principal;
  }

  /** Keeps a key verified by a request sent at `askedAtMs`. */
  set(digest: string, principal: Entry["principal"], askedAtMs: number): void {
    this.#entries.delete(digest);
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(digest, { principal, expiresAtMs: askedAtMs + this.#ttlMs });
  }

  /**
   * Drops the entries of a tenant (one key of it, with `keyId`): a revocation, a quota change or
   * a delete made through this isolate takes effect here at once.
   */
  forget(tenant: string, keyId?: string): void {
    for (const [digest, { principal }] of this.#entries) {
      if (principal.tenant === tenant && (keyId === undefined || principal.keyId === keyId)) {
        this.#entries.delete(digest);
      }
    }
  }
}
