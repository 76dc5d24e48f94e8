import type { FragmentRole } from "../../context/index.ts";
import type { ResponseItem } from "../../protocol/index.ts";

/**
 * True when some `input_text` part of a user or developer message in `items` satisfies
 * `accepts(role, text)`. Other roles and part types are never section fragments.
 *
 * Plain loops: this runs over the whole history for several sections every turn, and a closure
 * per item (`items.some(… content.some(…))`) was most of a long thread's per-turn garbage.
 */
export function someRetainedText(
  items: readonly ResponseItem[],
  accepts: (role: FragmentRole, text: string) => boolean,
): boolean {
  for (const item of items) {
    if (item.type !== "message") continue;
    const role = item.role;
    if (role !== "user" && role !== "developer") continue;
    for (const part of item.content) {
      if (part.type === "input_text" && accepts(role, part.text)) return true;
    }
  }
  return false;
}
