import { utf8ToBytes } from "@noble/hashes/utils.js";
import { isUserTurnBoundary } from "../context/index.ts";
import { approxTokensFromByteCount, truncateToolOutput } from "../context-manager/index.ts";
import type {
  COMPACTION_TRIGGERS,
  InputText,
  MessageItem,
  ResponseItem,
} from "../protocol/index.ts";
import { isSummaryMessage, summaryMessage } from "./notices.ts";

/**
 * What started a compaction: the API (`manual`), the context filling up (`auto`) before a turn or
 * between two sampling steps of one, or a large thread left idle until shortly before its prompt
 * cache expires (`idle`, see `idle-compaction.ts`).
 */
export type CompactionTrigger = (typeof COMPACTION_TRIGGERS)[number];

/** Budget for the user messages a compaction keeps verbatim (Codex keeps 20k tokens). */
export const COMPACT_USER_MESSAGES_MAX_TOKENS = 20_000;
/**
 * The kept user messages never take more than this share of the model's window, so a small window
 * (`spindle-local-lite`, 16k) is not refilled by the compaction itself.
 */
export const COMPACT_USER_MESSAGES_MAX_WINDOW_SHARE = 0.25;
/** Auto-compaction runs when the estimated context passes this share of the window. */
export const DEFAULT_AUTO_COMPACT_FRACTION = 0.9;

/** The token budget of the kept user messages for a model with this window. */
export function compactUserMessagesBudgetTokens(contextWindowTokens: number): number {
  return Math.min(
    COMPACT_USER_MESSAGES_MAX_TOKENS,
    Math.floor(contextWindowTokens * COMPACT_USER_MESSAGES_MAX_WINDOW_SHARE),
  );
}

/**
 * Whether a turn must compact first: the estimated context (`history.estimateTokenCount` with
 * the turn's base instructions) is above `fraction × window`. Strictly above: at the limit, no.
 */
export function exceedsAutoCompactLimit(
  estimatedTokens: number,
  fraction: number,
  contextWindowTokens: number,
): boolean {
  return estimatedTokens > fraction * contextWindowTokens;
}

function textTokens(parts: readonly InputText[]): number {
  return approxTokensFromByteCount(parts.reduce((n, p) => n + utf8ToBytes(p.text).length, 0));
}

/**
 * The real user messages of history, oldest first, text parts only: user-role turn boundaries
 * (contextual fragments are not) that are not earlier compaction summaries. Images are dropped;
 * a message with no text is skipped. Each result is a fresh message without id or metadata.
 */
export function collectUserMessages(items: readonly ResponseItem[]): MessageItem[] {
  const out: MessageItem[] = [];
  for (const item of items) {
    if (item.type !== "message" || item.role !== "user") continue;
    if (!isUserTurnBoundary(item) || isSummaryMessage(item)) continue;
    const texts = item.content.flatMap((p) =>
      p.type === "input_text" ? [{ type: "input_text" as const, text: p.text }] : [],
    );
    if (texts.length > 0) out.push({ type: "message", role: "user", content: texts });
  }
  return out;
}

/**
 * Where a compaction re-injects context into its replacement history, as Codex places it for
 * compactions that keep the summary last: right above the last real user message, else above
 * the summary (no user message was kept), else at the end.
 */
export function withContextBeforeLastRealUser(
  replacement: readonly ResponseItem[],
  context: readonly ResponseItem[],
): ResponseItem[] {
  let at = -1;
  let summaryAt = -1;
  for (let i = replacement.length - 1; i >= 0 && at < 0; i--) {
    const item = replacement[i];
    if (item?.type !== "message" || item.role !== "user") continue;
    if (!isSummaryMessage(item)) {
      if (isUserTurnBoundary(item)) at = i;
    } else if (summaryAt < 0) {
      summaryAt = i;
    }
  }
  if (at < 0) at = summaryAt < 0 ? replacement.length : summaryAt;
  return [...replacement.slice(0, at), ...context, ...replacement.slice(at)];
}

/**
 * The replacement history of a compaction (reference §5.6): the newest `userMessages` that fit
 * `budgetTokens` (taken newest first; the first one that does not fit is middle-truncated to what
 * is left, its parts joined by newlines, and older ones are dropped), back in chronological order,
 * then one user message holding `summary` behind `SUMMARY_PREFIX`.
 *
 * The result holds only user messages, so no tool call can be separated from its output.
 */
export function buildCompactedHistory(
  userMessages: readonly MessageItem[],
  summary: string,
  budgetTokens: number,
): MessageItem[] {
  const kept: MessageItem[] = [];
  let remaining = Math.max(0, Math.floor(budgetTokens));
  for (let i = userMessages.length - 1; i >= 0 && remaining > 0; i--) {
    const message = userMessages[i];
    if (message === undefined) continue;
    const texts = message.content.filter((p): p is InputText => p.type === "input_text");
    const tokens = textTokens(texts);
    if (tokens <= remaining) {
      kept.push({ type: "message", role: "user", content: texts.map((p) => ({ ...p })) });
      remaining -= tokens;
      continue;
    }
    const joined = texts.map((p) => p.text).join("\n");
    const text = truncateToolOutput(joined, { mode: "tokens", limit: remaining });
    if (typeof text === "string") {
      kept.push({ type: "message", role: "user", content: [{ type: "input_text", text }] });
    }
    break;
  }
  kept.reverse();
  kept.push(summaryMessage(summary));
  return kept;
}
