/**
 * Durable Object SQLite limits each string or BLOB value to 2 MB, and local workerd enforces it
 * too (`SQLITE_TOOBIG`). Text that may be longer (rollout lines, events, queued turns) is stored
 * in parts of at most this many UTF-16 code units: at most 3 UTF-8 bytes each, 1.5 MB a part.
 */
export const TEXT_PART_MAX_CHARS = 500_000;

/** Splits text into parts, never between the two halves of a surrogate pair. */
export function splitText(text: string, max = TEXT_PART_MAX_CHARS): string[] {
  const parts: string[] = [];
  let start = 0;
  while (text.length - start > max) {
    let end = start + max;
    const code = text.charCodeAt(end);
    if (code >= 0xdc00 && code <= 0xdfff) end -= 1;
    parts.push(text.slice(start, end));
    start = end;
  }
  parts.push(text.slice(start));
  return parts;
}

/**
 * Appends each continuation part (`part` ≥ 1, rows ordered by key then part) to the text of its
 * key in `texts`, which holds every key's first part.
 */
export function appendParts<K>(
  texts: Map<K, string>,
  rows: Iterable<{ key: K; text: string }>,
): Map<K, string> {
  for (const row of rows) {
    const first = texts.get(row.key);
    if (first !== undefined) texts.set(row.key, first + row.text);
  }
  return texts;
}
