import type { FragmentRole } from "../../context/index.ts";
import type { ResponseItem } from "../../protocol/index.ts";

/**
 * True when some `input_text` part of a user or developer message in `items` satisfies
 * `accepts(role, text)`. Other roles and part types are never section fragments.
 */
export function someRetainedText(
  items: readonly ResponseItem[],
  accepts: (role: FragmentRole, text: string) => boolean,
): boolean {
  return items.some((item) => {
    if (item.type !== "message") return false;
    const role = item.role;
    if (role !== "user" && role !== "developer") return false;
    return item.content.some((part) => part.type === "input_text" && accepts(role, part.text));
  });
}
