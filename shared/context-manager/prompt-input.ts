import type { KnownResponseItem } from "../protocol/index.ts";
import { estimateSentItemTokenCount } from "./estimate.ts";
import {
  type SealedItems,
  type Segments,
  segmentItems,
  segmentLength,
  segmentsLength,
  sliceSegments,
} from "./sealed.ts";

/**
 * The input of one model request: the history normalized for the prompt (`forPrompt`), kept as
 * segments. A stored run that normalization leaves as it is stays a run, unread; the rest are
 * items. The local model answers from the input's length, its last user message and its token
 * estimate, which read no run but the ones they must look into; an HTTP provider and
 * `GET …/prompt` take it whole (`toArray`).
 */
export class PromptInput {
  readonly #segments: Segments<KnownResponseItem>;
  readonly length: number;

  constructor(segments: Segments<KnownResponseItem>) {
    this.#segments = segments.filter((segment) => segmentLength(segment) > 0);
    this.length = segmentsLength(this.#segments);
  }

  static of(items: readonly KnownResponseItem[]): PromptInput {
    return new PromptInput([items]);
  }

  /** Its runs and items in order, runs unread. */
  get segments(): Segments<KnownResponseItem> {
    return this.#segments;
  }

  /** Every item in order, runs read. */
  toArray(): KnownResponseItem[] {
    const only = this.#segments[0];
    if (this.#segments.length === 1 && Array.isArray(only)) return only as KnownResponseItem[];
    const out = new Array<KnownResponseItem>(this.length);
    let n = 0;
    // Index loops: an iterator's result objects were half of what a warm HTTP-provider turn
    // allocated at 10,000 turns (a sampling heap profile, `PRODUCTION_PROFILE_OUT`).
    for (const segment of this.#segments) {
      const items = segmentItems<KnownResponseItem>(segment);
      for (let i = 0; i < items.length; i++) out[n++] = items[i] as KnownResponseItem;
    }
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
      const segment = this.#segments[s] as Segments<KnownResponseItem>[number];
      const start = end - segmentLength(segment);
      const index = segmentItems(segment).findLastIndex(predicate);
      if (index >= 0) return start + index;
      end = start;
    }
    return -1;
  }

  /** Items `[start, end)` (indexes ≥ 0), reading only the runs they fall in. */
  slice(start: number, end = this.length): KnownResponseItem[] {
    return sliceSegments(this.#segments, start, end);
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
