import {
  ContextManager,
  estimateItemBytes,
  freezeItemsInPlace,
  type SealedItems,
  type TruncationPolicy,
} from "../context-manager/index.ts";
import type { ResponseItem, RolloutLine, TokenUsageInfo } from "../protocol/index.ts";
import {
  assembleState,
  materialize,
  type ReconstructedState,
  type ReconstructOptions,
} from "./reconstruct.ts";
import {
  appendEntries,
  type LineCounters,
  type OlderScanSummary,
  ReverseScan,
  type ScanEntry,
  scanEntriesOf,
} from "./scan.ts";

/**
 * Checkpoints: reconstruction from a saved state plus the lines written after it, equal to
 * reconstruction from the whole rollout (design §6, §10 invariant 7).
 *
 * Design. Reconstruction (reference §6) has two halves, and a checkpoint keeps what each needs.
 *
 * - Forward materialization. Re-recording every line from the start gives the same items as
 *   re-recording from whichever compaction the reverse scan picks as the base: every compaction
 *   with replacement history replaces the items whole, so both paths hold identical items from
 *   the newer of the two bases on. So the checkpoint stores the items after all its lines
 *   (`items`), and the lines after it are re-recorded on top, rollbacks included. Only two
 *   things depend on where the base is: `historyVersion` (one per history rewrite after it) and
 *   whether a legacy compaction came after it. Running totals (`rewrites`,
 *   `legacyCompactions`), with each compaction's totals up to it in its scan entry, give both
 *   for any base. A base among the later lines is re-materialized from that line, as Codex does.
 *
 * - The reverse scan. Lines after the checkpoint can reach back into it: a rollback discards the
 *   newest user turns' segments, and with them their previous turn settings, reference context
 *   items and world-state records; a line continuing the last turn extends its segment. So the
 *   checkpoint keeps compact scan entries (`recent`) for its newest lines: every line the scan
 *   reads, minus payloads it ignores (response items shrink to "is a user turn"; runs of them to
 *   one entry; compactions keep no replacement history). `recent` reaches back far enough that a
 *   rollback of `maxRollbackTurns` user turns right after the checkpoint is resolved inside it.
 *   Everything older is summarized (`older`) as the scan of those lines alone concluded: base,
 *   window number, settings and reference, each with the ordinal of the surviving segment it came
 *   from (so the early exit of the full scan can be replayed exactly), and the world-state
 *   baseline those lines replay to. The scan of later lines runs on through `recent` and, at
 *   its start, finishes with `older`. That is exact when it arrives there at a segment boundary
 *   with no rollback pending; otherwise the result is `{needsFullReplay}` and the caller replays
 *   the whole rollout (the Durable Object reads it from R2).
 *
 * World-state records are kept as written (full snapshots only where the rollout has them,
 * patches otherwise), so no baseline is duplicated per turn.
 *
 * A checkpoint extends incrementally (`extendCheckpoint`): its `recent` entries, the new lines'
 * entries and its `older` summary are all the next one needs, so the whole rollout is never
 * read. The window moves forward as turns are added; after a rollback deeper than it, the
 * window stays where it was until a full rebuild.
 */

/** Rollbacks of up to this many user turns after a checkpoint are answered from it. */
export const DEFAULT_MAX_ROLLBACK_TURNS = 64;

/** The JSON a checkpoint is stored as. */
export interface Checkpoint {
  version: 1;
  /** Sequence number of the last line covered; by default the count of lines covered. */
  lastSeq: number;
  /** The checkpoint covers the rollout's first `lineCount` lines. */
  lineCount: number;
  /** The policy `items` were recorded with; reconstruction with another needs a full replay. */
  truncation: TruncationPolicy;
  /** Rollbacks of up to this many user turns after the checkpoint are resolved from it. */
  maxRollbackTurns: number;
  /**
   * The first runs of `items` as a store read them, not parsed yet (`CheckpointStore.load`). In
   * memory only: never part of the stored JSON, and absent from checkpoints built here unless the
   * one they extend had them.
   */
  sealed?: readonly SealedItems[];
  /** History after re-recording every covered line, oldest first (after `sealed`). */
  items: ResponseItem[];
  /**
   * The model-visible bytes of each of `items`, which token estimates derive from (a cache: a restored
   * history's first prompt needs them all). Optional, and ignored when it does not fit `items`.
   */
  itemBytes?: number[];
  /** History rewrites (compactions, rollbacks of at least one turn) in the covered lines. */
  rewrites: number;
  /** Compactions without replacement history in the covered lines. */
  legacyCompactions: number;
  /** All compactions in the covered lines (the window-number fallback). */
  compactions: number;
  /** The newest non-null `token_count` info. Undefined: none was recorded. */
  tokenInfo?: TokenUsageInfo;
  /** The covered lines hold a `task_started` (`opensUntrackedTurn`). Absent: they hold none. */
  tasksStarted?: true;
  /** Scan entries of the newest covered lines, oldest first. */
  recent: ScanEntry[];
  /** What the covered lines before `recent` concluded. Undefined: `recent` starts at line 0. */
  older?: OlderScanSummary;
}

export interface CheckpointOptions extends ReconstructOptions {
  /** Default: the previous checkpoint's, else `DEFAULT_MAX_ROLLBACK_TURNS`. */
  maxRollbackTurns?: number;
  /** Default: the previous checkpoint's `lastSeq` (0 without one) plus the number of lines. */
  lastSeq?: number;
}

/** The checkpoint cannot answer: replay the whole rollout with `reconstructRollout`. */
export interface NeedsFullReplay {
  needsFullReplay: true;
  reason: string;
}

function needsFullReplay(reason: string): NeedsFullReplay {
  return { needsFullReplay: true, reason };
}

function samePolicy(a: TruncationPolicy, b: TruncationPolicy): boolean {
  return a.mode === b.mode && a.limit === b.limit;
}

function countersOf(checkpoint: Checkpoint | undefined): LineCounters {
  const counters: LineCounters = {
    rewrites: checkpoint?.rewrites ?? 0,
    legacyCompactions: checkpoint?.legacyCompactions ?? 0,
    compactions: checkpoint?.compactions ?? 0,
  };
  if (checkpoint?.tokenInfo !== undefined) counters.tokenInfo = checkpoint.tokenInfo;
  if (checkpoint?.tasksStarted === true) counters.tasksStarted = true;
  return counters;
}

/** Pushes `entries` newest first until the scan stops. */
function pushNewestFirst(scan: ReverseScan, entries: readonly ScanEntry[]): void {
  for (let i = entries.length - 1; i >= 0 && !scan.stopped; i--) {
    const entry = entries[i];
    if (entry !== undefined) scan.push(entry);
  }
}

/**
 * Where `entries` must start for a rollback of `maxRollbackTurns` turns right after them to be
 * resolved inside them: the `turn_started` entry that closes the last segment it discards.
 * Undefined when they are not enough.
 */
function windowStart(entries: readonly ScanEntry[], maxRollbackTurns: number): number | undefined {
  const scan = new ReverseScan({ earlyExit: false, pendingRollback: maxRollbackTurns });
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i];
    if (entry !== undefined && scan.push(entry) && scan.pendingRollback === 0) return i;
  }
  return undefined;
}

/**
 * The summary of `entries` (oldest first) followed, further back, by what `older` summarizes
 * (undefined: `entries` start at line 0). Undefined when the two do not join exactly.
 */
function summarize(
  entries: readonly ScanEntry[],
  older: OlderScanSummary | undefined,
): OlderScanSummary | undefined {
  const scan = new ReverseScan({ earlyExit: true });
  pushNewestFirst(scan, entries);
  if (!scan.stopped) {
    if (older === undefined) scan.finish();
    else if (scan.hasActiveSegment || scan.pendingRollback > 0) return undefined;
    else scan.closeWithOlder(older);
  }
  return scan.toSummary();
}

function buildCheckpoint(
  previous: Checkpoint | undefined,
  lines: readonly RolloutLine[],
  opts: CheckpointOptions,
): Checkpoint {
  const maxRollbackTurns =
    opts.maxRollbackTurns ?? previous?.maxRollbackTurns ?? DEFAULT_MAX_ROLLBACK_TURNS;
  const counters = countersOf(previous);
  // Detached from the caller's line objects: a checkpoint is data to be stored. The previous
  // checkpoint's entries were detached when they were added, and are shared.
  const entries = structuredClone(
    scanEntriesOf(lines, counters).map((entry) => {
      if (entry.type !== "compacted") return entry;
      const { source: _source, ...stored } = entry;
      return stored;
    }),
  );
  let recent = appendEntries(previous?.recent ?? [], entries);
  let older = previous?.older;
  const start = windowStart(recent, maxRollbackTurns);
  if (start !== undefined && start > 0) {
    const summary = summarize(recent.slice(0, start), older);
    if (summary !== undefined) {
      recent = recent.slice(start);
      older = summary;
    }
  }
  const history = new ContextManager({
    ...(previous?.sealed === undefined ? {} : { sealed: previous.sealed }),
    items: previous?.items ?? [],
  });
  materialize(history, lines, 0, opts.truncation);
  // The rest is detached too (`older` may hold a new summary, `tokenInfo` a line's object);
  // history items are deep-frozen already, so they are shared rather than cloned.
  const checkpoint: Checkpoint = structuredClone({
    version: 1,
    lastSeq: opts.lastSeq ?? (previous?.lastSeq ?? 0) + lines.length,
    lineCount: (previous?.lineCount ?? 0) + lines.length,
    truncation: { mode: opts.truncation.mode, limit: opts.truncation.limit },
    maxRollbackTurns,
    items: [],
    rewrites: counters.rewrites,
    legacyCompactions: counters.legacyCompactions,
    compactions: counters.compactions,
    recent: [],
    ...(counters.tokenInfo === undefined ? {} : { tokenInfo: counters.tokenInfo }),
    ...(counters.tasksStarted === true ? { tasksStarted: true as const } : {}),
    ...(older === undefined ? {} : { older }),
  });
  checkpoint.recent = recent;
  const { sealed, items } = history.toState();
  if (sealed !== undefined) checkpoint.sealed = sealed;
  checkpoint.items = items.slice();
  checkpoint.itemBytes = checkpoint.items.map(estimateItemBytes);
  return checkpoint;
}

/**
 * Takes over a checkpoint just read from storage: its items are frozen in place with their saved
 * byte counts (`freezeItemsInPlace`), and the history restored from it shares them.
 */
export function restoreCheckpoint(checkpoint: Checkpoint): Checkpoint {
  if (Array.isArray(checkpoint?.items)) freezeItemsInPlace(checkpoint.items, checkpoint.itemBytes);
  return checkpoint;
}

/** A checkpoint of the whole rollout `lines`. */
export function createCheckpoint(
  lines: readonly RolloutLine[],
  opts: CheckpointOptions,
): Checkpoint {
  return buildCheckpoint(undefined, lines, opts);
}

/**
 * The checkpoint after `previous` plus `laterLines` (the lines written after it), without the
 * rest of the rollout. Deep-equal to `createCheckpoint` over all the lines unless a rollback in
 * `laterLines` reaches past `previous`'s window (that one keeps a larger window). Needs a full
 * rebuild only when the truncation policy changed.
 */
export function extendCheckpoint(
  previous: Checkpoint,
  laterLines: readonly RolloutLine[],
  opts: CheckpointOptions,
): Checkpoint | NeedsFullReplay {
  if (previous.version !== 1) return needsFullReplay("unsupported checkpoint version");
  if (!samePolicy(previous.truncation, opts.truncation)) {
    return needsFullReplay("the truncation policy differs from the checkpoint's");
  }
  return buildCheckpoint(previous, laterLines, opts);
}

/**
 * Reconstruction from a checkpoint plus the lines written after it. Deep-equal to
 * `reconstructRollout` over the whole rollout (design §10 invariant 7), or `{needsFullReplay}`
 * when the later lines reach further back than the checkpoint keeps: a rollback past its window,
 * a turn that spans the window's start, or another truncation policy.
 */
export function reconstructFromCheckpoint(
  checkpoint: Checkpoint,
  laterLines: readonly RolloutLine[],
  opts: ReconstructOptions,
): ReconstructedState | NeedsFullReplay {
  if (checkpoint.version !== 1) return needsFullReplay("unsupported checkpoint version");
  if (!samePolicy(checkpoint.truncation, opts.truncation)) {
    return needsFullReplay("the truncation policy differs from the checkpoint's");
  }
  const counters = countersOf(checkpoint);
  const entries = scanEntriesOf(laterLines, counters);
  const scan = new ReverseScan({ earlyExit: true });
  pushNewestFirst(scan, entries);
  pushNewestFirst(scan, checkpoint.recent);
  if (!scan.stopped) {
    if (checkpoint.older === undefined) {
      scan.finish();
    } else if (scan.hasActiveSegment) {
      return needsFullReplay("a turn reaches back past the start of the checkpoint's window");
    } else if (scan.pendingRollback > 0) {
      return needsFullReplay(
        `a rollback reaches ${scan.pendingRollback} user turn(s) past the checkpoint's window`,
      );
    } else {
      scan.closeWithOlder(checkpoint.older);
    }
  }
  const base = scan.base?.info;
  let history: ContextManager;
  let sawLegacyCompaction: boolean;
  if (base?.source !== undefined) {
    history = new ContextManager();
    history.replace(base.source.replacementHistory);
    sawLegacyCompaction = materialize(
      history,
      laterLines,
      base.source.lineIndex + 1,
      opts.truncation,
    );
  } else {
    // Materializing from the base would have rewritten history once for the base itself, then
    // once per rewrite after it.
    const historyVersion =
      base === undefined ? checkpoint.rewrites : 1 + checkpoint.rewrites - base.rewritesThrough;
    const legacyBefore = checkpoint.legacyCompactions > (base?.legacyThrough ?? 0);
    history = new ContextManager({
      ...(checkpoint.sealed === undefined ? {} : { sealed: checkpoint.sealed }),
      items: checkpoint.items,
      historyVersion,
    });
    sawLegacyCompaction = materialize(history, laterLines, 0, opts.truncation) || legacyBefore;
  }
  return assembleState(history, scan, sawLegacyCompaction, counters);
}
