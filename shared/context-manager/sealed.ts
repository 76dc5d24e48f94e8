import type { ResponseItem } from "../protocol/index.ts";
import { freezeItemsInPlace } from "./estimate.ts";

/** What a stored run of items reads back as: the items, and their byte counts if saved. */
export interface StoredItems {
  items: ResponseItem[];
  /** Model-visible bytes per item (see `freezeItemsInPlace`); recomputed when they do not fit. */
  bytes?: readonly unknown[];
}

/** How many items `runs` hold together. */
export function sealedItemCount(runs: readonly SealedItems[]): number {
  let n = 0;
  for (const run of runs) n += run.count;
  return n;
}

/**
 * A run of consecutive history items still in the form they were stored in (a checkpoint's item
 * group), read and frozen the first time something needs them.
 *
 * Parsing and freezing a long history was most of a cold start (10,000 items: about 15 ms of CPU
 * and 10 MiB of objects, README Performance), yet a thread woken to answer a read (its info, a
 * turn, its events, a page of history) or to run its flush alarm needs none of it. History keeps
 * such runs ahead of its own items and reads them only when asked for items (`ContextManager`).
 */
export class SealedItems {
  /** How many items the run holds; `items` throws when the stored run holds another number. */
  readonly count: number;
  #read: (() => StoredItems) | undefined;
  #items: readonly ResponseItem[] | undefined;

  constructor(count: number, read: () => StoredItems) {
    this.count = count;
    this.#read = read;
  }

  /** True once the items were read. */
  get parsed(): boolean {
    return this.#items !== undefined;
  }

  /** The items, frozen with their byte counts; read on the first call, then kept. */
  get items(): readonly ResponseItem[] {
    if (this.#items === undefined) {
      const stored = (this.#read as () => StoredItems)();
      if (!Array.isArray(stored.items) || stored.items.length !== this.count) {
        throw new Error(`a stored run of ${this.count} history items does not hold them`);
      }
      freezeItemsInPlace(stored.items, stored.bytes);
      this.#items = stored.items;
      // The source (megabytes of text) is not needed any more.
      this.#read = undefined;
    }
    return this.#items;
  }
}
