import { MAX_ADDITIONAL_CONTEXT_ENTRIES } from "../api/index.ts";
import { estimateTextTokenCount, truncateText } from "../context-manager/index.ts";
import { compareCodePoints } from "../world-state/index.ts";

/** Codex's bounds on a turn's additional context (`core/src/context/additional_context.rs`). */
const MAX_ADDITIONAL_CONTEXT_VALUE_TOKENS = 1_000;
const MAX_ADDITIONAL_CONTEXT_TOTAL_TOKENS = 8_000;

/**
 * A turn's additional context as the model gets it, in key order: each value with `&`, `<` and
 * `>` escaped (so no value closes its fragment) and middle-truncated to 1,000 tokens; entries
 * that would take the whole past 8,000 tokens are left out, as Codex leaves them out.
 */
export function boundedAdditionalContext(
  entries: Readonly<Record<string, string>>,
): Record<string, string> {
  const bounded: Record<string, string> = {};
  let total = 0;
  const sorted = Object.entries(entries).sort(([a], [b]) => compareCodePoints(a, b));
  for (const [key, value] of sorted.slice(0, MAX_ADDITIONAL_CONTEXT_ENTRIES)) {
    const escaped = value.replace(/[&<>]/g, (ch) => ESCAPES[ch] ?? ch);
    const text = truncateText(escaped, {
      mode: "tokens",
      limit: MAX_ADDITIONAL_CONTEXT_VALUE_TOKENS,
    });
    const tokens = estimateTextTokenCount(`<external_${key}>${text}</external_${key}>`);
    if (total + tokens > MAX_ADDITIONAL_CONTEXT_TOTAL_TOKENS) continue;
    total += tokens;
    bounded[key] = text;
  }
  return bounded;
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;" };
