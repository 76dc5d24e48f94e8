import {
  type FragmentRole,
  isContextualDevFragment,
  isContextualUserFragment,
} from "../context/index.ts";
import type { ResponseItem } from "../protocol/index.ts";
import {
  estimateItemTokenCount,
  estimateSentItemTokenCount,
  freezeItemsInPlace,
} from "./estimate.ts";

/** What a stored run of items reads back as: the items, and their byte counts if saved. */
export interface StoredItems {
  items: ResponseItem[];
  /** Model-visible bytes per item (see `freezeItemsInPlace`); recomputed when they do not fit. */
  bytes?: readonly unknown[];
}

/**
 * What a turn needs to know about a run of history items without reading them: enough to
 * normalize the prompt around it, estimate its tokens and search it for world-state fragments.
 * Saved with the run (`summarizeRun`, when its items are at hand) and read back beside it.
 */
export interface RunSummary {
  /** Call ids of its function and local shell calls (answered by `function_call_output`). */
  calls: string[];
  /** Call ids of its custom tool calls. */
  customCalls: string[];
  /** Call ids of its `function_call_output` items. */
  outputs: string[];
  /** Call ids of its `custom_tool_call_output` items. */
  customOutputs: string[];
  /** Some message or tool output holds an image (a text-only prompt replaces it). */
  images: boolean;
  /** It holds an item of a type this build does not know (never sent to a model). */
  other: boolean;
  /** Σ `estimateItemTokenCount`. */
  tokens: number;
  /** Σ `estimateSentItemTokenCount` (what the local model reports as input). */
  sentTokens: number;
  /** Σ `estimateItemTokenCount` of its reasoning items with encrypted content. */
  reasoningTokens: number;
  /**
   * Its user and developer `input_text` parts that are contextual fragments, in order: every
   * text a world-state section looks for in retained history is one (their markers make it so).
   */
  fragments: { role: FragmentRole; text: string }[];
}

/** The `RunSummary` list (and `normalizeForPrompt` set) an item's call id goes in. */
export type CallIdKind = "calls" | "customCalls" | "outputs" | "customOutputs";

/**
 * Where `item`'s `call_id` belongs, or undefined for an item without one (a local shell call
 * without a call id included). A function output answers a function or local shell call; a
 * custom tool output only a custom tool call.
 */
export function callIdKind(item: ResponseItem): CallIdKind | undefined {
  switch (item.type) {
    case "function_call":
      return "calls";
    case "local_shell_call":
      return item.call_id === null ? undefined : "calls";
    case "custom_tool_call":
      return "customCalls";
    case "function_call_output":
      return "outputs";
    case "custom_tool_call_output":
      return "customOutputs";
    default:
      return undefined;
  }
}

function hasImage(parts: readonly { type: string }[]): boolean {
  return parts.some((part) => part.type === "input_image");
}

/** The summary of `items` (frozen history items, whose token estimates are cached). */
export function summarizeRun(items: readonly ResponseItem[]): RunSummary {
  const summary: RunSummary = {
    calls: [],
    customCalls: [],
    outputs: [],
    customOutputs: [],
    images: false,
    other: false,
    tokens: 0,
    sentTokens: 0,
    reasoningTokens: 0,
    fragments: [],
  };
  for (const item of items) {
    const tokens = estimateItemTokenCount(item);
    summary.tokens += tokens;
    summary.sentTokens += estimateSentItemTokenCount(item);
    const kind = callIdKind(item);
    if (kind !== undefined) summary[kind].push((item as { call_id: string }).call_id);
    switch (item.type) {
      case "function_call_output":
      case "custom_tool_call_output":
        if (typeof item.output !== "string" && hasImage(item.output)) summary.images = true;
        break;
      case "reasoning":
        if (typeof item.encrypted_content === "string") summary.reasoningTokens += tokens;
        break;
      case "other":
        summary.other = true;
        break;
      case "message": {
        if (hasImage(item.content)) summary.images = true;
        const role = item.role;
        if (role !== "user" && role !== "developer") break;
        const contextual = role === "user" ? isContextualUserFragment : isContextualDevFragment;
        for (const part of item.content) {
          if (part.type === "input_text" && contextual(part)) {
            summary.fragments.push({ role, text: part.text });
          }
        }
        break;
      }
    }
  }
  return summary;
}

/** Stored runs and arrays of items, one after the other (a history, a prompt's input). */
export type Segments<T> = readonly (SealedItems | readonly T[])[];

/** How many items a segment holds, a run unread. */
export function segmentLength<T>(segment: SealedItems | readonly T[]): number {
  return Array.isArray(segment) ? segment.length : (segment as SealedItems).count;
}

/** A segment's items (a run's read if it was not yet). */
export function segmentItems<T>(segment: SealedItems | readonly T[]): readonly T[] {
  return Array.isArray(segment)
    ? (segment as readonly T[])
    : ((segment as SealedItems).items as readonly T[]);
}

/** How many items `segments` hold together, runs unread. */
export function segmentsLength<T>(segments: Segments<T>): number {
  let n = 0;
  for (const segment of segments) n += segmentLength(segment);
  return n;
}

/** Items `[start, end)` (indexes ≥ 0) of `segments`, reading only the runs they fall in. */
export function sliceSegments<T>(segments: Segments<T>, start: number, end: number): T[] {
  const out: T[] = [];
  let first = 0;
  for (const segment of segments) {
    const count = segmentLength(segment);
    const from = Math.max(start, first);
    const to = Math.min(end, first + count);
    if (from < to) {
      const items = segmentItems(segment);
      for (let i = from; i < to; i++) out.push(items[i - first] as T);
    }
    first += count;
  }
  return out;
}

/**
 * A run of consecutive history items still in the form they were stored in (a checkpoint's item
 * group), read and frozen the first time something needs them.
 *
 * Parsing and freezing a long history was most of a cold start (10,000 items: about 15 ms of CPU
 * and 10 MiB of objects, README Benchmarks). A restored history keeps such runs ahead of its own
 * items (`ContextManager`): a turn works from their summaries, and only what needs the items
 * themselves (an HTTP provider's request, a rewrite, a page of history) reads them.
 */
export class SealedItems {
  /** How many items the run holds; `items` throws when the stored run holds another number. */
  readonly count: number;
  /** Saved with the run; undefined for runs stored without one, which are read when needed. */
  readonly summary: RunSummary | undefined;
  /**
   * What the stored run holds, as an identity: two runs with the same key hold the same items
   * (its store's digest of them). Undefined: not known.
   */
  readonly key: string | undefined;
  #read: (() => StoredItems) | undefined;
  #items: readonly ResponseItem[] | undefined;

  constructor(count: number, read: () => StoredItems, summary?: RunSummary, key?: string) {
    this.count = count;
    this.summary = summary;
    this.key = key;
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
