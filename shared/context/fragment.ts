import type { MessageItem } from "../protocol/index.ts";

export type FragmentRole = "user" | "developer";

/**
 * A piece of model-visible context text (reference §2.1): a role, start/end markers and a body.
 * `render()` is `start + body + end`; the body carries any newlines it needs.
 */
export interface Fragment {
  readonly role: FragmentRole;
  readonly startMarker: string;
  readonly endMarker: string;
  readonly body: string;
}

export function fragment(
  role: FragmentRole,
  startMarker: string,
  endMarker: string,
  body: string,
): Fragment {
  return { role, startMarker, endMarker, body };
}

export function renderFragment(f: Fragment): string {
  return f.startMarker + f.body + f.endMarker;
}

/** Lowercases ASCII letters only: markers compare ASCII case-insensitively, as in Codex. */
export function asciiLower(text: string): string {
  return text.replace(/[A-Z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 32));
}

/**
 * True when `text` is framed by the markers: after trimming, it starts with `start` and ends with
 * `end`, both compared ASCII case-insensitively. Empty markers never match.
 */
export function matchesMarkers(start: string, end: string, text: string): boolean {
  if (start === "" || end === "") return false;
  const head = text.trimStart();
  const tail = text.trimEnd();
  return (
    head.length >= start.length &&
    tail.length >= end.length &&
    asciiLower(head.slice(0, start.length)) === asciiLower(start) &&
    asciiLower(tail.slice(tail.length - end.length)) === asciiLower(end)
  );
}

export function fragmentMatchesText(f: Fragment, text: string): boolean {
  return matchesMarkers(f.startMarker, f.endMarker, text);
}

/** A single-part message holding the rendered fragment. */
export function fragmentToMessage(f: Fragment): MessageItem {
  return {
    type: "message",
    role: f.role,
    content: [{ type: "input_text", text: renderFragment(f) }],
  };
}

/** Several fragments of one role merged into one message, one `input_text` part each. */
export function fragmentsToMessage(
  role: FragmentRole,
  fragments: readonly Fragment[],
): MessageItem {
  return {
    type: "message",
    role,
    content: fragments.map((f) => ({ type: "input_text" as const, text: renderFragment(f) })),
  };
}
