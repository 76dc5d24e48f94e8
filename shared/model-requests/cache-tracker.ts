import type { CacheReport } from "../api/index.ts";
import { type PromptInput, SealedItems, utf8ByteLength } from "../context-manager/index.ts";
import {
  type KnownResponseItem,
  type ModelRequestLine,
  modelVisibleItem,
  type ResponseItem,
  type RolloutItem,
  type TokenUsage,
} from "../protocol/index.ts";
import type { SentRequest } from "../session/index.ts";
import {
  type ComparedRequest,
  cacheReport,
  JsonParts,
  type PartSpan,
  type RequestParts,
} from "./cache-report.ts";

/** What a thread keeps of its newest provider request between loads, beside the request's parts. */
export interface RequestHead {
  /** The seq of its `spindle_request` line. */
  readonly seq: number;
  readonly model: string;
  readonly kind: ModelRequestLine["kind"];
  /** Epoch milliseconds of its line. */
  readonly at_ms: number;
  /** How many parts it has (instructions, tools, then one per input item). */
  readonly parts: number;
  /** Lines written since it compacted history. */
  readonly compacted: boolean;
  /** Lines written since it rolled history back. */
  readonly rolled_back: boolean;
}

/**
 * Parts `[at, at + count)` of the kept request are the items of a stored run of history whose
 * key is `key` (`SealedItems.key`), `bytes` long: a later request holding that run there shares
 * them, and neither is read to know it.
 */
export interface RunMark {
  readonly at: number;
  readonly count: number;
  readonly key: string;
  readonly bytes: number;
}

/** A thread's newest provider request, as the cache report of the next one needs it. */
export interface RememberedRequest {
  readonly head: RequestHead;
  /** Its parts as JSON (`requestTexts`). */
  readonly parts: readonly string[];
}

/** Where a thread keeps its newest request (the Thread DO: SQLite). */
export interface RequestMemory {
  /** Null: the thread has sent no request. Undefined: nothing is kept (see `CacheTracker`). */
  head(): RequestHead | null | undefined;
  /** The kept parts `[from, to)`. */
  parts(from: number, to: number): string[];
  /** The kept request's run marks. */
  marks(): RunMark[];
  /**
   * Keeps `head` (null: the thread has sent no request), with `changed` (part index → JSON)
   * replacing kept parts and the parts from `head.parts` on dropped; `marks`, when given,
   * replace the marks.
   */
  write(
    head: RequestHead | null,
    changed: ReadonlyMap<number, string>,
    marks?: readonly RunMark[],
  ): void;
}

/** Kept parts read at a time, as a comparison reaches them. */
const READ_PARTS = 256;

const itemText = (item: KnownResponseItem) => JSON.stringify(modelVisibleItem(item));

/**
 * The kept request after a load, read from the memory as the comparison needs it: the parts of
 * the runs its marks name stay unread, as the runs of history do.
 */
class KeptParts implements RequestParts {
  readonly count: number;
  readonly #memory: RequestMemory;
  readonly #texts = new Map<number, string>();
  readonly #marks: Map<number, RunMark>;
  /** Where each mark starts, in order. */
  readonly #starts: number[];

  constructor(memory: RequestMemory, count: number, marks: readonly RunMark[]) {
    this.#memory = memory;
    this.count = count;
    this.#marks = new Map(marks.map((mark) => [mark.at, mark]));
    this.#starts = marks.map((mark) => mark.at).sort((a, b) => a - b);
  }

  text(i: number): string {
    const kept = this.#texts.get(i);
    if (kept !== undefined) return kept;
    const next = this.#starts.find((at) => at > i) ?? this.count;
    const texts = this.#memory.parts(i, Math.min(this.count, next, i + READ_PARTS));
    texts.forEach((text, k) => {
      this.#texts.set(i + k, text);
    });
    return texts[0] as string;
  }

  bytes(i: number): number {
    return utf8ByteLength(this.text(i));
  }

  same(i: number, other: RequestParts): boolean {
    return this.text(i) === other.text(i);
  }

  markAt(i: number): RunMark | undefined {
    return this.#marks.get(i);
  }
}

/** A stored run of a request's input and the part it starts at. */
interface RunAt {
  readonly at: number;
  readonly run: SealedItems;
}

/**
 * A request as the engine hands it to the provider. Its input items are history's own frozen
 * objects, so an item the previous request held as the same object is the same bytes: only new
 * items are serialized, and a long thread's request costs what it adds. A stored run of history
 * (after a load) is one span: the previous request shares it when it held the same run, or the
 * memory marks the run there; otherwise it is read.
 */
class PromptParts implements RequestParts {
  readonly count: number;
  readonly #channels: readonly [string, string];
  /** The input's items by part index − 2; undefined inside a run. */
  readonly #items: readonly (KnownResponseItem | undefined)[];
  readonly #runs: RunAt[] = [];
  #texts: (string | undefined)[] = [];
  readonly #bytes: (number | undefined)[] = [];
  /** Each run's bytes once known, by the part it starts at. */
  readonly #runBytes = new Map<number, number>();

  constructor(
    instructions: string,
    tools: readonly unknown[],
    input: PromptInput,
    previous: RequestParts | undefined,
  ) {
    this.#channels = [JSON.stringify(instructions), JSON.stringify(tools)];
    this.#items = this.#itemsOf(input.segments);
    this.count = this.#items.length + 2;
    if (previous instanceof PromptParts) {
      const before = previous.#items;
      const end = Math.min(before.length, this.#items.length);
      for (let i = 0; i < end; i++) {
        const item = this.#items[i];
        if (item !== undefined && before[i] === item) this.#bytes[i + 2] = previous.#bytes[i + 2];
      }
    }
  }

  /** The input's items in one array (the input's own when it holds no run), noting its runs. */
  #itemsOf(segments: PromptInput["segments"]): readonly (KnownResponseItem | undefined)[] {
    const [only] = segments;
    if (segments.length === 1 && Array.isArray(only)) return only as readonly KnownResponseItem[];
    const items: (KnownResponseItem | undefined)[] = [];
    for (const segment of segments) {
      if (segment instanceof SealedItems) {
        this.#runs.push({ at: items.length + 2, run: segment });
        items.length += segment.count;
      } else {
        for (let k = 0; k < segment.length; k++) items.push(segment[k]);
      }
    }
    return items;
  }

  #runAround(i: number): RunAt | undefined {
    return this.#runs.find((r) => i >= r.at && i < r.at + r.run.count);
  }

  #item(i: number): KnownResponseItem {
    const item = this.#items[i - 2];
    if (item !== undefined) return item;
    const found = this.#runAround(i) as RunAt;
    return found.run.items[i - found.at] as KnownResponseItem;
  }

  text(i: number): string {
    if (i < 2) return this.#channels[i as 0 | 1];
    const kept = this.#texts[i];
    if (kept !== undefined) return kept;
    const text = itemText(this.#item(i));
    this.#texts[i] = text;
    return text;
  }

  bytes(i: number): number {
    const kept = this.#bytes[i];
    if (kept !== undefined) return kept;
    const bytes = utf8ByteLength(this.text(i));
    this.#bytes[i] = bytes;
    return bytes;
  }

  same(i: number, other: RequestParts): boolean {
    if (i >= 2 && other instanceof PromptParts) {
      const item = this.#items[i - 2];
      if (item !== undefined && other.#items[i - 2] === item) return true;
    }
    return this.text(i) === other.text(i);
  }

  sameSpan(i: number, other: RequestParts): PartSpan | undefined {
    const found = this.#runs.find((r) => r.at === i);
    if (found === undefined) return undefined;
    const { run } = found;
    let bytes: number | undefined;
    if (other instanceof PromptParts) {
      const theirs = other.#runs.find((r) => r.at === i);
      if (theirs?.run === run) bytes = other.#runBytes.get(i);
    } else if (other instanceof KeptParts) {
      const mark = other.markAt(i);
      if (run.key !== undefined && mark?.key === run.key && mark.count === run.count) {
        bytes = mark.bytes;
      }
    }
    if (bytes === undefined) return undefined;
    this.#runBytes.set(i, bytes);
    return { parts: run.count, bytes };
  }

  totalBytes(other: RequestParts | undefined): number {
    let total = utf8ByteLength(this.#channels[0]) + utf8ByteLength(this.#channels[1]);
    for (let i = 0; i < this.#items.length; i++) {
      if (this.#items[i] !== undefined) total += this.bytes(i + 2);
    }
    for (const { at, run } of this.#runs) total += this.#runBytesOf(at, run, other);
    return total;
  }

  #runBytesOf(at: number, run: SealedItems, other: RequestParts | undefined): number {
    const known = this.#runBytes.get(at) ?? (other && this.sameSpan(at, other)?.bytes);
    if (known !== undefined) return known;
    let bytes = 0;
    for (let i = at; i < at + run.count; i++) bytes += this.bytes(i);
    this.#runBytes.set(at, bytes);
    return bytes;
  }

  /** The marks of its runs that have a key. */
  runMarks(): RunMark[] {
    return this.#runs.flatMap(({ at, run }) => {
      const bytes = this.#runBytes.get(at);
      return run.key === undefined || bytes === undefined
        ? []
        : [{ at, count: run.count, key: run.key, bytes }];
    });
  }

  /** Whether parts `[at, at + count)` overlap one of its runs. */
  overlapsRun(at: number, count: number): boolean {
    return this.#runs.some((r) => at < r.at + r.run.count && r.at < at + count);
  }

  /**
   * The mark of `items` (a run of history just stored under `key`) when they are, object for
   * object, consecutive items of this request.
   */
  markOf(items: readonly ResponseItem[], key: string): RunMark | undefined {
    const first = items[0];
    if (first === undefined) return undefined;
    const start = this.#items.indexOf(first as KnownResponseItem);
    if (start === -1 || start + items.length > this.#items.length) return undefined;
    let bytes = 0;
    for (let k = 0; k < items.length; k++) {
      if (this.#items[start + k] !== items[k]) return undefined;
      bytes += this.bytes(start + k + 2);
    }
    return { at: start + 2, count: items.length, key, bytes };
  }

  /** Drops the item texts it made: kept as the previous request, its items give them back. */
  settle(): void {
    this.#texts = [];
  }
}

/** The previous request: its head, and its parts once they are needed. */
interface Previous {
  head: RequestHead;
  parts: RequestParts | undefined;
  marks: RunMark[] | undefined;
}

/**
 * The live cache report (design §14): follows a thread's requests and the lines between them, and
 * reports each request against the one before, as `turnRequests` does from the rollout. The
 * previous request is kept in a `RequestMemory` so the first request after a load compares with
 * it. Where the memory keeps nothing (a thread imported, forked or restored from R2, or created by
 * an earlier release), the caller rebuilds it from the rollout (`newestRequest`, then `remember`)
 * before the next request; until then, or when that fails, the next report is null.
 */
export class CacheTracker {
  readonly #memory: RequestMemory;
  readonly #ttlS: (model: string) => number | null;
  /** The previous request; undefined until read from the memory. */
  #previous: Previous | null | undefined;
  /** The report of the request sent last, until a `token_count` answers it. */
  #pending: CacheReport | null | undefined;
  /** The report of the request the newest `token_count` answered, until taken. */
  #answered: CacheReport | null | undefined;

  constructor(memory: RequestMemory, ttlS: (model: string) => number | null) {
    this.#memory = memory;
    this.#ttlS = ttlS;
  }

  #kept(): Previous | null | undefined {
    if (this.#previous === undefined) {
      const head = this.#memory.head();
      if (head !== undefined) {
        this.#previous = head === null ? null : { head, parts: undefined, marks: undefined };
      }
    }
    return this.#previous;
  }

  #marks(previous: Previous): RunMark[] {
    previous.marks ??= this.#memory.marks().sort((a, b) => a.at - b.at);
    return previous.marks;
  }

  /** The memory keeps nothing: rebuild the previous request from the rollout (`remember`). */
  get needsRebuild(): boolean {
    return this.#kept() === undefined;
  }

  /** Keeps `found` (rebuilt from the rollout; null: it records none) as the previous request. */
  remember(found: RememberedRequest | null): void {
    if (found === null) {
      this.#memory.write(null, new Map(), []);
      this.#previous = null;
      return;
    }
    this.#memory.write(found.head, new Map(found.parts.map((text, i) => [i, text])), []);
    this.#previous = { head: found.head, parts: new JsonParts(found.parts), marks: [] };
  }

  /** The thread has sent no request (a new thread). */
  none(): void {
    this.remember(null);
  }

  /** Called with every line the thread writes, right after it is written; `usage` is its request's. */
  observe(item: RolloutItem, usage: TokenUsage | undefined): void {
    if (item.type === "compacted") this.#edited({ compacted: true });
    if (item.type !== "event_msg") return;
    const event = item.payload;
    if (event.type === "thread_rolled_back") this.#edited({ rolled_back: true });
    if (event.type === "token_count" && this.#pending !== undefined) {
      const pending = this.#pending;
      this.#answered =
        pending === null
          ? null
          : { ...pending, provider_cached_tokens: usage?.cached_input_tokens ?? null };
      this.#pending = undefined;
    }
  }

  #edited(edit: Partial<Pick<RequestHead, "compacted" | "rolled_back">>): void {
    const previous = this.#kept();
    if (previous === undefined || previous === null) return;
    previous.head = { ...previous.head, ...edit };
    this.#memory.write(previous.head, new Map());
  }

  /**
   * Called as `items`, consecutive history items, are stored as a run under `key` (a checkpoint):
   * when the previous request holds them, the memory marks them there, so the first request
   * after a load, which gets them back as that run, shares them without reading it.
   */
  stored(items: readonly ResponseItem[], key: string): void {
    const previous = this.#kept();
    if (previous === undefined || previous === null) return;
    if (!(previous.parts instanceof PromptParts)) return;
    const mark = previous.parts.markOf(items, key);
    if (mark === undefined) return;
    const marks = this.#marks(previous).filter(
      (m) => m.at + m.count <= mark.at || mark.at + mark.count <= m.at,
    );
    marks.push(mark);
    marks.sort((a, b) => a.at - b.at);
    previous.marks = marks;
    this.#memory.write(previous.head, new Map(), marks);
  }

  /** Called right after the request's `spindle_request` line is written as `seq`, at `atMs`. */
  sent(seq: number, atMs: number, request: SentRequest): void {
    const kept = this.#kept();
    let before: RequestParts | undefined;
    let marks: RunMark[] = [];
    if (kept !== undefined && kept !== null) {
      marks = this.#marks(kept);
      kept.parts ??= new KeptParts(this.#memory, kept.head.parts, marks);
      before = kept.parts;
    }
    const parts = new PromptParts(request.instructions, request.tools, request.input, before);
    const current: ComparedRequest = { model: request.model, atMs, parts };
    this.#pending =
      kept === undefined
        ? null
        : cacheReport(
            kept === null
              ? undefined
              : { model: kept.head.model, atMs: kept.head.at_ms, parts: before as RequestParts },
            current,
            {
              compacted: kept?.head.compacted ?? false,
              rolledBack: kept?.head.rolled_back ?? false,
              afterCompactionRequest: kept?.head.kind === "compaction",
            },
            null,
            this.#ttlS(request.model),
          );
    const changed = changedParts(parts, before);
    // Its runs are marked; an earlier mark stays while its own parts are unchanged (a new
    // instruction or tool changes none of them).
    const untouched = unchangedRange(changed, parts.count);
    const next = [
      ...marks.filter((m) => untouched(m.at, m.count) && !parts.overlapsRun(m.at, m.count)),
      ...parts.runMarks(),
    ].sort((a, b) => a.at - b.at);
    const head: RequestHead = {
      seq,
      model: request.model,
      kind: request.kind,
      at_ms: atMs,
      parts: parts.count,
      compacted: false,
      rolled_back: false,
    };
    this.#memory.write(head, changed, sameMarks(marks, next) ? undefined : next);
    parts.settle();
    this.#previous = { head, parts, marks: next };
  }

  /**
   * The report of the request the newest `token_count` line answered, once; null when there is
   * none, or when the previous request could not be known (see the class).
   */
  takeReport(): CacheReport | null {
    const report = this.#answered ?? null;
    this.#answered = undefined;
    return report;
  }
}

/** The parts of `parts` the memory must write: those `before` (the kept request) lacks. */
function changedParts(parts: PromptParts, before: RequestParts | undefined): Map<number, string> {
  const changed = new Map<number, string>();
  let i = 0;
  while (i < parts.count) {
    const span = before !== undefined && i < before.count ? parts.sameSpan(i, before) : undefined;
    if (span !== undefined) {
      i += span.parts;
      continue;
    }
    if (before === undefined || i >= before.count || !parts.same(i, before)) {
      changed.set(i, parts.text(i));
    }
    i++;
  }
  return changed;
}

/** Whether no part of `[at, at + count)` is in `changed`, and all are below `end`. */
function unchangedRange(
  changed: ReadonlyMap<number, string>,
  end: number,
): (at: number, count: number) => boolean {
  const keys = [...changed.keys()].sort((a, b) => a - b);
  return (at, count) => {
    if (at + count > end) return false;
    // The first changed part at or after `at`.
    let lo = 0;
    let hi = keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((keys[mid] as number) < at) lo = mid + 1;
      else hi = mid;
    }
    return lo === keys.length || (keys[lo] as number) >= at + count;
  };
}

function sameMarks(a: readonly RunMark[], b: readonly RunMark[]): boolean {
  return (
    a.length === b.length &&
    a.every((m, i) => {
      const o = b[i] as RunMark;
      return m.at === o.at && m.count === o.count && m.key === o.key && m.bytes === o.bytes;
    })
  );
}
