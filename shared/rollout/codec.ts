import {
  isPlainObject,
  parseJsonWithin,
  type RolloutLine,
  RolloutLineSchema,
} from "../protocol/index.ts";

/**
 * The rollout JSONL codec: one `RolloutLine` per line, in the Codex envelope
 * `{"timestamp":…,"ordinal"?:…,"type":…,"payload":…}` (reference §1.1).
 *
 * Round trip: a line decoded here encodes back to the same JSON, key order included, except for
 * the accepted aliases (`turn_started`, `turn_complete`, `compaction_summary`, a numeric
 * compaction `window_id`), which come back in their canonical spelling, and for items of a type
 * this build does not know inside a compaction's replacement history (Codex's `additional_tools`),
 * which decode to their type alone. Line types, event types and response-item lines of types this
 * build does not know keep their original `type` and payload. Imported and copied lines are
 * stored as their text, never re-encoded, so an imported Codex rollout exports unchanged.
 */

/** A line that could not be decoded. The message names the 1-based line number and the reason. */
export class RolloutDecodeError extends Error {
  readonly lineNumber: number;
  readonly reason: string;

  constructor(lineNumber: number, reason: string) {
    super(`rollout line ${lineNumber}: ${reason}`);
    this.name = "RolloutDecodeError";
    this.lineNumber = lineNumber;
    this.reason = reason;
  }
}

/** Line types with a schema of their own; a payload that does not fit one decodes as `unknown`. */
const KNOWN_LINE_TYPES: ReadonlySet<string> = new Set([
  "session_meta",
  "response_item",
  "turn_context",
  "world_state",
  "compacted",
  "event_msg",
  "spindle_config",
  "spindle_request",
]);

/**
 * `parsed` with its object keys in the order they have in `raw`, recursively; keys `raw` lacks
 * (renamed or added by a schema transform) come last. The schemas list known fields first, so
 * without this a field they do not know would move behind them.
 */
function inSourceOrder(parsed: unknown, raw: unknown): unknown {
  if (Array.isArray(parsed)) {
    if (!Array.isArray(raw) || raw.length !== parsed.length) return parsed;
    return parsed.map((element, index) => inSourceOrder(element, raw[index]));
  }
  if (!isPlainObject(parsed) || !isPlainObject(raw)) return parsed;
  const entries: [string, unknown][] = [];
  for (const key of Object.keys(raw)) {
    if (Object.hasOwn(parsed, key)) entries.push([key, inSourceOrder(parsed[key], raw[key])]);
  }
  for (const key of Object.keys(parsed)) {
    if (!Object.hasOwn(raw, key)) entries.push([key, parsed[key]]);
  }
  // `fromEntries` defines own members, so a `__proto__` key from the JSON stays data.
  return Object.fromEntries(entries);
}

/** Copies `value`, writing `type` back as `originalType` in place and dropping `original_type`. */
function restoreOriginalType(
  value: Record<string, unknown>,
  originalType: unknown,
): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(value).flatMap(([key, member]) =>
      key === "original_type" ? [] : [[key, key === "type" ? originalType : member]],
    ),
  );
}

/** One JSON line without the trailing newline. */
export function encodeRolloutLine(line: RolloutLine): string {
  if (line.type === "unknown") {
    return JSON.stringify(restoreOriginalType(line, line.original_type));
  }
  if (line.type === "event_msg" && line.payload.type === "other") {
    const payload = restoreOriginalType(line.payload, line.payload.original_type);
    return JSON.stringify({ ...line, payload });
  }
  return JSON.stringify(line);
}

/** The lines as JSONL: each line followed by `\n`. */
export function encodeRolloutJsonl(lines: readonly RolloutLine[]): string {
  let out = "";
  for (const line of lines) out += `${encodeRolloutLine(line)}\n`;
  return out;
}

/**
 * Codex 0.2–0.31 wrote rollouts before the envelope: a header `{id, timestamp, instructions?,
 * git?}` without `type`, then bare items and `{"record_type": "state"}` lines. No Codex since 0.32
 * reads them and none converts them; Spindle does not import them either (docs/api.md).
 */
export const LEGACY_ROLLOUT_REASON =
  "this is a legacy Codex rollout (written by Codex 0.2–0.31, before session_meta lines); " +
  "only Codex 0.8–0.31 can read it and no Codex release converts it to the current format, " +
  "so it cannot be imported: Spindle imports rollouts written by Codex 0.32 and later";

function isLegacyLine(value: Record<string, unknown>): boolean {
  if (Object.hasOwn(value, "record_type")) return true;
  return (
    !Object.hasOwn(value, "type") &&
    typeof value.id === "string" &&
    typeof value.timestamp === "string" &&
    !Object.hasOwn(value, "payload")
  );
}

function envelopeProblem(value: unknown): string | undefined {
  if (!isPlainObject(value)) return "expected a JSON object";
  if (isLegacyLine(value)) return LEGACY_ROLLOUT_REASON;
  if (typeof value.timestamp !== "string") return 'expected a string "timestamp"';
  if (typeof value.type !== "string") return 'expected a string "type"';
  if (!Object.hasOwn(value, "payload")) return 'missing "payload"';
  const ordinal = value.ordinal;
  if (ordinal !== undefined && ordinal !== null && typeof ordinal !== "number") {
    return '"ordinal" must be a number';
  }
  return undefined;
}

/**
 * Decodes one JSONL line. Throws `RolloutDecodeError` when the text is not JSON, nests deeper
 * than `MAX_JSON_DEPTH`, or the envelope is wrong (not an object, no string `timestamp`/`type`,
 * no `payload`).
 *
 * A known line type whose payload does not fit its schema is not an error: it decodes as an
 * `unknown` line (with its `original_type`), so it re-encodes unchanged and reconstruction can
 * treat it as unreadable, e.g. a corrupt `world_state` clears the baseline (design §10
 * invariant 8) instead of stopping the thread from loading.
 */
export function decodeRolloutLine(text: string, lineNumber = 1): RolloutLine {
  let value: unknown;
  try {
    value = parseJsonWithin(text);
  } catch (error) {
    if (!(error instanceof SyntaxError)) {
      throw new RolloutDecodeError(lineNumber, (error as Error).message);
    }
    throw new RolloutDecodeError(lineNumber, `invalid JSON (${error.message})`);
  }
  const problem = envelopeProblem(value);
  if (problem !== undefined || !isPlainObject(value)) {
    throw new RolloutDecodeError(lineNumber, problem ?? "expected a JSON object");
  }
  const parsed = RolloutLineSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new RolloutDecodeError(lineNumber, issue?.message ?? "does not match the line schema");
  }
  const line = parsed.data;
  // The item schema keeps only the type of an item it does not know; an `unknown` line keeps
  // the whole payload, so such items survive an export.
  if (line.type === "response_item" && line.payload.type === "other") {
    return inSourceOrder(
      { ...line, type: "unknown", payload: value.payload, original_type: "response_item" },
      value,
    ) as RolloutLine;
  }
  return inSourceOrder(line, value) as RolloutLine;
}

/** Response-item types with a schema of their own (reference §1.2, as modelled by the protocol). */
const KNOWN_ITEM_TYPES: ReadonlySet<string> = new Set([
  "message",
  "reasoning",
  "local_shell_call",
  "function_call",
  "function_call_output",
  "custom_tool_call",
  "custom_tool_call_output",
  "web_search_call",
  "compaction",
  "compaction_summary",
]);

/** Event types reconstruction reads; a payload of one of them that does not fit is suspicious. */
const KNOWN_EVENT_TYPES: ReadonlySet<string> = new Set([
  "task_started",
  "turn_started",
  "task_complete",
  "turn_complete",
  "turn_aborted",
  "user_message",
  "token_count",
  "thread_rolled_back",
]);

/**
 * Why a decoded line is suspect, or undefined: a known line, item or event type whose payload did
 * not fit its schema and was therefore kept as `unknown`/`other` (and is ignored by
 * reconstruction, except that an unreadable `world_state` clears the baseline).
 */
export function schemaMismatch(line: RolloutLine): string | undefined {
  if (line.type === "unknown") {
    if (!KNOWN_LINE_TYPES.has(line.original_type)) return undefined;
    if (line.original_type === "response_item" && isPlainObject(line.payload)) {
      const itemType = line.payload.type;
      if (typeof itemType === "string" && !KNOWN_ITEM_TYPES.has(itemType)) return undefined;
    }
    return `${line.original_type} payload does not match its schema; kept as an unknown line`;
  }
  if (line.type === "event_msg" && line.payload.type === "other") {
    const eventType = line.payload.original_type;
    if (KNOWN_EVENT_TYPES.has(eventType)) {
      return `${eventType} event does not match its schema; kept as an unknown event`;
    }
  }
  return undefined;
}

export interface DecodeJsonlOptions {
  /** Skip malformed lines with a warning instead of throwing. */
  tolerant?: boolean;
}

/**
 * Decodes JSONL text. Blank lines, a trailing newline, CRLF line ends and a leading byte-order
 * mark are accepted. Strict (the default): the first malformed line throws `RolloutDecodeError`
 * naming it. Tolerant: malformed lines are skipped, each with a warning naming it. In both modes
 * a known line, item or event type whose payload does not fit its schema is kept (as `unknown` /
 * `other`, so it re-encodes unchanged) with a warning.
 */
export function decodeRolloutJsonl(
  text: string,
  opts: DecodeJsonlOptions = {},
): { lines: RolloutLine[]; warnings: string[] } {
  const lines: RolloutLine[] = [];
  const warnings: string[] = [];
  const rows = (text.startsWith("\uFEFF") ? text.slice(1) : text).split("\n");
  rows.forEach((row, index) => {
    const lineNumber = index + 1;
    const body = row.endsWith("\r") ? row.slice(0, -1) : row;
    if (body.trim() === "") return;
    let line: RolloutLine;
    try {
      line = decodeRolloutLine(body, lineNumber);
    } catch (error) {
      if (opts.tolerant && error instanceof RolloutDecodeError) {
        warnings.push(`${error.message}; line skipped`);
        return;
      }
      throw error;
    }
    const mismatch = schemaMismatch(line);
    if (mismatch !== undefined) warnings.push(`rollout line ${lineNumber}: ${mismatch}`);
    lines.push(line);
  });
  return { lines, warnings };
}
