import type { ResponseItem } from "../protocol/index.ts";
import type { FragmentRole } from "./fragment.ts";

/** What a text a world-state section looks for in history is accepted by. */
export type RetainedTextMatcher = (role: FragmentRole, text: string) => boolean;

/**
 * History as the world-state diff searches it for the fragments sections injected earlier.
 * Sections look only for contextual fragments (text framed by their markers), so a history that
 * keeps runs unread may answer from those runs' contextual parts alone (`ContextManager`).
 */
export interface RetainedHistory {
  /** True when some `input_text` part of a user or developer message satisfies `accepts`. */
  someRetainedText(accepts: RetainedTextMatcher): boolean;
}

/** `items` as `RetainedHistory`, searched whole. */
export function retainedItems(items: readonly ResponseItem[]): RetainedHistory {
  return { someRetainedText: (accepts) => someRetainedText(items, accepts) };
}

/**
 * True when some `input_text` part of a user or developer message in `items` satisfies
 * `accepts(role, text)`. Other roles and part types are never section fragments.
 *
 * Indexed loops: this runs over the whole history for several sections every turn, and both
 * `items.some(… content.some(…))` (a closure per item) and `for…of` (an iterator result per step
 * until the function is optimized) made most of a long thread's per-turn garbage.
 */
export function someRetainedText(
  items: readonly ResponseItem[],
  accepts: RetainedTextMatcher,
): boolean {
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as ResponseItem;
    if (item.type !== "message") continue;
    const role = item.role;
    if (role !== "user" && role !== "developer") continue;
    const content = item.content;
    for (let j = 0; j < content.length; j++) {
      const part = content[j] as (typeof content)[number];
      if (part.type === "input_text" && accepts(role, part.text)) return true;
    }
  }
  return false;
}
