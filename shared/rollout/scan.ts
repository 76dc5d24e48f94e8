import { isUserTurnBoundary } from "../context/index.ts";
import type {
  CompactedItem,
  JsonObject,
  MessageItem,
  PreviousTurnSettings,
  ResponseItem,
  RolloutItem,
  RolloutLine,
  TokenUsageInfo,
  TurnContextItem,
  WorldStateSnapshot,
} from "../protocol/index.ts";
import { isPlainObject } from "../protocol/index.ts";
import { applyMergePatch } from "../world-state/index.ts";

/**
 * The reverse scan of rollout reconstruction (reference §6.1) over compact per-line summaries
 * ("scan entries"). Reconstruction feeds it entries made from live lines; a checkpoint stores the
 * entries of its recent lines, so the same scan can continue from a checkpoint into the lines
 * written after it.
 */

/** A `world_state` line as replay sees it (reference §6.4). */
export type WorldStateRecord =
  | { kind: "full"; state: JsonObject }
  | { kind: "patch"; patch: JsonObject }
  /** The payload did not fit the schema: replay clears the baseline (design §10 invariant 8). */
  | { kind: "unreadable" };

/** World-state replay input: the records, plus a reset for every compaction. */
type ReplayRecord = WorldStateRecord | { kind: "reset" };

export interface CompactedEntry {
  type: "compacted";
  /** The line carries replacement history, so history can be rebuilt from it alone. */
  replacement: boolean;
  windowNumber?: number;
  /** History rewrites (compactions, non-empty rollbacks) in the lines up to this one, inclusive. */
  rewritesThrough: number;
  /** Compactions without replacement history in the lines up to this one, inclusive. */
  legacyThrough: number;
  /** In memory only, never stored: the line's index and replacement history. */
  source?: { lineIndex: number; replacementHistory: readonly ResponseItem[] };
}

/**
 * What the reverse scan needs from one line (or from a run of response items, which the scan
 * treats alike). JSON-serializable apart from `CompactedEntry.source`.
 */
export type ScanEntry =
  | CompactedEntry
  | { type: "rollback"; numTurns: number }
  /** Without `turnId`: a user turn of a rollout written before turn-start events. */
  | { type: "turn_started"; turnId?: string }
  | { type: "turn_complete"; turnId: string }
  | { type: "turn_aborted"; turnId?: string }
  /** Response items, `user_message` events, inter-agent messages: each ensures a segment. */
  | { type: "items"; userTurn: boolean }
  | { type: "turn_context"; item: TurnContextItem }
  | { type: "world_state"; record: WorldStateRecord };

/** Totals over the lines summarized so far. */
export interface LineCounters {
  /** History rewrites: every compaction and every rollback of at least one turn. */
  rewrites: number;
  /** Compactions without replacement history. */
  legacyCompactions: number;
  /** All compactions (the window-number fallback, reference §6.3). */
  compactions: number;
  /** The newest non-null `token_count` info. */
  tokenInfo?: TokenUsageInfo;
  /** A `task_started` was seen: from then on every turn has one (`opensUntrackedTurn`). */
  tasksStarted?: boolean;
}

/**
 * The model input of an `inter_agent_communication` line: an assistant message whose only text is
 * the communication as JSON (reference §1.3), or undefined when the payload is not one.
 */
export function interAgentMessage(line: RolloutLine): MessageItem | undefined {
  if (line.type !== "unknown" || line.original_type !== "inter_agent_communication") {
    return undefined;
  }
  const payload = line.payload;
  if (!isPlainObject(payload)) return undefined;
  const { author, recipient, content } = payload;
  if (typeof author !== "string" || typeof recipient !== "string" || typeof content !== "string") {
    return undefined;
  }
  return {
    type: "message",
    role: "assistant",
    content: [{ type: "output_text", text: JSON.stringify(payload) }],
  };
}

function pushEntry(entries: ScanEntry[], entry: ScanEntry): void {
  const last = entries[entries.length - 1];
  // A run of response items acts as one: each ensures a segment and may mark it a user turn.
  if (entry.type === "items" && last?.type === "items") {
    last.userTurn ||= entry.userTurn;
    return;
  }
  entries.push(entry);
}

/**
 * Appends `more` to `entries` (both oldest first), joining a run of items across the seam, in a
 * new array: only the last of `entries` can change (a join), so only it is copied.
 */
export function appendEntries(
  entries: readonly ScanEntry[],
  more: readonly ScanEntry[],
): ScanEntry[] {
  const out = entries.slice();
  const last = out.at(-1);
  if (last !== undefined) out[out.length - 1] = { ...last };
  for (const entry of more) pushEntry(out, { ...entry });
  return out;
}

/**
 * Whether `line` starts a user turn that no `task_started` marks: Codex before 0.100 wrote no
 * turn-start events, so until the first one (`tasksStarted`) each real user message starts a
 * turn. Codex wrote no item ids then either; Spindle gives every item one, so a message it
 * recorded outside a turn (an inject) starts none.
 */
export function opensUntrackedTurn(line: RolloutLine, tasksStarted: boolean): boolean {
  return (
    !tasksStarted &&
    line.type === "response_item" &&
    line.payload.type === "message" &&
    !line.payload.id &&
    isUserTurnBoundary(line.payload)
  );
}

/**
 * The items of a compaction's replacement history that history holds: known item types only,
 * as for `response_item` lines (`additional_tools` and other request-prefix or unmodelled items
 * stay in the rollout line). Undefined without replacement history.
 */
export function replacementItems(payload: CompactedItem): ResponseItem[] | undefined {
  const replacement = payload.replacement_history;
  if (replacement === undefined || replacement === null) return undefined;
  return replacement.some((item) => item.type === "other")
    ? replacement.filter((item) => item.type !== "other")
    : replacement;
}

/** A line that rewrites history: every compaction, and every rollback of at least one turn. */
export function isHistoryRewrite(line: RolloutItem): boolean {
  if (line.type === "compacted") return true;
  return (
    line.type === "event_msg" &&
    line.payload.type === "thread_rolled_back" &&
    line.payload.num_turns > 0
  );
}

/**
 * Summarizes `lines` (oldest first) as scan entries and advances `counters` over them. Compacted
 * entries carry `source` with their index in `lines`.
 */
export function scanEntriesOf(lines: readonly RolloutLine[], counters: LineCounters): ScanEntry[] {
  const entries: ScanEntry[] = [];
  lines.forEach((line, lineIndex) => {
    if (isHistoryRewrite(line)) counters.rewrites += 1;
    switch (line.type) {
      case "response_item":
        if (opensUntrackedTurn(line, counters.tasksStarted === true)) {
          pushEntry(entries, { type: "turn_started" });
        }
        pushEntry(entries, { type: "items", userTurn: isUserTurnBoundary(line.payload) });
        return;
      case "turn_context":
        pushEntry(entries, { type: "turn_context", item: line.payload });
        return;
      case "world_state": {
        const state = line.payload.state as JsonObject;
        const record: WorldStateRecord = line.payload.full
          ? { kind: "full", state }
          : { kind: "patch", patch: state };
        pushEntry(entries, { type: "world_state", record });
        return;
      }
      case "compacted": {
        const replacementHistory = replacementItems(line.payload);
        counters.compactions += 1;
        if (replacementHistory === undefined) counters.legacyCompactions += 1;
        const entry: CompactedEntry = {
          type: "compacted",
          replacement: replacementHistory !== undefined,
          rewritesThrough: counters.rewrites,
          legacyThrough: counters.legacyCompactions,
        };
        const windowNumber = line.payload.window_number;
        if (typeof windowNumber === "number") entry.windowNumber = windowNumber;
        if (replacementHistory !== undefined) entry.source = { lineIndex, replacementHistory };
        pushEntry(entries, entry);
        return;
      }
      case "event_msg": {
        const event = line.payload;
        switch (event.type) {
          case "task_started":
            counters.tasksStarted = true;
            pushEntry(entries, { type: "turn_started", turnId: event.turn_id });
            return;
          case "task_complete":
            pushEntry(entries, { type: "turn_complete", turnId: event.turn_id });
            return;
          case "turn_aborted":
            pushEntry(
              entries,
              typeof event.turn_id === "string"
                ? { type: "turn_aborted", turnId: event.turn_id }
                : { type: "turn_aborted" },
            );
            return;
          case "user_message":
            pushEntry(entries, { type: "items", userTurn: true });
            return;
          case "thread_rolled_back":
            pushEntry(entries, { type: "rollback", numTurns: event.num_turns });
            return;
          case "token_count":
            if (event.info !== null) counters.tokenInfo = event.info;
            return;
          default:
            return;
        }
      }
      case "unknown":
        if (line.original_type === "world_state") {
          pushEntry(entries, { type: "world_state", record: { kind: "unreadable" } });
        } else if (line.original_type === "response_item") {
          // An item type this build does not model: never a turn boundary, never recorded.
          pushEntry(entries, { type: "items", userTurn: false });
        } else if (interAgentMessage(line) !== undefined) {
          pushEntry(entries, { type: "items", userTurn: true });
        }
        return;
      default:
        return;
    }
  });
  return entries;
}

export type ReferenceState =
  | { kind: "never" }
  /** A compaction invalidated the baseline: the next turn reinjects full context. */
  | { kind: "cleared" }
  | { kind: "latest"; item: TurnContextItem };

/** World-state replay result: the baseline (undefined: none) and what went wrong on the way. */
export interface WorldStateReplay {
  baseline?: WorldStateSnapshot;
  warnings: string[];
}

/**
 * What the scan of the lines before a checkpoint's recent window concluded, in a form the scan of
 * newer lines can finish with. Each value comes with the ordinal (1 = newest) of the surviving
 * segment it came from, which tells how far the full scan would have read before its early exit.
 */
export interface OlderScanSummary {
  /** The newest surviving compaction with replacement history. */
  base?: { ordinal: number; rewritesThrough: number; legacyThrough: number };
  windowNumber?: { ordinal: number; value: number };
  previousTurnSettings?: { ordinal: number; value: PreviousTurnSettings };
  /** Without `item`: the newest such segment's compaction cleared the reference. */
  reference?: { ordinal: number; item?: TurnContextItem };
  /** Replay of those lines' surviving world-state records. */
  worldState: WorldStateReplay;
}

/** The base the scan settled on: counters always, the line itself when it is at hand. */
export interface BaseInfo {
  rewritesThrough: number;
  legacyThrough: number;
  source?: CompactedEntry["source"];
}

interface Segment {
  turnId: string | undefined;
  userTurn: boolean;
  /**
   * A full `world_state` follows the segment's newest compaction: the compaction re-injected
   * context (Spindle's automatic compaction before a turn), so its `turn_context` is a reference
   * like a user turn's. Undefined until the newest compaction is seen.
   */
  contextBaseline?: boolean;
  settings?: PreviousTurnSettings;
  reference: ReferenceState;
  base?: CompactedEntry;
  windowNumber?: number;
  /** Newest first. */
  replay: ReplayRecord[];
}

function newSegment(turnId?: string): Segment {
  return { turnId, userTurn: false, reference: { kind: "never" }, replay: [] };
}

/** Either side unknown, or equal (Codex `turn_ids_are_compatible`). */
function turnIdsCompatible(segmentTurnId: string | undefined, itemTurnId: string | undefined) {
  return segmentTurnId === undefined || itemTurnId === undefined || segmentTurnId === itemTurnId;
}

function settingsOf(item: TurnContextItem): PreviousTurnSettings {
  const settings: PreviousTurnSettings = { model: item.model };
  if (typeof item.comp_hash === "string") settings.comp_hash = item.comp_hash;
  if (typeof item.realtime_active === "boolean") settings.realtime_active = item.realtime_active;
  return settings;
}

const EMPTY_REPLAY: WorldStateReplay = { warnings: [] };

/**
 * The reverse scan (reference §6.1). Push entries newest first, then either `finish()` (the
 * oldest line was reached) or `closeWithOlder()` (the rest is summarized). `stopped` turns true
 * at Codex's early exit: a base, previous turn settings and a resolved reference are known, so
 * older lines cannot change the result.
 */
export class ReverseScan {
  pendingRollback: number;
  stopped = false;
  /** Surviving segments finalized so far. */
  survivors = 0;
  base?: { ordinal: number; info: BaseInfo };
  windowNumber?: { ordinal: number; value: number };
  previousTurnSettings?: { ordinal: number; value: PreviousTurnSettings };
  reference: ReferenceState = { kind: "never" };
  referenceOrdinal?: number;
  readonly #earlyExit: boolean;
  #active: Segment | undefined;
  /** Surviving segments' records, newest first. */
  #replay: ReplayRecord[] = [];
  /** Where replay starts when none of this scan's records is a compaction. */
  #replayStart: WorldStateReplay = EMPTY_REPLAY;

  constructor(opts: { earlyExit: boolean; pendingRollback?: number }) {
    this.#earlyExit = opts.earlyExit;
    this.pendingRollback = opts.pendingRollback ?? 0;
  }

  get hasActiveSegment(): boolean {
    return this.#active !== undefined;
  }

  #ensure(): Segment {
    this.#active ??= newSegment();
    return this.#active;
  }

  /** Processes one entry (the next older one). Returns true when it finalized a segment. */
  push(entry: ScanEntry): boolean {
    if (this.stopped) return false;
    let finalized = false;
    switch (entry.type) {
      case "compacted": {
        const segment = this.#ensure();
        // Seen backwards, the records pushed so far are newer than this compaction.
        segment.contextBaseline ??= segment.replay.some((record) => record.kind === "full");
        segment.replay.push({ kind: "reset" });
        if (segment.windowNumber === undefined && entry.windowNumber !== undefined) {
          segment.windowNumber = entry.windowNumber;
        }
        // Seen backwards, a compaction clears any older baseline unless a newer turn_context in
        // this segment has already re-established one.
        if (segment.reference.kind === "never") segment.reference = { kind: "cleared" };
        if (segment.base === undefined && entry.replacement) segment.base = entry;
        break;
      }
      case "rollback":
        this.pendingRollback += entry.numTurns;
        break;
      case "turn_complete": {
        const segment = this.#ensure();
        segment.turnId ??= entry.turnId;
        break;
      }
      case "turn_aborted":
        if (this.#active !== undefined) {
          this.#active.turnId ??= entry.turnId;
        } else if (entry.turnId !== undefined) {
          this.#active = newSegment(entry.turnId);
        }
        break;
      case "items": {
        const segment = this.#ensure();
        if (entry.userTurn) segment.userTurn = true;
        break;
      }
      case "turn_context": {
        const segment = this.#ensure();
        const turnId = entry.item.turn_id ?? undefined;
        segment.turnId ??= turnId;
        // Only a user message makes the segment a user turn; a turn_context alone just attaches
        // settings to it.
        if (turnIdsCompatible(segment.turnId, turnId)) {
          segment.settings = settingsOf(entry.item);
          if (segment.reference.kind === "never") {
            segment.reference = { kind: "latest", item: entry.item };
          }
        }
        break;
      }
      case "world_state":
        this.#ensure().replay.push(entry.record);
        break;
      case "turn_started": {
        const segment = this.#active;
        if (segment !== undefined && turnIdsCompatible(segment.turnId, entry.turnId)) {
          this.#active = undefined;
          this.#finalize(segment);
          finalized = true;
        }
        break;
      }
    }
    if (
      this.#earlyExit &&
      this.base !== undefined &&
      this.previousTurnSettings !== undefined &&
      this.reference.kind !== "never"
    ) {
      this.stopped = true;
    }
    return finalized;
  }

  #finalize(segment: Segment): void {
    // A rollback drops the newest surviving user turns: seen backwards, the next segments to be
    // finalized, with everything they carry.
    if (this.pendingRollback > 0) {
      if (segment.userTurn) this.pendingRollback -= 1;
      return;
    }
    this.survivors += 1;
    const ordinal = this.survivors;
    this.#replay.push(...segment.replay);
    if (this.base === undefined && segment.base !== undefined) {
      this.base = { ordinal, info: segment.base };
    }
    if (this.windowNumber === undefined && segment.windowNumber !== undefined) {
      this.windowNumber = { ordinal, value: segment.windowNumber };
    }
    if (
      this.previousTurnSettings === undefined &&
      segment.userTurn &&
      segment.settings !== undefined
    ) {
      this.previousTurnSettings = { ordinal, value: segment.settings };
    }
    if (
      this.reference.kind === "never" &&
      (segment.userTurn || segment.contextBaseline === true || segment.reference.kind === "cleared")
    ) {
      this.reference = segment.reference;
      if (segment.reference.kind !== "never") this.referenceOrdinal = ordinal;
    }
  }

  /** The oldest line has been pushed: finalizes the segment still open. */
  finish(): void {
    const segment = this.#active;
    if (segment === undefined) return;
    this.#active = undefined;
    this.#finalize(segment);
  }

  /**
   * Finishes the scan with the summary of the lines older than those pushed, as if it had gone
   * on through them. Only valid at a segment boundary with no rollback pending: the older lines'
   * segments then survive or not exactly as in their own scan.
   */
  closeWithOlder(older: OlderScanSummary): void {
    if (this.stopped) return;
    if (this.#active !== undefined || this.pendingRollback > 0) {
      throw new Error("[rollout] closeWithOlder needs a segment boundary with no pending rollback");
    }
    const offset = this.survivors;
    // The full scan would stop right after the older segment that resolves the last value this
    // scan still lacks; a window number further back is never read.
    const needed = [
      this.base === undefined ? older.base?.ordinal : 0,
      this.previousTurnSettings === undefined ? older.previousTurnSettings?.ordinal : 0,
      this.reference.kind === "never" ? older.reference?.ordinal : 0,
    ];
    const stopAt = Math.max(...needed.map((ordinal) => ordinal ?? Number.POSITIVE_INFINITY));
    if (this.base === undefined && older.base !== undefined) {
      const { ordinal, ...info } = older.base;
      this.base = { ordinal: offset + ordinal, info };
    }
    if (
      this.windowNumber === undefined &&
      older.windowNumber !== undefined &&
      older.windowNumber.ordinal <= stopAt
    ) {
      this.windowNumber = {
        ordinal: offset + older.windowNumber.ordinal,
        value: older.windowNumber.value,
      };
    }
    if (this.previousTurnSettings === undefined && older.previousTurnSettings !== undefined) {
      this.previousTurnSettings = {
        ordinal: offset + older.previousTurnSettings.ordinal,
        value: older.previousTurnSettings.value,
      };
    }
    if (this.reference.kind === "never" && older.reference !== undefined) {
      const item = older.reference.item;
      this.reference = item === undefined ? { kind: "cleared" } : { kind: "latest", item };
      this.referenceOrdinal = offset + older.reference.ordinal;
    }
    this.#replayStart = older.worldState;
    this.stopped = true;
  }

  /** World-state replay over the surviving records (reference §6.4). */
  worldState(): WorldStateReplay {
    return replayWorldState(this.#replay, this.#replayStart);
  }

  /** This scan's conclusions, for scans of newer lines to finish with. */
  toSummary(): OlderScanSummary {
    const summary: OlderScanSummary = { worldState: this.worldState() };
    if (this.base !== undefined) {
      summary.base = {
        ordinal: this.base.ordinal,
        rewritesThrough: this.base.info.rewritesThrough,
        legacyThrough: this.base.info.legacyThrough,
      };
    }
    if (this.windowNumber !== undefined) summary.windowNumber = { ...this.windowNumber };
    if (this.previousTurnSettings !== undefined) {
      summary.previousTurnSettings = { ...this.previousTurnSettings };
    }
    if (this.reference.kind !== "never" && this.referenceOrdinal !== undefined) {
      summary.reference =
        this.reference.kind === "latest"
          ? { ordinal: this.referenceOrdinal, item: this.reference.item }
          : { ordinal: this.referenceOrdinal };
    }
    return summary;
  }
}

/**
 * Replays world-state records chronologically (reference §6.4): a full snapshot sets the
 * baseline, a patch applies to it (RFC 7386 merge patch) or is skipped with a warning when there
 * is none, an unreadable record or a failed patch clears it with a warning, a compaction resets
 * it. Records older than the newest compaction cannot affect the result and are not replayed, so
 * they raise no warnings (Codex logs those too; its warnings are log lines, not state).
 */
function replayWorldState(
  newestFirst: readonly ReplayRecord[],
  start: WorldStateReplay,
): WorldStateReplay {
  const reset = newestFirst.findIndex((record) => record.kind === "reset");
  let baseline = reset >= 0 ? undefined : start.baseline;
  const warnings = reset >= 0 ? [] : [...start.warnings];
  for (let i = (reset >= 0 ? reset : newestFirst.length) - 1; i >= 0; i--) {
    const record = newestFirst[i];
    switch (record?.kind) {
      case "full":
        baseline = record.state;
        break;
      case "patch":
        if (baseline === undefined) {
          warnings.push("world-state patch ignored: no full snapshot precedes it");
          break;
        }
        try {
          baseline = applyMergePatch(baseline, record.patch);
        } catch (error) {
          const detail = error instanceof Error ? error.message : String(error);
          warnings.push(`world-state baseline cleared: a patch could not be applied (${detail})`);
          baseline = undefined;
        }
        break;
      case "unreadable":
        warnings.push("world-state baseline cleared: a world_state line could not be read");
        baseline = undefined;
        break;
      default:
        break;
    }
  }
  const result: WorldStateReplay = { warnings };
  if (baseline !== undefined) result.baseline = baseline;
  return result;
}
