import * as z from "../zod/index.ts";
import { PromptSchema } from "./prompt.ts";
import { ResponseItemSchema } from "./response-item.ts";
import { FunctionToolSchema, SessionConfigurationSchema } from "./thread-config.ts";
import { ThreadMetadataSchema } from "./thread-metadata.ts";
import { TokenUsageInfoSchema } from "./token-usage.ts";
import { TurnContextItemSchema } from "./turn-context.ts";

/**
 * Rollout lines: the Codex JSONL envelope `{timestamp, ordinal?, type, payload}` (reference §1.1).
 * These names are persisted; never rename them.
 */

/** Where an imported thread's rollout came from: the source's own `session_meta` identity. */
export const ImportedFromSchema = z.onFirstUse(() =>
  z.object({
    session_id: z.string(),
    cli_version: z.nullable(z.string()),
    originator: z.nullable(z.string()),
  }),
);

/**
 * A note about an imported rollout, kept in Spindle's `session_meta` (`import_warnings`); the
 * Thread resource's `warnings` have the same shape.
 */
export const ImportWarningSchema = z.onFirstUse(() =>
  z.object({ code: z.string(), message: z.string() }),
);

/**
 * A paginated fork's reference to its parent (Codex ≈0.145+): the child holds only its own
 * records, and its history starts with the parent's records before `end_ordinal_exclusive`.
 */
export const HistoryBaseSchema = z.onFirstUse(() =>
  z.looseObject({
    thread_id: z.string(),
    end_ordinal_exclusive: z.number().check(z.int(), z.nonnegative()),
    end_byte_offset: z.optional(z.number()),
  }),
);

export const SessionMetaSchema = z.onFirstUse(() =>
  z.looseObject({
    id: z.string(),
    timestamp: z.optional(z.string()),
    cwd: z.optional(z.string()),
    originator: z.optional(z.string()),
    cli_version: z.optional(z.string()),
    source: z.optional(z.unknown()),
    model_provider: z.nullish(z.string()),
    /** User instructions (AGENTS.md and the global ones), Codex 0.32–0.87. */
    instructions: z.nullish(z.string()),
    base_instructions: z.optional(z.unknown()),
    forked_from_id: z.nullish(z.string()),
    dynamic_tools: z.nullish(z.array(z.unknown())),
    history_mode: z.nullish(z.string()),
    history_base: z.nullish(HistoryBaseSchema),
    /** Spindle's own lines only: the rollout an import came from. */
    imported_from: z.nullish(ImportedFromSchema),
    /** Spindle's own lines only: what the import could not carry over. */
    import_warnings: z.nullish(z.array(ImportWarningSchema)),
    /**
     * Spindle's: how many lines after this one a fork or an import copied (its own lines follow
     * them), so a thread rebuilt from R2 counts only its own provider requests.
     */
    spindle_copied_lines: z.optional(z.number().check(z.int(), z.nonnegative())),
  }),
);

export const WorldStateItemSchema = z.onFirstUse(() =>
  z.looseObject({
    full: z.boolean(),
    /** `full`: a complete snapshot; otherwise an RFC 7386 merge patch against the previous one. */
    state: z.record(z.string(), z.unknown()),
  }),
);

export const CompactedItemSchema = z.onFirstUse(() =>
  z.pipe(
    z.looseObject({
      message: z.string(),
      replacement_history: z.nullish(z.array(ResponseItemSchema)),
      window_number: z.nullish(z.number()),
      first_window_id: z.nullish(z.string()),
      previous_window_id: z.nullish(z.string()),
      // Older rollouts wrote the window number here as a number (reference §1.4).
      window_id: z.nullish(z.union([z.string(), z.number()])),
    }),
    z.transform((c) => {
      if (typeof c.window_id !== "number") return c;
      const { window_id, ...rest } = c;
      return { ...rest, window_number: rest.window_number ?? window_id };
    }),
  ),
);

/**
 * What starts a compaction task (`CompactionTrigger` in the session engine), as a compaction
 * turn's resource names it and its `task_started` line records it.
 */
export const COMPACTION_TRIGGERS = ["manual", "auto", "idle"] as const;

const TaskStartedSchema = z.onFirstUse(() =>
  z.looseObject({
    // `turn_started` is accepted as an alias and read as `task_started`.
    type: z.pipe(
      z.enum(["task_started", "turn_started"]),
      z.transform(() => "task_started" as const),
    ),
    turn_id: z.string(),
    started_at: z.nullish(z.number()),
    model_context_window: z.nullish(z.number()),
    collaboration_mode_kind: z.nullish(z.string()),
    /**
     * Spindle's own: what started a compaction task (Codex writes none); read as a string, so a
     * value it does not know leaves the line readable (`turnRowsFromRollout` ignores it).
     */
    spindle_compaction_trigger: z.optional(z.string()),
  }),
);
const TaskCompleteSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.pipe(
      z.enum(["task_complete", "turn_complete"]),
      z.transform(() => "task_complete" as const),
    ),
    turn_id: z.string(),
    last_agent_message: z.nullish(z.string()),
    started_at: z.nullish(z.number()),
    completed_at: z.nullish(z.number()),
    duration_ms: z.nullish(z.number()),
  }),
);
const TurnAbortedSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("turn_aborted"),
    turn_id: z.nullish(z.string()),
    reason: z.string(),
    completed_at: z.nullish(z.number()),
    duration_ms: z.nullish(z.number()),
  }),
);
const UserMessageSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("user_message"),
    message: z.string(),
    images: z.nullish(z.array(z.string())),
    local_images: z.optional(z.array(z.unknown())),
    text_elements: z.optional(z.array(z.unknown())),
    kind: z.nullish(z.string()),
  }),
);
const TokenCountSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("token_count"),
    info: z.nullable(TokenUsageInfoSchema),
    rate_limits: z.optional(z.unknown()),
  }),
);
const ThreadRolledBackSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("thread_rolled_back"),
    num_turns: z.number().check(z.int(), z.nonnegative()),
    rollback_start_index: z.nullish(z.number()),
    materialized_turns: z.optional(z.unknown()),
  }),
);
/** Codex's `McpInvocation`: which server's tool a call went to, with what. */
const McpInvocationSchema = z.onFirstUse(() =>
  z.looseObject({ server: z.string(), tool: z.string(), arguments: z.nullish(z.unknown()) }),
);
/** Written before a server tool call is sent: a call with this line and no output was lost. */
const McpToolCallBeginSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("mcp_tool_call_begin"),
    call_id: z.string(),
    invocation: McpInvocationSchema,
  }),
);
const McpToolCallEndSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("mcp_tool_call_end"),
    call_id: z.string(),
    invocation: McpInvocationSchema,
    duration_ms: z.nullish(z.number()),
    success: z.boolean(),
  }),
);
/** A server tool call held back for approval (Spindle's line; the turn row is rebuilt from it). */
const McpApprovalRequestEventSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("mcp_approval_request"),
    id: z.string(),
    call_id: z.string(),
    server_label: z.string(),
    name: z.string(),
    arguments: z.string(),
  }),
);
/** Codex's `warning` event, with Spindle's machine-readable `code` (and the server it is about). */
const WarningEventSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("warning"),
    message: z.string(),
    code: z.nullish(z.string()),
    server_label: z.nullish(z.string()),
  }),
);
/** Event types reconstruction does not read (agent_message, warning, …) are kept as-is. */
const OtherEventSchema = z.onFirstUse(() =>
  z.pipe(
    z.looseObject({ type: z.string() }),
    z.transform((e) => ({ ...e, type: "other" as const, original_type: e.type })),
  ),
);

const KnownEventMsgSchema = z.onFirstUse(() =>
  z.discriminatedUnion("type", [
    TaskStartedSchema,
    TaskCompleteSchema,
    TurnAbortedSchema,
    UserMessageSchema,
    TokenCountSchema,
    ThreadRolledBackSchema,
    McpToolCallBeginSchema,
    McpToolCallEndSchema,
    McpApprovalRequestEventSchema,
    WarningEventSchema,
  ]),
);
export const EventMsgSchema = z.onFirstUse(() => z.union([KnownEventMsgSchema, OtherEventSchema]));

/**
 * `spindle_request`: one provider request, written right before it is sent. Its input is not
 * stored: it is the history the lines before this one rebuild (`forPrompt` of its modalities;
 * a compaction request adds the summary request). The other channels are written only when they
 * differ from the previous `spindle_request` line's (absent: as that line's, carried forward
 * when read), so a thread's requests cost a few bytes each.
 */
export const ModelRequestLineSchema = z.onFirstUse(() =>
  z.looseObject({
    kind: z.enum(["sampling", "compaction"]),
    model: z.string(),
    instructions: z.optional(z.string()),
    tools: z.optional(z.array(FunctionToolSchema)),
    options: z.optional(
      z.extend(z.pick(PromptSchema, { parallel_tool_calls: true, reasoning: true, text: true }), {
        input_modalities: z.array(z.enum(["text", "image"])),
      }),
    ),
  }),
);
export type ModelRequestLine = z.infer<typeof ModelRequestLineSchema>;

/**
 * Spindle's own lines, which Codex readers skip as unknown line types: `spindle_config`, the
 * thread's resolved configuration, written at creation and whenever a turn's overrides change
 * it, and `spindle_metadata`, the thread's metadata, written whenever it is set; so a thread
 * rebuilt from R2 alone gets both back; and `spindle_request` (above).
 */
const envelope = () => ({ timestamp: z.string(), ordinal: z.nullish(z.number()) });
/**
 * Envelopes are loose: members beside `payload` (the `metadata` of newer Codex `response_item`
 * lines) are kept, so a decoded line encodes back to what was read.
 */
const line = z.looseObject;

export const RolloutLineSchema = z.onFirstUse(() =>
  z.union([
    z.discriminatedUnion("type", [
      line({ ...envelope(), type: z.literal("session_meta"), payload: SessionMetaSchema }),
      line({ ...envelope(), type: z.literal("response_item"), payload: ResponseItemSchema }),
      line({ ...envelope(), type: z.literal("turn_context"), payload: TurnContextItemSchema }),
      line({ ...envelope(), type: z.literal("world_state"), payload: WorldStateItemSchema }),
      line({ ...envelope(), type: z.literal("compacted"), payload: CompactedItemSchema }),
      line({ ...envelope(), type: z.literal("event_msg"), payload: EventMsgSchema }),
      line({
        ...envelope(),
        type: z.literal("spindle_config"),
        payload: SessionConfigurationSchema,
      }),
      line({ ...envelope(), type: z.literal("spindle_request"), payload: ModelRequestLineSchema }),
      z.object({
        ...envelope(),
        type: z.literal("spindle_metadata"),
        payload: z.object({ metadata: ThreadMetadataSchema }),
      }),
    ]),
    // Line types from other Codex revisions are tolerated on read and ignored by reconstruction.
    z.pipe(
      line({ ...envelope(), type: z.string(), payload: z.unknown() }),
      z.transform((l) => ({
        ...l,
        type: "unknown" as const,
        original_type: l.type,
      })),
    ),
  ]),
);

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
