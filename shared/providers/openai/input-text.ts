import { type KnownResponseItem, modelVisibleItem } from "../../protocol/index.ts";

/**
 * Items serialized together: one `JSON.stringify` per chunk, not per item (10,000 separate calls
 * cost several times one call over them all), and a request re-serializes at most one chunk
 * plus what is new.
 */
export const INPUT_CHUNK_ITEMS = 256;

/** `items` mapped by `modelVisibleItem` as JSON, without the brackets (empty for none). */
function itemsText(items: readonly KnownResponseItem[]): string {
  return items.length === 0 ? "" : JSON.stringify(items.map(modelVisibleItem)).slice(1, -1);
}

/**
 * A request body around its `input` array, the array written as
 * `JSON.stringify(items.map(modelVisibleItem))` to the byte, reusing the text of the previous
 * body's leading items.
 *
 * A thread's requests repeat its history: each one is the last plus a few items, so serializing
 * every item again made a turn's cost grow with the thread (about 5 ms of CPU at 5,000 turns).
 * The writer keeps the previous body, the items it held and where the text of each whole chunk
 * of them ends (`INPUT_CHUNK_ITEMS`); the next body reuses the text of the chunks whose items
 * are all the same objects, and serializes the rest. Only frozen items are reused: a frozen item
 * never changes (history's items are deep frozen, and so are the outputs normalization adds), an
 * unfrozen one might have since.
 *
 * The reused text is a slice of the previous body, which sending it made one flat string, and
 * the new body is a concatenation: what grows with the thread is copied once, when the body is
 * encoded to be sent.
 *
 * One per thread (the provider's clients of a thread share it), so the body it keeps, the size of
 * the last request, is the thread's own.
 */
export class InputSerializer {
  /** The items of the kept chunks, in order. */
  readonly #items: KnownResponseItem[] = [];
  /** `#ends[c]`: where chunk `c`'s text ends, counted from the first item's. */
  readonly #ends: number[] = [];
  /** The previous body; its items' text starts at `#start`. */
  #body = "";
  #start = 0;
  readonly #chunkItems: number;

  constructor(chunkItems = INPUT_CHUNK_ITEMS) {
    if (!Number.isInteger(chunkItems) || chunkItems < 1) {
      throw new RangeError(`chunkItems must be a positive integer, got ${chunkItems}`);
    }
    this.#chunkItems = chunkItems;
  }

  /** `head`, then `items` (in request order) as their JSON array text, then `tail`. */
  write(head: string, items: readonly KnownResponseItem[], tail: string): string {
    const kept = this.#items;
    const limit = Math.min(kept.length, items.length);
    let same = 0;
    while (same < limit && kept[same] === items[same]) same++;
    const size = this.#chunkItems;
    const chunks = Math.floor(same / size);
    kept.length = chunks * size;
    this.#ends.length = chunks;
    const end = this.#ends[chunks - 1];
    let text = end === undefined ? "" : this.#body.slice(this.#start, this.#start + end);
    for (let from = kept.length; from < items.length; from += size) {
      const chunk = items.slice(from, from + size);
      text += from === 0 ? itemsText(chunk) : `,${itemsText(chunk)}`;
      if (kept.length === from && chunk.length === size && chunk.every(Object.isFrozen)) {
        kept.push(...chunk);
        this.#ends.push(text.length);
      }
    }
    this.#body = `${head}[${text}]${tail}`;
    this.#start = head.length + 1;
    return this.#body;
  }
}
