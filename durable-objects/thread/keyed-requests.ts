import type { IdempotencyKey, RpcResult } from "../../shared/api/index.ts";
import { fail, ok } from "../common/results.ts";
import type { IdempotencyKeys, IdempotencyRecord } from "./storage/idempotency-keys.ts";

/**
 * Keyed requests (the IETF `Idempotency-Key` draft): finds the earlier request a retry repeats,
 * and carries out a new request under its key so that only a request that took effect is ever
 * replayed. The key is recorded in the synchronous step that carries the request out.
 */
export class KeyedRequests {
  readonly #keys: IdempotencyKeys;
  /** The newest event seq: a streamed retry replays from the one its first attempt saw. */
  readonly #lastEventSeq: () => number;
  /** Whether a turn exists (running, stored or queued): a key whose turn never began is void. */
  readonly #turnExists: (turnId: string) => boolean;
  /** Keys whose request is starting right now: a retry meanwhile is told to wait. */
  readonly #starting = new Set<string>();

  constructor(
    keys: IdempotencyKeys,
    lastEventSeq: () => number,
    turnExists: (turnId: string) => boolean,
  ) {
    this.#keys = keys;
    this.#lastEventSeq = lastEventSeq;
    this.#turnExists = turnExists;
  }

  /** Whether a record exists for `key`, matching or not (an import compares it only later). */
  has(key: string): boolean {
    return this.#keys.find(key) !== undefined;
  }

  /**
   * The earlier request with this key, when it was this same request and what it did is there to
   * answer with; undefined when this request is to be carried out. The same key with another
   * request is `idempotency_key_reused`; with one still starting, `idempotency_key_in_use`.
   */
  earlier(key: IdempotencyKey | undefined): RpcResult<IdempotencyRecord | undefined> {
    if (key === undefined) return ok(undefined);
    if (this.#starting.has(key.key)) {
      return fail("idempotency_key_in_use", "The first request with this key is still starting.");
    }
    const record = this.#keys.find(key.key);
    if (record === undefined) return ok(undefined);
    if (record.fingerprint !== key.fingerprint) {
      return fail("idempotency_key_reused", "This key was used with a different request.");
    }
    if (record.turnId !== null && !this.#turnExists(record.turnId)) {
      // The instance went away before the turn's first line: it never happened.
      this.#keys.forget(key.key);
      return ok(undefined);
    }
    return ok(record);
  }

  /**
   * The opening of every keyed request: the key's refusal when it cannot be used now; `retry`'s
   * answer to a retry of an earlier request (undefined: carry it out after all); else `first`.
   */
  answer<T>(
    key: IdempotencyKey | undefined,
    handlers: {
      retry: (earlier: IdempotencyRecord) => Promise<RpcResult<T>> | RpcResult<T> | undefined;
      first: () => Promise<RpcResult<T>> | RpcResult<T>;
    },
  ): Promise<RpcResult<T>> | RpcResult<T> {
    const earlier = this.earlier(key);
    if (!earlier.ok) return earlier;
    return (earlier.value && handlers.retry(earlier.value)) ?? handlers.first();
  }

  /** Records a request's key, in the synchronous step that carries it out (it cannot fail then). */
  record(key: IdempotencyKey | undefined, turnId: string | null): void {
    if (key !== undefined)
      this.#keys.record(key.key, key.fingerprint, turnId, this.#lastEventSeq());
  }

  /** Forgets a key whose request did not take effect after all. */
  forget(key: IdempotencyKey | undefined): void {
    if (key !== undefined) this.#keys.forget(key.key);
  }

  /**
   * Runs `work` (synchronous) with the key recorded first, in the same step, so both or neither
   * take effect; the key is forgotten if `work` throws.
   */
  recorded<T>(key: IdempotencyKey | undefined, turnId: string | null, work: () => T): T {
    this.record(key, turnId);
    try {
      return work();
    } catch (err) {
      this.forget(key);
      throw err;
    }
  }

  /**
   * Carries out a request under its key: recorded first (with the turn it is about to start, join
   * or queue), forgotten if the request fails or throws, so only a request that took effect is ever
   * replayed.
   */
  async keyed<T>(
    key: IdempotencyKey | undefined,
    turnId: string | null,
    start: () => Promise<RpcResult<T>>,
  ): Promise<RpcResult<T>> {
    if (key === undefined) return start();
    this.record(key, turnId);
    this.#starting.add(key.key);
    try {
      const result = await start();
      if (!result.ok) this.forget(key);
      return result;
    } catch (err) {
      this.forget(key);
      throw err;
    } finally {
      this.#starting.delete(key.key);
    }
  }
}
