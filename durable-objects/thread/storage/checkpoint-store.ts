import {
  estimateItemBytes,
  type RunSummary,
  SealedItems,
  type StoredItems,
  segmentsLength,
  summarizeRun,
} from "../../../shared/context-manager/index.ts";
import type { ResponseItem } from "../../../shared/protocol/index.ts";
import { type Checkpoint, restoreCheckpoint } from "../../../shared/rollout/index.ts";
import { gunzip, gzip, sha256HexSync } from "./gzip.ts";
import { CHECKPOINT_TABLES } from "./schema.ts";
import type { Sql } from "./sql.ts";

/** Headroom below the 2 MB per-value limit of Durable Object SQLite (see `thread/storage/text-parts.ts`). */
export const CHECKPOINT_CHUNK_MAX_BYTES = 1_800_000;

/** When a group of history items closes (see `planItemGroups`). */
export interface ItemGroupLimits {
  maxItems: number;
  /** Model-visible bytes of its items (about their JSON size). */
  maxBytes: number;
}

export const DEFAULT_ITEM_GROUP_LIMITS: ItemGroupLimits = { maxItems: 250, maxBytes: 1_000_000 };

/** Splits bytes into chunks of at most `max` bytes. */
export function chunkBytes(bytes: Uint8Array, max = CHECKPOINT_CHUNK_MAX_BYTES): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i += max) chunks.push(bytes.subarray(i, i + max));
  return chunks.length > 0 ? chunks : [new Uint8Array()];
}

/** A run of consecutive history items stored as one gzip blob (split into parts like above). */
export interface ItemGroup {
  /** Index of its first item in the checkpoint's history. */
  first: number;
  count: number;
}

/**
 * Where a group starting at `first` closes: after `maxItems` items or once its bytes reach
 * `maxBytes`. Undefined when the items run out first (the group stays open).
 */
function closedGroupEnd(
  bytes: readonly number[],
  first: number,
  { maxItems, maxBytes }: ItemGroupLimits,
): number | undefined {
  let size = 0;
  for (let i = first; i < bytes.length; i++) {
    size += bytes[i] ?? 0;
    if (i + 1 - first >= maxItems || size >= maxBytes) return i + 1;
  }
  return undefined;
}

/**
 * Groups for items `[from, bytes.length)`: closed groups, then the open rest (if any items are
 * left). Boundaries depend only on the items' byte counts, so a closed group never changes.
 */
export function planItemGroups(
  bytes: readonly number[],
  from: number,
  limits: ItemGroupLimits,
): ItemGroup[] {
  const groups: ItemGroup[] = [];
  let first = from;
  for (;;) {
    const end = closedGroupEnd(bytes, first, limits);
    if (end === undefined) break;
    groups.push({ first, count: end - first });
    first = end;
  }
  if (first < bytes.length) groups.push({ first, count: bytes.length - first });
  return groups;
}

/**
 * How many of the stored groups (oldest first) the next checkpoint keeps: the closed ones that
 * hold the very same (frozen, shared) item objects as its history. The open last group, and
 * everything after a rewrite of history (compaction, rollback), is written again.
 */
export function keptItemGroups(
  stored: readonly ItemGroup[],
  storedItems: readonly ResponseItem[],
  next: readonly ResponseItem[],
  bytes: readonly number[],
  limits: ItemGroupLimits,
): number {
  let kept = 0;
  for (const group of stored) {
    const end = group.first + group.count;
    if (end > storedItems.length || end > next.length) break;
    if (closedGroupEnd(bytes, group.first, limits) !== end) break;
    for (let i = group.first; i < end; i++) if (storedItems[i] !== next[i]) return kept;
    kept += 1;
  }
  return kept;
}

/** The checkpoint minus its history, which is stored in item groups. */
type CheckpointHeader = Omit<Checkpoint, "sealed" | "items" | "itemBytes"> & { itemCount: number };

/** A history as the stored groups hold it: runs not read yet, then items. */
interface StoredHistory {
  sealed: readonly SealedItems[];
  items: readonly ResponseItem[];
}

/**
 * How many stored groups the next checkpoint keeps: the closed groups of the same item objects
 * (`keptItemGroups`), where a run counts as the same when it is the very run this store read.
 * A history that has read its runs since (a rollback) holds their items, which count as usual.
 */
function keptGroups(
  stored: readonly ItemGroup[],
  before: StoredHistory,
  next: StoredHistory,
  nextBytes: readonly number[],
  limits: ItemGroupLimits,
): number {
  if (next.sealed.length === 0 && before.sealed.every((run) => run.parsed)) {
    const items = [...before.sealed.flatMap((run) => run.items), ...before.items];
    return keptItemGroups(stored, items, next.items, nextBytes, limits);
  }
  let runs = 0;
  while (runs < before.sealed.length && next.sealed[runs] === before.sealed[runs]) runs += 1;
  if (runs < before.sealed.length || runs < next.sealed.length) return runs;
  // Past the runs both hold, items line up at the same offset.
  const offset = segmentsLength(next.sealed);
  const rebased = stored.slice(runs).map((g) => ({ first: g.first - offset, count: g.count }));
  return runs + keptItemGroups(rebased, before.items, next.items, nextBytes, limits);
}

/**
 * The newest checkpoint of a thread. Its history is stored in groups of consecutive items
 * (`spindle_checkpoint_items`), everything else in `spindle_checkpoint`, all gzip-compressed and
 * split into rows under the 2 MB limit.
 *
 * History only grows between compactions, so the next checkpoint shares all but its newest items
 * with the last one: a save rewrites the header, the open last group and new groups, not the
 * whole history (which would re-serialize megabytes every checkpoint on a long thread, and leave
 * as much garbage on the heap).
 *
 * A load reads every group but inflates and parses only the last: the others become
 * `SealedItems` carrying their run summaries (`spindle_checkpoint_runs`), read only when history
 * needs their items. Each is checked against its stored SHA-256 instead, so a damaged group still
 * fails the load (and the thread is rebuilt from its rollout).
 */
export class CheckpointStore {
  readonly #sql: Sql;
  readonly #storage: DurableObjectStorage;
  readonly #limits: ItemGroupLimits;
  /** The history the stored groups hold, as saved or loaded by this store. */
  #stored: StoredHistory | undefined;

  constructor(sql: Sql, storage: DurableObjectStorage, limits = DEFAULT_ITEM_GROUP_LIMITS) {
    this.#sql = sql;
    this.#storage = storage;
    this.#limits = limits;
  }

  /**
   * Replaces the stored checkpoint in one transaction, keeping the item groups it shares with the
   * one this store saved or loaded last. Answers the groups it wrote: their items, and the key a
   * load gives their run (`SealedItems.key`).
   */
  save(checkpoint: Checkpoint): { items: readonly ResponseItem[]; key: string }[] {
    const { sealed = [], items, itemBytes, ...rest } = checkpoint;
    const next: StoredHistory = { sealed, items };
    const bytes = itemBytes?.length === items.length ? itemBytes : items.map(estimateItemBytes);
    const offset = segmentsLength(sealed);
    const header: CheckpointHeader = { ...rest, itemCount: offset + items.length };
    const stored = this.#stored === undefined ? [] : this.#groups();
    const kept =
      this.#stored === undefined ? 0 : keptGroups(stored, this.#stored, next, bytes, this.#limits);
    const last = stored[kept - 1];
    const from = kept === 0 || last === undefined ? 0 : last.first + last.count;
    // What follows the kept groups is written again: items only, after every run, unless runs
    // were not kept (another store read them), which are then read and written too.
    const rewritesRuns = from < offset;
    const source = rewritesRuns ? [...sealed.flatMap((run) => run.items), ...items] : items;
    const sourceBytes = rewritesRuns ? source.map(estimateItemBytes) : bytes;
    /** Index in history of `source[0]`. */
    const base = rewritesRuns ? 0 : offset;
    const groups = planItemGroups(sourceBytes, from - base, this.#limits).map((group) => {
      const end = group.first + group.count;
      const items = source.slice(group.first, end);
      const json = JSON.stringify({ items, bytes: sourceBytes.slice(group.first, end) });
      const data = gzip(json);
      const key = sha256HexSync(new TextEncoder().encode(json));
      const run: StoredRun = { summary: summarizeRun(items), sha256: sha256HexSync(data), key };
      return {
        first: base + group.first,
        count: group.count,
        data,
        run: gzip(JSON.stringify(run)),
        items,
        key,
      };
    });
    const headerData = gzip(JSON.stringify(header));
    for (const table of CHECKPOINT_TABLES) this.#sql.tables.ensure(table);
    this.#storage.transactionSync(() => {
      this.#sql`DELETE FROM spindle_checkpoint`;
      this.#insertParts(headerData, (part, data) => {
        this.#sql`INSERT INTO spindle_checkpoint (chunk, data) VALUES (${part}, ${data})`;
      });
      this.#sql`DELETE FROM spindle_checkpoint_items WHERE grp >= ${kept}`;
      this.#sql`DELETE FROM spindle_checkpoint_runs WHERE grp >= ${kept}`;
      groups.forEach((group, i) => {
        this.#insertParts(group.data, (part, data) => {
          this.#sql`INSERT INTO spindle_checkpoint_items (grp, part, first, count, data)
            VALUES (${kept + i}, ${part}, ${group.first}, ${group.count}, ${data})`;
        });
        this.#insertParts(group.run, (part, data) => {
          this.#sql`INSERT INTO spindle_checkpoint_runs (grp, part, data)
            VALUES (${kept + i}, ${part}, ${data})`;
        });
      });
    });
    this.#stored = next;
    return groups.map(({ items, key }) => ({ items, key }));
  }

  /**
   * The stored checkpoint, or undefined when there is none. Throws when it cannot be read whole
   * (a corrupt blob, groups that do not cover the header's item count).
   */
  load(): Checkpoint | undefined {
    const headerRows = this.#sql.tables.ifExists("spindle_checkpoint", [], () =>
      this.#sql<{
        data: ArrayBuffer;
      }>`SELECT data FROM spindle_checkpoint ORDER BY chunk`.toArray(),
    );
    if (headerRows.length === 0) return undefined;
    const header = JSON.parse(gunzip(joinParts(headerRows))) as CheckpointHeader | Checkpoint;
    // Written before history moved to item groups: the whole checkpoint in one blob.
    if ("items" in header) return restoreCheckpoint(header);
    const groups = this.#readGroups();
    const count = groups.reduce((n, g) => n + g.count, 0);
    if (count !== header.itemCount) {
      throw new Error(`checkpoint holds ${count} of its ${header.itemCount} items`);
    }
    const open = groups.pop();
    const runs = this.#readRuns();
    const sealed = groups.map((group) => sealedGroup(group, runs.get(group.grp)));
    const last = open === undefined ? { items: [], bytes: [] } : parseGroup(open);
    const { itemCount: _count, ...rest } = header;
    const checkpoint = restoreCheckpoint({
      ...rest,
      ...(sealed.length > 0 ? { sealed } : {}),
      items: last.items,
      itemBytes: last.bytes as number[],
    });
    // As frozen (saved counts that did not fit the items were recomputed).
    checkpoint.itemBytes = checkpoint.items.map(estimateItemBytes);
    this.#stored = { sealed, items: checkpoint.items };
    return checkpoint;
  }

  clear(): void {
    this.#sql.tables.clear(...CHECKPOINT_TABLES);
    this.#stored = undefined;
  }

  /** The run record of each group that has one (groups saved before runs had none). */
  #readRuns(): Map<number, StoredRun> {
    const rows = this.#sql.tables.ifExists("spindle_checkpoint_runs", [], () =>
      this.#sql<{
        grp: number;
        data: ArrayBuffer;
      }>`SELECT grp, data FROM spindle_checkpoint_runs ORDER BY grp, part`.toArray(),
    );
    const runs = new Map<number, StoredRun>();
    for (const { grp, data } of byGroup(rows)) {
      runs.set(grp, JSON.parse(gunzip(data)) as StoredRun);
    }
    return runs;
  }

  #groups(): ItemGroup[] {
    return this.#sql.tables.ifExists("spindle_checkpoint_items", [], () =>
      this.#sql<{
        first: number;
        count: number;
      }>`SELECT first, count FROM spindle_checkpoint_items WHERE part = 0 ORDER BY grp`.toArray(),
    );
  }

  /** Every group as stored (compressed), oldest first. Throws unless they are contiguous from item 0. */
  #readGroups(): StoredGroup[] {
    const rows = this.#sql.tables.ifExists("spindle_checkpoint_items", [], () =>
      this.#sql<{
        grp: number;
        first: number;
        count: number;
        data: ArrayBuffer;
      }>`SELECT grp, first, count, data FROM spindle_checkpoint_items ORDER BY grp, part`.toArray(),
    );
    let next = 0;
    return byGroup(rows).map(({ grp, head, data }) => {
      if (head.first !== next) {
        throw new Error(`checkpoint item group ${grp} does not continue at item ${next}`);
      }
      next += head.count;
      return { grp, count: head.count, data };
    });
  }

  #insertParts(bytes: Uint8Array, insert: (part: number, data: ArrayBuffer) => void): void {
    // Copy: a subarray's buffer is the whole compressed blob.
    chunkBytes(bytes).forEach((chunk, part) => {
      insert(part, chunk.slice().buffer);
    });
  }
}

/**
 * Rows ordered by group and part, one entry per group: its first row and its parts joined.
 */
function byGroup<R extends { grp: number; data: ArrayBuffer }>(
  rows: readonly R[],
): { grp: number; head: R; data: Uint8Array }[] {
  const groups: { grp: number; head: R; data: Uint8Array }[] = [];
  for (let i = 0; i < rows.length; ) {
    const head = rows[i] as R;
    let end = i + 1;
    while (rows[end]?.grp === head.grp) end++;
    groups.push({ grp: head.grp, head, data: joinParts(rows.slice(i, end)) });
    i = end;
  }
  return groups;
}

/** A stored group: its items and their byte counts (`StoredItems`), as gzip-compressed JSON. */
interface StoredGroup {
  grp: number;
  count: number;
  data: Uint8Array;
}

/**
 * What `spindle_checkpoint_runs` keeps per group (gzip JSON): the run's summary, which a turn
 * works from without reading the group, and the SHA-256 of the group's compressed bytes, which a
 * load checks instead of inflating them (a damaged group still fails the load at once).
 */
interface StoredRun {
  summary: RunSummary;
  sha256: string;
  /**
   * The SHA-256 of the group's JSON before compression: what it holds, whatever compressed it
   * (`SealedItems.key`). Absent in records written before it.
   */
  key?: string;
}

/**
 * A group as a run read on first need. One without a run record (saved before they existed) is
 * inflated now, so gzip's own check still runs at load, and has no summary.
 */
function sealedGroup(group: StoredGroup, run: StoredRun | undefined): SealedItems {
  if (run === undefined) {
    const text = gunzip(group.data);
    return new SealedItems(group.count, () => JSON.parse(text) as StoredItems);
  }
  if (sha256HexSync(group.data) !== run.sha256) {
    throw new Error(`checkpoint item group ${group.grp} does not match its checksum`);
  }
  return new SealedItems(
    group.count,
    () => JSON.parse(gunzip(group.data)) as StoredItems,
    run.summary,
    run.key,
  );
}

function parseGroup(group: StoredGroup): StoredItems {
  const stored = JSON.parse(gunzip(group.data)) as StoredItems;
  if (!Array.isArray(stored.items) || stored.items.length !== group.count) {
    throw new Error(`checkpoint item group ${group.grp} does not hold its ${group.count} items`);
  }
  return stored;
}

function joinParts(rows: readonly { data: ArrayBuffer }[]): Uint8Array {
  if (rows.length === 1 && rows[0]) return new Uint8Array(rows[0].data);
  const joined = new Uint8Array(rows.reduce((n, r) => n + r.data.byteLength, 0));
  let offset = 0;
  for (const r of rows) {
    joined.set(new Uint8Array(r.data), offset);
    offset += r.data.byteLength;
  }
  return joined;
}
