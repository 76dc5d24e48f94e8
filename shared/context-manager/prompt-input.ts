import type { KnownResponseItem } from "../protocol/index.ts";
import { estimateSentItemTokenCount } from "./estimate.ts";
import type { SealedItems } from "./sealed.ts";

/** A stretch of prompt input: a stored run passed through unread, or items. */
type Segment = SealedItems | readonly KnownResponseItem[];

function segmentLength(segment: Segment): number {
  return Array.isArray(segment) ? segment.length : (segment as SealedItems).count;
}

/** A run's items; a run is passed through only when it holds known items alone. */
function segmentItems(segment: Segment): readonly KnownResponseItem[] {
  return Array.isArray(segment)
    ? (segment as readonly KnownResponseItem[])
    : ((segment as SealedItems).items as readonly KnownResponseItem[]);
}

/**
 * The input of one model request: the history normalized for the prompt (`forPrompt`), kept as
 * segments. A stored run that normalization leaves as it is stays a run, unread; the rest are
 * items. The local model answers from the input's length, its last user message and its token
 * estimate, which read no run but the ones they must look into; an HTTP provider and
 * `GET …/prompt` take it whole (`toArray`).
 */
export class PromptInput {
  readonly #segments: readonly Segment[];
  readonly length: number;

  constructor(segments: readonly Segment[]) {
    this.#segments = segments.filter((segment) => segmentLength(segment) > 0);
    this.length = this.#segments.reduce((n, segment) => n + segmentLength(segment), 0);
  }

  static of(items: readonly KnownResponseItem[]): PromptInput {
    return new PromptInput([items]);
  }

  /** Every item in order, runs read. */
  toArray(): KnownResponseItem[] {
    const only = this.#segments[0];
    if (this.#segments.length === 1 && Array.isArray(only)) return only as KnownResponseItem[];
    const out = new Array<KnownResponseItem>(this.length);
    let n = 0;
    for (const segment of this.#segments) for (const item of segmentItems(segment)) out[n++] = item;
    return out;
  }

  /** This input followed by `items`. */
  concat(items: readonly KnownResponseItem[]): PromptInput {
    return new PromptInput([...this.#segments, items]);
  }

  /** Index of the last item `predicate` accepts, or -1; reads runs only as far back as it looks. */
  findLastIndex(predicate: (item: KnownResponseItem) => boolean): number {
    let end = this.length;
    for (let s = this.#segments.length - 1; s >= 0; s--) {
      const segment = this.#segments[s] as Segment;
      const start = end - segmentLength(segment);
      const index = segmentItems(segment).findLastIndex(predicate);
      if (index >= 0) return start + index;
      end = start;
    }
    return -1;
  }

  /** Items `[start, end)` (indexes ≥ 0), reading only the runs they fall in. */
  slice(start: number, end = this.length): KnownResponseItem[] {
    const out: KnownResponseItem[] = [];
    let first = 0;
    for (const segment of this.#segments) {
      const count = segmentLength(segment);
      const from = Math.max(start, first);
      const to = Math.min(end, first + count);
      if (from < to) {
        const items = segmentItems(segment);
        for (let i = from; i < to; i++) out.push(items[i - first] as KnownResponseItem);
      }
      first += count;
    }
    return out;
  }

  /** Σ `estimateSentItemTokenCount` over the input, from run summaries where they have it. */
  sentTokens(): number {
    let total = 0;
    for (const segment of this.#segments) {
      const summary = Array.isArray(segment) ? undefined : (segment as SealedItems).summary;
      if (summary !== undefined) {
        total += summary.sentTokens;
        continue;
      }
      for (const item of segmentItems(segment)) total += estimateSentItemTokenCount(item);
    }
    return total;
  }
}
