import type { ContentItem, ResponseItem } from "../protocol/index.ts";
import { asciiLower, matchesMarkers } from "./fragment.ts";
import { CONTEXTUAL_DEVELOPER_PREFIXES, CONTEXTUAL_USER_MARKERS } from "./markers.ts";

/** An `input_text` part framed by a registered user fragment's markers. */
export function isContextualUserFragment(part: ContentItem): boolean {
  if (part.type !== "input_text") return false;
  return CONTEXTUAL_USER_MARKERS.some((m) => matchesMarkers(m.start, m.end, part.text));
}

/** True if **any** part is contextual (reference §2.3: any, not all). */
export function isContextualUserMessageContent(parts: readonly ContentItem[]): boolean {
  return parts.some(isContextualUserFragment);
}

/** An `input_text` part that starts (after leading whitespace, ASCII case-insensitive) with a dev prefix. */
export function isContextualDevFragment(part: ContentItem): boolean {
  if (part.type !== "input_text") return false;
  const head = asciiLower(part.text.trimStart());
  return CONTEXTUAL_DEVELOPER_PREFIXES.some((p) => head.startsWith(asciiLower(p)));
}

export function isContextualDevMessageContent(parts: readonly ContentItem[]): boolean {
  return parts.some(isContextualDevFragment);
}

/** True if any part is not a contextual dev fragment (images included). */
export function hasNonContextualDevMessageContent(parts: readonly ContentItem[]): boolean {
  return parts.some((p) => !isContextualDevFragment(p));
}

/**
 * An assistant message whose text is a JSON-serialized inter-agent communication
 * (`{author, recipient, content, …}`). The legacy plain-text envelope does not count.
 */
export function isInterAgentMessageContent(parts: readonly ContentItem[]): boolean {
  const text = parts.length === 1 && parts[0]?.type === "output_text" ? parts[0].text : undefined;
  if (text === undefined || !text.trimStart().startsWith("{")) return false;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
    const v = value as Record<string, unknown>;
    return (
      typeof v.author === "string" &&
      typeof v.recipient === "string" &&
      typeof v.content === "string"
    );
  } catch {
    return false;
  }
}

/**
 * Where a user turn starts, for rollback counting (reference §2.3): a user message that is not
 * contextual, or an assistant message carrying an inter-agent communication. Developer messages,
 * contextual user messages and tool items never are.
 */
export function isUserTurnBoundary(item: ResponseItem): boolean {
  if (item.type !== "message") return false;
  if (item.role === "user") return !isContextualUserMessageContent(item.content);
  if (item.role === "assistant") return isInterAgentMessageContent(item.content);
  return false;
}
