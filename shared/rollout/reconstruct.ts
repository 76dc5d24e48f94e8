import { isContextualUserMessageContent } from "../context/index.ts";
import {
  approxTokensFromByteCount,
  ContextManager,
  type ContextManagerState,
  type TruncationPolicy,
  truncateToolOutput,
} from "../context-manager/index.ts";
import type {
  MessageItem,
  PreviousTurnSettings,
  ResponseItem,
  RolloutLine,
  WorldStateSnapshot,
} from "../protocol/index.ts";
import {
  interAgentMessage,
  type LineCounters,
  ReverseScan,
  replacementItems,
  scanEntriesOf,
} from "./scan.ts";

export interface ReconstructOptions {
  /** The policy tool outputs are truncated with as history is re-recorded (reference §6.2). */
  truncation: TruncationPolicy;
}

/** The state a thread resumes with, rebuilt from its rollout (reference §6.3). */
export interface ReconstructedState {
  /**
   * The ContextManager to resume with: items, historyVersion, tokenInfo (the newest non-null
   * `token_count`), referenceContextItem and worldStateBaseline. Undefined fields are omitted.
   */
  history: ContextManagerState;
  /** What the newest surviving user turn ran with. Undefined: no such turn recorded settings. */
  previousTurnSettings?: PreviousTurnSettings;
  /** The window number of the newest surviving compaction, else the count of compactions. */
  windowNumber: number;
  /**
   * History rewrites in the whole rollout (`isHistoryRewrite`). Unlike `history.historyVersion`,
   * which counts from the base (as Codex resumes), it is the same before and after a reload.
   */
  rewrites: number;
  /** Problems met on the way (world-state replay); the state is still usable. */
  warnings: string[];
}

/** Codex keeps up to this many tokens of user messages when rebuilding a legacy compaction. */
const LEGACY_COMPACTION_USER_MESSAGE_MAX_TOKENS = 20_000;
const EMPTY_SUMMARY_TEXT = "(no summary available)";

const utf8 = new TextEncoder();

function userMessage(text: string): MessageItem {
  return { type: "message", role: "user", content: [{ type: "input_text", text }] };
}

/** The texts of the real (non-contextual) user messages in `items`, oldest first. */
function collectUserMessages(items: readonly ResponseItem[]): string[] {
  const texts: string[] = [];
  for (const item of items) {
    if (item.type !== "message" || item.role !== "user") continue;
    if (isContextualUserMessageContent(item.content)) continue;
    const parts = item.content.flatMap((part) =>
      part.type === "input_text" && part.text !== "" ? [part.text] : [],
    );
    if (parts.length > 0) texts.push(parts.join("\n"));
  }
  return texts;
}

/**
 * History after a compaction that recorded no replacement history (reference §6.2): the newest
 * user messages that fit a 20,000-token budget (the one that overflows is middle-truncated),
 * oldest first, then the summary as a user message.
 */
function legacyCompactedHistory(items: readonly ResponseItem[], summary: string): ResponseItem[] {
  const selected: string[] = [];
  let remainingTokens = LEGACY_COMPACTION_USER_MESSAGE_MAX_TOKENS;
  const messages = collectUserMessages(items);
  for (let i = messages.length - 1; i >= 0 && remainingTokens > 0; i--) {
    const text = messages[i] ?? "";
    const tokens = approxTokensFromByteCount(utf8.encode(text).length);
    if (tokens <= remainingTokens) {
      selected.push(text);
      remainingTokens -= tokens;
    } else {
      const truncated = truncateToolOutput(text, { mode: "tokens", limit: remainingTokens });
      selected.push(typeof truncated === "string" ? truncated : text);
      break;
    }
  }
  selected.reverse();
  return [...selected.map(userMessage), userMessage(summary === "" ? EMPTY_SUMMARY_TEXT : summary)];
}

/**
 * Forward materialization (reference §6.2) of `lines[from..]` into `history`. Returns true if a
 * compaction without replacement history was replayed.
 */
export function materialize(
  history: ContextManager,
  lines: readonly RolloutLine[],
  from: number,
  policy: TruncationPolicy,
): boolean {
  let sawLegacyCompaction = false;
  for (let i = from; i < lines.length; i++) {
    const line = lines[i];
    if (line === undefined) continue;
    switch (line.type) {
      case "response_item":
        history.recordItems([line.payload], policy);
        break;
      case "compacted": {
        const replacement = replacementItems(line.payload);
        if (replacement !== undefined) {
          history.replace(replacement);
        } else {
          sawLegacyCompaction = true;
          history.replace(legacyCompactedHistory(history.items, line.payload.message));
        }
        break;
      }
      case "event_msg":
        if (line.payload.type === "thread_rolled_back") {
          history.dropLastNUserTurns(line.payload.num_turns);
        }
        break;
      case "unknown": {
        const message = interAgentMessage(line);
        if (message !== undefined) history.recordItems([message], policy);
        break;
      }
      default:
        break;
    }
  }
  return sawLegacyCompaction;
}

/** Puts the scan's conclusions on the materialized history (reference §6.3). */
export function assembleState(
  history: ContextManager,
  scan: ReverseScan,
  sawLegacyCompaction: boolean,
  counters: LineCounters,
): ReconstructedState {
  const worldState = scan.worldState();
  history.tokenInfo = counters.tokenInfo;
  // Legacy compactions leave no replacement history to re-establish a baseline on, so the next
  // turn reinjects full context.
  history.referenceContextItem =
    scan.reference.kind === "latest" && !sawLegacyCompaction ? scan.reference.item : undefined;
  history.worldStateBaseline = worldState.baseline;
  const state: ReconstructedState = {
    history: history.toState(),
    windowNumber: scan.windowNumber?.value ?? counters.compactions,
    rewrites: counters.rewrites,
    warnings: worldState.warnings,
  };
  if (scan.previousTurnSettings !== undefined) {
    state.previousTurnSettings = scan.previousTurnSettings.value;
  }
  return state;
}

/**
 * Rebuilds a thread's state from its whole rollout (reference §6), as Codex does on resume:
 *
 * 1. A reverse scan groups lines into turn segments (closed by a matching `task_started`),
 *    drops the segments a rollback removed, and takes previous turn settings and the reference
 *    context item from the newest surviving user turn (a compaction newer than a turn's
 *    `turn_context` clears the reference), the newest surviving compaction with replacement
 *    history as the history base, and the surviving world-state records. It stops early once
 *    base, settings and reference are all known.
 * 2. History is re-recorded forward from that base: items recorded (truncated with
 *    `opts.truncation`), compactions replace it, rollbacks drop user turns.
 * 3. The world-state baseline is replayed from the surviving records (§6.4); a corrupt
 *    `world_state` line clears it with a warning and never fails the rebuild (design §10
 *    invariant 8). Token info is the newest non-null `token_count`.
 *
 * A bare `turn_context` without a user message hydrates nothing; the pairing of a `turn_context`
 * with its turn is by `turn_id`, so it may come before or after the user message.
 */
export function reconstructRollout(
  lines: readonly RolloutLine[],
  opts: ReconstructOptions,
): ReconstructedState {
  const counters: LineCounters = { rewrites: 0, legacyCompactions: 0, compactions: 0 };
  const entries = scanEntriesOf(lines, counters);
  const scan = new ReverseScan({ earlyExit: true });
  for (let i = entries.length - 1; i >= 0 && !scan.stopped; i--) {
    const entry = entries[i];
    if (entry !== undefined) scan.push(entry);
  }
  scan.finish();
  const history = new ContextManager();
  const source = scan.base?.info.source;
  if (source !== undefined) history.replace(source.replacementHistory);
  const from = source === undefined ? 0 : source.lineIndex + 1;
  const sawLegacyCompaction = materialize(history, lines, from, opts.truncation);
  return assembleState(history, scan, sawLegacyCompaction, counters);
}

/**
 * The world-state baseline a rollout replays to (step 3 of `reconstructRollout`, which gives the
 * same), without re-recording its history: for reading the settings it holds.
 */
export function worldStateOf(lines: readonly RolloutLine[]): WorldStateSnapshot | undefined {
  const scan = new ReverseScan({ earlyExit: false });
  const entries = scanEntriesOf(lines, { rewrites: 0, legacyCompactions: 0, compactions: 0 });
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i];
    if (entry !== undefined) scan.push(entry);
  }
  scan.finish();
  return scan.worldState().baseline;
}
