/**
 * A bounded map of entries that expire: the isolate's memory of verified keys and of hooks. At
 * most `maxEntries`, the oldest going first; an entry past its time is gone when next read.
 */
export class TtlCache<V> {
  readonly #entries = new Map<string, { value: V; expiresAtMs: number }>();
  readonly #maxEntries: number;
  readonly #nowMs: () => number;

  constructor(maxEntries: number, nowMs: () => number) {
    this.#maxEntries = maxEntries;
    this.#nowMs = nowMs;
  }

  now(): number {
    return this.#nowMs();
  }

  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (this.#nowMs() >= entry.expiresAtMs) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V, expiresAtMs: number): void {
    this.#entries.delete(key);
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(key, { value, expiresAtMs });
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }

  /** Drops every entry whose value (or key) `matches`. */
  deleteWhere(matches: (value: V, key: string) => boolean): void {
    for (const [key, { value }] of this.#entries) {
      if (matches(value, key)) this.#entries.delete(key);
    }
  }
}
