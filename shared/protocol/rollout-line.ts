import * as z from "zod";
import { ResponseItemSchema } from "./response-item.ts";
import { SessionConfigurationSchema } from "./thread-config.ts";
import { ThreadMetadataSchema } from "./thread-metadata.ts";
import { TokenUsageInfoSchema } from "./token-usage.ts";
import { TurnContextItemSchema } from "./turn-context.ts";

/**
 * Rollout lines: the Codex JSONL envelope `{timestamp, ordinal?, type, payload}` (reference §1.1).
 * These names are persisted; never rename them.
 */

/** Where an imported thread's rollout came from: the source's own `session_meta` identity. */
export const ImportedFromSchema = z.object({
  session_id: z.string(),
  cli_version: z.string().nullable(),
  originator: z.string().nullable(),
});

/**
 * A note about an imported rollout, kept in Spindle's `session_meta` (`import_warnings`); the
 * Thread resource's `warnings` have the same shape.
 */
export const ImportWarningSchema = z.object({ code: z.string(), message: z.string() });

/**
 * A paginated fork's reference to its parent (Codex ≈0.145+): the child holds only its own
 * records, and its history starts with the parent's records before `end_ordinal_exclusive`.
 */
export const HistoryBaseSchema = z.looseObject({
  thread_id: z.string(),
  end_ordinal_exclusive: z.number().int().nonnegative(),
  end_byte_offset: z.number().optional(),
});

export const SessionMetaSchema = z.looseObject({
  id: z.string(),
  timestamp: z.string().optional(),
  cwd: z.string().optional(),
  originator: z.string().optional(),
  cli_version: z.string().optional(),
  source: z.unknown().optional(),
  model_provider: z.string().nullish(),
  /** User instructions (AGENTS.md and the global ones), Codex 0.32–0.87. */
  instructions: z.string().nullish(),
  base_instructions: z.unknown().optional(),
  forked_from_id: z.string().nullish(),
  dynamic_tools: z.array(z.unknown()).nullish(),
  history_mode: z.string().nullish(),
  history_base: HistoryBaseSchema.nullish(),
  /** Spindle's own lines only: the rollout an import came from. */
  imported_from: ImportedFromSchema.nullish(),
  /** Spindle's own lines only: what the import could not carry over. */
  import_warnings: z.array(ImportWarningSchema).nullish(),
  /**
   * Spindle's: how many lines after this one a fork or an import copied (its own lines follow
   * them), so a thread rebuilt from R2 counts only its own provider requests.
   */
  spindle_copied_lines: z.number().int().nonnegative().optional(),
});

export const WorldStateItemSchema = z.looseObject({
  full: z.boolean(),
  /** `full`: a complete snapshot; otherwise an RFC 7386 merge patch against the previous one. */
  state: z.record(z.string(), z.unknown()),
});

export const CompactedItemSchema = z
  .looseObject({
    message: z.string(),
    replacement_history: z.array(ResponseItemSchema).nullish(),
    window_number: z.number().nullish(),
    first_window_id: z.string().nullish(),
    previous_window_id: z.string().nullish(),
    // Older rollouts wrote the window number here as a number (reference §1.4).
    window_id: z.union([z.string(), z.number()]).nullish(),
  })
  .transform((c) => {
    if (typeof c.window_id !== "number") return c;
    const { window_id, ...rest } = c;
    return { ...rest, window_number: rest.window_number ?? window_id };
  });

const TaskStartedSchema = z.looseObject({
  // `turn_started` is accepted as an alias and read as `task_started`.
  type: z.enum(["task_started", "turn_started"]).transform(() => "task_started" as const),
  turn_id: z.string(),
  started_at: z.number().nullish(),
  model_context_window: z.number().nullish(),
  collaboration_mode_kind: z.string().nullish(),
});
const TaskCompleteSchema = z.looseObject({
  type: z.enum(["task_complete", "turn_complete"]).transform(() => "task_complete" as const),
  turn_id: z.string(),
  last_agent_message: z.string().nullish(),
  started_at: z.number().nullish(),
  completed_at: z.number().nullish(),
  duration_ms: z.number().nullish(),
});
const TurnAbortedSchema = z.looseObject({
  type: z.literal("turn_aborted"),
  turn_id: z.string().nullish(),
  reason: z.string(),
  completed_at: z.number().nullish(),
  duration_ms: z.number().nullish(),
});
const UserMessageSchema = z.looseObject({
  type: z.literal("user_message"),
  message: z.string(),
  images: z.array(z.string()).nullish(),
  local_images: z.array(z.unknown()).optional(),
  text_elements: z.array(z.unknown()).optional(),
  kind: z.string().nullish(),
});
const TokenCountSchema = z.looseObject({
  type: z.literal("token_count"),
  info: TokenUsageInfoSchema.nullable(),
  rate_limits: z.unknown().optional(),
});
const ThreadRolledBackSchema = z.looseObject({
  type: z.literal("thread_rolled_back"),
  num_turns: z.number().int().nonnegative(),
  rollback_start_index: z.number().nullish(),
  materialized_turns: z.unknown().optional(),
});
/** Event types reconstruction does not read (agent_message, warning, …) are kept as-is. */
const OtherEventSchema = z
  .looseObject({ type: z.string() })
  .transform((e) => ({ ...e, type: "other" as const, original_type: e.type }));

const KnownEventMsgSchema = z.discriminatedUnion("type", [
  TaskStartedSchema,
  TaskCompleteSchema,
  TurnAbortedSchema,
  UserMessageSchema,
  TokenCountSchema,
  ThreadRolledBackSchema,
]);
export const EventMsgSchema = z.union([KnownEventMsgSchema, OtherEventSchema]);

/**
 * Spindle's own lines, which Codex readers skip as unknown line types: `spindle_config`, the
 * thread's resolved configuration, written at creation and whenever a turn's overrides change
 * it, and `spindle_metadata`, the thread's metadata, written whenever it is set; so a thread
 * rebuilt from R2 alone gets both back.
 */
const envelope = { timestamp: z.string(), ordinal: z.number().nullish() };
/**
 * Envelopes are loose: members beside `payload` (the `metadata` of newer Codex `response_item`
 * lines) are kept, so a decoded line encodes back to what was read.
 */
const line = z.looseObject;

export const RolloutLineSchema = z.union([
  z.discriminatedUnion("type", [
    line({ ...envelope, type: z.literal("session_meta"), payload: SessionMetaSchema }),
    line({ ...envelope, type: z.literal("response_item"), payload: ResponseItemSchema }),
    line({ ...envelope, type: z.literal("turn_context"), payload: TurnContextItemSchema }),
    line({ ...envelope, type: z.literal("world_state"), payload: WorldStateItemSchema }),
    line({ ...envelope, type: z.literal("compacted"), payload: CompactedItemSchema }),
    line({ ...envelope, type: z.literal("event_msg"), payload: EventMsgSchema }),
    line({
      ...envelope,
      type: z.literal("spindle_config"),
      payload: SessionConfigurationSchema,
    }),
    z.object({
      ...envelope,
      type: z.literal("spindle_metadata"),
      payload: z.object({ metadata: ThreadMetadataSchema }),
    }),
  ]),
  // Line types from other Codex revisions are tolerated on read and ignored by reconstruction.
  line({ ...envelope, type: z.string(), payload: z.unknown() }).transform((l) => ({
    ...l,
    type: "unknown" as const,
    original_type: l.type,
  })),
]);

export type SessionMeta = z.infer<typeof SessionMetaSchema>;
export type ImportedFrom = z.infer<typeof ImportedFromSchema>;
export type HistoryBase = z.infer<typeof HistoryBaseSchema>;
export type WorldStateItem = z.infer<typeof WorldStateItemSchema>;
export type CompactedItem = z.output<typeof CompactedItemSchema>;
export type EventMsg = z.output<typeof EventMsgSchema>;
export type RolloutLine = z.output<typeof RolloutLineSchema>;
export type RolloutLineType = RolloutLine["type"];
/** A line without its envelope: what the engine produces before a timestamp is stamped. */
export type RolloutItem = RolloutLine extends infer L
  ? L extends { type: infer T; payload: infer P }
    ? { type: T; payload: P }
    : never
  : never;
