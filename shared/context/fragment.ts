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
  /**
   * Sent as a message of its own, never merged with other fragments (Codex's `Standalone`):
   * before the merged messages (the model switch) or after them (a turn's additional context).
   */
  readonly standalone?: "before" | "after";
}

export function fragment(
  role: FragmentRole,
  startMarker: string,
  endMarker: string,
  body: string,
): Fragment {
  return { role, startMarker, endMarker, body };
}

/** The fragment with Codex's `Standalone` placement: a message of its own. */
export function standalone(f: Fragment, where: "before" | "after" = "before"): Fragment {
  return { ...f, standalone: where };
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
  // Called for every history message on each turn's diff: compare in place, without copies.
  let first = 0;
  while (first < text.length && isSpace(text.charCodeAt(first))) first++;
  let last = text.length;
  while (last > first && isSpace(text.charCodeAt(last - 1))) last--;
  return (
    last - first >= start.length &&
    last - first >= end.length &&
    equalsAsciiFolded(text, first, start) &&
    equalsAsciiFolded(text, last - end.length, end)
  );
}

/** `text[at…]` equals `marker`, ASCII letters compared case-insensitively. */
function equalsAsciiFolded(text: string, at: number, marker: string): boolean {
  for (let i = 0; i < marker.length; i++) {
    if (foldAscii(text.charCodeAt(at + i)) !== foldAscii(marker.charCodeAt(i))) return false;
  }
  return true;
}

function foldAscii(code: number): number {
  return code >= 65 && code <= 90 ? code + 32 : code;
}

/** The code units `String.prototype.trim` removes (ECMAScript WhiteSpace and LineTerminator). */
function isSpace(code: number): boolean {
  return (
    (code >= 9 && code <= 13) ||
    code === 32 ||
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000 ||
    code === 0xfeff
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
