import { fragment, fragmentToMessage, MARKERS, matchesMarkers } from "../context/index.ts";
import { type ContextManager, isModelGeneratedItem } from "../context-manager/index.ts";
import type { MessageItem, ResponseItem } from "../protocol/index.ts";

/** How many items the backward search reads at a time. */
const SCAN_CHUNK = 64;

/**
 * Whether the current-time reminder is due before the next model request (Codex's
 * `CurrentTimeReminderState`, `core/src/session/time_reminder.rs`): when history holds no
 * reminder (the first request, or a compaction started a new window), or when at least
 * `interval` model requests ran since the last one. Read from history alone (a request is a run
 * of model-generated items), so a thread rebuilt from its rollout decides alike.
 */
export function timeReminderDue(history: ContextManager, interval: number): boolean {
  let requests = 0;
  let inRun = false;
  for (let end = history.length; end > 0; end -= SCAN_CHUNK) {
    const items = history.slice(Math.max(0, end - SCAN_CHUNK), end);
    for (let i = items.length - 1; i >= 0; i--) {
      const item = items[i] as ResponseItem;
      if (isTimeReminder(item)) return requests >= interval;
      const generated = isModelGeneratedItem(item);
      if (generated && !inRun) requests += 1;
      inRun = generated;
      if (requests >= interval) return true;
    }
  }
  return true;
}

/** The reminder: a developer message with the time in UTC (our wording; model-visible). */
export function timeReminderMessage(nowMs: number): MessageItem {
  const time = new Date(nowMs).toISOString().slice(0, 19).replace("T", " ");
  const { start, end } = MARKERS.currentTime;
  return fragmentToMessage(fragment("developer", start, end, `\nThe time is now ${time} UTC.\n`));
}

function isTimeReminder(item: ResponseItem): boolean {
  if (item.type !== "message" || item.role !== "developer") return false;
  const first = item.content[0];
  return (
    first?.type === "input_text" &&
    matchesMarkers(MARKERS.currentTime.start, MARKERS.currentTime.end, first.text)
  );
}
