import { type KnownResponseItem, modelVisibleItem } from "../../protocol/index.ts";

/**
 * Items serialized together: one `JSON.stringify` per chunk, not per item (10,000 separate calls
 * took two to three times as long as one call over them all), and a request re-serializes at
 * most one chunk plus what is new.
 */
export const INPUT_CHUNK_ITEMS = 256;

/** `items` mapped by `modelVisibleItem` as JSON, without the brackets (empty for none). */
function itemsText(items: readonly KnownResponseItem[]): string {
  return items.length === 0 ? "" : JSON.stringify(items.map(modelVisibleItem)).slice(1, -1);
}

const encoder = new TextEncoder();

/**
 * A request body around its `input` array, as UTF-8: the array written as
 * `JSON.stringify(items.map(modelVisibleItem))` to the byte, reusing the bytes of the previous
 * body's leading items.
 *
 * A thread's requests repeat its history: each one is the last plus a few items, so serializing
 * every item again made a turn's cost grow with the thread (about 5 ms of CPU at 5,000 turns).
 * The writer keeps the previous body, the items it held and where the bytes of each whole chunk
 * of them end (`INPUT_CHUNK_ITEMS`); the next body copies the bytes of the chunks whose items are
 * all the same objects, and serializes the rest. Only frozen items are reused, and a frozen item
 * is taken to be frozen all the way down, as `frozenCopy` takes it: history's items are, and so
 * are the outputs normalization adds, so they never change; an unfrozen one might have since.
 *
 * Bytes rather than a string: what grows with the thread is copied once per request (a string
 * body is flattened and then encoded by `fetch`), and the body kept between requests, the size
 * of the last one, lies outside the JavaScript heap. `fetch` copies a body it is given, so the
 * kept one stays as it was.
 *
 * One per thread (the provider's clients of a thread share it), so the body it keeps is the
 * thread's own: while the thread stays loaded it holds about its last request's size (history's
 * items, which it does not copy, take about twice that).
 */
export class InputSerializer {
  /** The items of the kept chunks, in order. */
  readonly #items: KnownResponseItem[] = [];
  /** `#ends[c]`: where chunk `c`'s bytes end, counted from the first item's. */
  readonly #ends: number[] = [];
  /** The previous body; its items' bytes start at `#start`. */
  #body = new Uint8Array(0);
  #start = 0;
  readonly #chunkItems: number;

  constructor(chunkItems = INPUT_CHUNK_ITEMS) {
    if (!Number.isInteger(chunkItems) || chunkItems < 1) {
      throw new RangeError(`chunkItems must be a positive integer, got ${chunkItems}`);
    }
    this.#chunkItems = chunkItems;
  }

  /** `head`, then `items` (in request order) as their JSON array, then `tail`, as UTF-8. */
  write(head: string, items: readonly KnownResponseItem[], tail: string): Uint8Array {
    const kept = this.#items;
    const limit = Math.min(kept.length, items.length);
    let same = 0;
    while (same < limit && kept[same] === items[same]) same++;
    const size = this.#chunkItems;
    const chunks = Math.floor(same / size);
    kept.length = chunks * size;
    this.#ends.length = chunks;
    const end = this.#ends[chunks - 1] ?? 0;
    const pieces = [
      encoder.encode(`${head}[`),
      this.#body.subarray(this.#start, this.#start + end),
    ];
    let length = end;
    for (let from = kept.length; from < items.length; from += size) {
      const chunk = items.slice(from, from + size);
      const bytes = encoder.encode(from === 0 ? itemsText(chunk) : `,${itemsText(chunk)}`);
      pieces.push(bytes);
      length += bytes.length;
      if (kept.length === from && chunk.length === size && chunk.every(Object.isFrozen)) {
        kept.push(...chunk);
        this.#ends.push(length);
      }
    }
    pieces.push(encoder.encode(`]${tail}`));
    const body = new Uint8Array(pieces.reduce((n, piece) => n + piece.length, 0));
    let offset = 0;
    for (const piece of pieces) {
      body.set(piece, offset);
      offset += piece.length;
    }
    this.#body = body;
    this.#start = (pieces[0] as Uint8Array).length;
    return body;
  }
}
