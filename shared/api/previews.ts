/** A preview's length in UTF-16 code units: longer text is cut to this, the last one `…`. */
export const TURN_PREVIEW_MAX_CHARS = 200;

/**
 * A one-line preview of `text` for a list: runs of whitespace (newlines too) become one space,
 * and text longer than `TURN_PREVIEW_MAX_CHARS` keeps what fits before a `…` (without a half of
 * a surrogate pair or a trailing space).
 */
export function previewText(text: string): string {
  const collapsed = text.replace(/\s+/g, " ").trim();
  if (collapsed.length <= TURN_PREVIEW_MAX_CHARS) return collapsed;
  let kept = collapsed.slice(0, TURN_PREVIEW_MAX_CHARS - 1);
  if (/[\uD800-\uDBFF]$/.test(kept)) kept = kept.slice(0, -1);
  return `${kept.trimEnd()}…`;
}
