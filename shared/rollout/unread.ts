import {
  CompactedItemSchema,
  KnownResponseItemSchema,
  ModelRequestLineSchema,
  type ResponseItem,
  type RolloutLine,
  SessionConfigurationSchema,
  SessionMetaSchema,
  TurnContextItemSchema,
  WorldStateItemSchema,
} from "../protocol/index.ts";
import { schemaMismatch } from "./codec.ts";

/**
 * What a rollout held that this build could not read, for the thread's warnings: lines of a known
 * type whose payload does not fit its schema (kept as unknown lines), response items of types
 * Spindle does not model, and such items in a compaction's replacement history. Line types
 * nobody here knows are skipped without a word, and so are items that are no conversation
 * (Codex's `ghost_snapshot`, the `additional_tools` of a request prefix).
 */

/** Item types that never were model-visible history: leaving them out loses nothing. */
const NOT_HISTORY: ReadonlySet<string> = new Set([
  "ghost_snapshot",
  "additional_tools",
  "compaction_trigger",
]);

/** What Spindle does without each line type's payload. */
const CONSEQUENCE: Readonly<Record<string, string>> = {
  session_meta: "its session details are not used",
  turn_context: "the settings it records are not applied",
  world_state: "its sections are not read",
  compacted: "its history replacement is not applied",
  response_item: "the item is not in history",
  spindle_config: "the configuration it records is not used",
  spindle_request: "the provider request it records is not shown",
};

const SCHEMAS = {
  session_meta: SessionMetaSchema,
  turn_context: TurnContextItemSchema,
  world_state: WorldStateItemSchema,
  compacted: CompactedItemSchema,
  response_item: KnownResponseItemSchema,
  spindle_config: SessionConfigurationSchema,
  spindle_request: ModelRequestLineSchema,
} as const;

function isSchemaType(type: string): type is keyof typeof SCHEMAS {
  return Object.hasOwn(SCHEMAS, type);
}

/** The first schema issue of a payload, as `path: message`. */
function firstIssue(type: string, payload: unknown): string | undefined {
  if (!isSchemaType(type)) return undefined;
  const parsed = SCHEMAS[type].safeParse(payload);
  const issue = parsed.success ? undefined : parsed.error.issues[0];
  if (issue === undefined) return undefined;
  const path = issue.path.length > 0 ? `${issue.path.join(".")}: ` : "";
  return `${path}${issue.message}`;
}

function itemTypeOf(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const type = (value as { type?: unknown; original_type?: unknown }).type;
  if (type === "other") return String((value as { original_type?: unknown }).original_type);
  return typeof type === "string" ? type : undefined;
}

/** Items of a replacement history that history cannot hold, by type. */
function unmodelledTypes(items: readonly ResponseItem[]): string[] {
  const types = items.flatMap((item) => {
    const type = item.type === "other" ? item.original_type : undefined;
    return type !== undefined && !NOT_HISTORY.has(type) ? [type] : [];
  });
  return [...new Set(types)];
}

/** The problem with one line, in words without its number; undefined when it was read. */
export function unreadPart(line: RolloutLine): string | undefined {
  if (line.type === "compacted") {
    const types = unmodelledTypes(line.payload.replacement_history ?? []);
    if (types.length === 0) return undefined;
    return `compacted replacement history holds items of types Spindle does not model (${types.join(", ")}); they are left out of history`;
  }
  if (line.type === "unknown" && line.original_type === "response_item") {
    const type = itemTypeOf(line.payload);
    if (type !== undefined && NOT_HISTORY.has(type)) return undefined;
  }
  const mismatch = schemaMismatch(line);
  if (mismatch !== undefined && line.type === "unknown") {
    const detail = firstIssue(line.original_type, line.payload);
    const consequence = CONSEQUENCE[line.original_type];
    return `${line.original_type} could not be read${detail ? ` (${detail})` : ""}${consequence ? `; ${consequence}` : ""}`;
  }
  if (mismatch !== undefined) return mismatch;
  if (line.type === "unknown" && line.original_type === "response_item") {
    return `response items of type ${itemTypeOf(line.payload) ?? "?"} are not modelled here; kept in the rollout, not in history`;
  }
  return undefined;
}

/** At most this many line numbers are listed per warning. */
const LISTED_LINES = 5;

/**
 * One warning per kind of problem, naming its lines (1-based, as stored and exported): the
 * first few, and how many more.
 */
export function unreadLineWarnings(lines: readonly { seq: number; line: RolloutLine }[]): string[] {
  const byProblem = new Map<string, number[]>();
  for (const { seq, line } of lines) {
    const problem = unreadPart(line);
    if (problem === undefined) continue;
    const seqs = byProblem.get(problem);
    if (seqs === undefined) byProblem.set(problem, [seq]);
    else seqs.push(seq);
  }
  return [...byProblem].map(([problem, seqs]) => {
    const listed = seqs.slice(0, LISTED_LINES).join(", ");
    const more = seqs.length > LISTED_LINES ? ` (and ${seqs.length - LISTED_LINES} more)` : "";
    return `rollout line${seqs.length > 1 ? "s" : ""} ${listed}${more}: ${problem}`;
  });
}
