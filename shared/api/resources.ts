import { SERVER_TOOL_WARNING_CODES } from "../mcp/index.ts";
import {
  COMPACTION_TRIGGERS,
  CompactionItemSchema,
  CustomToolCallItemSchema,
  CustomToolCallOutputItemSchema,
  FunctionCallItemSchema,
  FunctionCallOutputItemSchema,
  ImportedFromSchema,
  ImportWarningSchema,
  type KnownResponseItem,
  LocalShellCallItemSchema,
  McpApprovalRequestSchema,
  MessageItemSchema,
  type Prompt,
  PromptSchema,
  ReasoningItemSchema,
  type ResponseItem,
  SessionConfigurationSchema,
  ThreadMetadataSchema,
  TokenUsageInfoSchema,
  TokenUsageSchema,
  WebSearchCallItemSchema,
} from "../protocol/index.ts";
import * as z from "../zod/index.ts";
import { ThreadIdSchema, TurnIdSchema } from "./ids.ts";
import { TURN_PREVIEW_MAX_CHARS } from "./previews.ts";
import { PROBLEM_CODES } from "./problems.ts";
import type { Same } from "./same.ts";
import { ThreadUsageSchema } from "./tenancy.ts";

/**
 * Resource shapes of HTTP API v1 (design §7): what the Thread DO returns and the worker renders.
 * Documented by their output side, so a response schema must not transform (see
 * `ResponseItemOutputSchema`).
 */

/**
 * The output side of the protocol's `KnownResponseItemSchema`: what a parsed item looks like. The
 * parse schema reads the alias `compaction_summary` as `compaction` through a transform, which
 * JSON Schema cannot describe; here the type is the literal the transform produces. The item
 * shapes are the protocol's own, so the two cannot drift apart (checked below).
 */
export const KnownResponseItemOutputSchema = z.onFirstUse(() =>
  z.discriminatedUnion("type", [
    MessageItemSchema,
    ReasoningItemSchema,
    LocalShellCallItemSchema,
    FunctionCallItemSchema,
    FunctionCallOutputItemSchema,
    CustomToolCallItemSchema,
    CustomToolCallOutputItemSchema,
    WebSearchCallItemSchema,
    z.extend(CompactionItemSchema, { type: z.literal("compaction") }),
  ]),
);

/**
 * The output side of `ResponseItemSchema`: a known item, or `{type: "other", original_type}`
 * for an item type this build does not know (its payload is not kept). Response schemas use this
 * one, so the OpenAPI document shows what a client receives.
 */
export const ResponseItemOutputSchema = z.onFirstUse(() =>
  z.union([
    KnownResponseItemOutputSchema,
    z.object({ type: z.literal("other"), original_type: z.string() }),
  ]),
);

/**
 * A thread's resolved configuration: every field decided (`SessionConfiguration`). Optional
 * fields are absent when unset; nothing is `null` here.
 */
export const ResolvedThreadConfigSchema = SessionConfigurationSchema;

export const ThreadStatusSchema = z.onFirstUse(() =>
  z.enum(["idle", "running", "requires_action"]),
);

/**
 * Something the thread wants a client to know that is not an error: `rollout_repaired` (lines
 * lost or a world-state replay repaired), `rollout_line_unread` (an imported line, or part of
 * one, this build cannot read), `rollout_setting_unsupported` (an imported setting replaced by
 * the default or by the nearest Spindle setting).
 */
export const WarningSchema = ImportWarningSchema;

/** Timestamps are RFC 3339 UTC strings, like the rollout's. */
const timestamp = z.onFirstUse(() => z.iso.datetime());

export const ThreadResourceSchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("thread"),
    id: ThreadIdSchema,
    status: ThreadStatusSchema,
    config: ResolvedThreadConfigSchema,
    turn_count: z.number().check(z.int(), z.nonnegative()),
    /** The newest turn's id (a compaction's too); absent before the first. */
    last_turn_id: z.optional(TurnIdSchema),
    /**
     * The context's token accounting as Codex keeps it (a fork's totals include its source's);
     * null until the first model response reports usage.
     */
    token_usage: z.nullable(TokenUsageInfoSchema),
    /** What this thread's own provider requests used, as the usage ledger counts it. */
    usage: ThreadUsageSchema,
    metadata: ThreadMetadataSchema,
    created_at: timestamp,
    updated_at: timestamp,
    /** The id of the thread this one was forked from; null when it was not forked. */
    forked_from: z.nullable(ThreadIdSchema),
    /**
     * Where an imported thread came from: the source rollout's session id, the version of the
     * Codex (or Spindle) that wrote it and its originator. Kept by restores, forks and re-imports
     * of its export; null for a thread created through the API.
     */
    imported_from: z.nullable(ImportedFromSchema),
    warnings: z.array(WarningSchema),
  }),
);

export const TurnStatusSchema = z.onFirstUse(() =>
  z.enum(["in_progress", "completed", "requires_action", "interrupted", "failed"]),
);

export const TurnErrorSchema = z.onFirstUse(() =>
  z.object({ code: z.enum(PROBLEM_CODES), message: z.string() }),
);

/** Why a turn's step went without some MCP tools; the turn went on. */
export const TurnWarningSchema = z.onFirstUse(() =>
  z.object({
    code: z.enum(SERVER_TOOL_WARNING_CODES),
    server_label: z.string(),
    message: z.string(),
  }),
);

export const TurnResourceSchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("turn"),
    id: TurnIdSchema,
    thread_id: ThreadIdSchema,
    /**
     * `compaction`: a compaction task (`POST …/compact`, or the automatic one that a turn's stream
     * shows before the turn itself when its context is near the window).
     */
    kind: z.enum(["turn", "compaction"]),
    /**
     * What started a compaction: `manual` (`POST …/compact`), `auto` (the context near the
     * window), `idle` (idle compaction, before the prompt cache expires). Absent for user turns,
     * and for compactions of an imported Codex rollout (Codex records no trigger).
     */
    trigger: z.optional(z.enum(COMPACTION_TRIGGERS)),
    status: TurnStatusSchema,
    /** What the turn recorded, in order: context items, the user input, model output. */
    items: z.array(ResponseItemOutputSchema),
    /**
     * Calls the turn waits on (status `requires_action`): client tool calls, answered with a
     * `function_call_output`, and MCP server calls held for approval (`pending_approvals`).
     */
    pending_calls: z.array(FunctionCallItemSchema),
    /**
     * The approval requests of held MCP server calls, each answered with an
     * `mcp_approval_response` naming its `id` (present when there are any).
     */
    pending_approvals: z.optional(z.array(McpApprovalRequestSchema)),
    /** Tools the turn's steps could not offer: an MCP server unreachable, a tool left out (present when any). */
    warnings: z.optional(z.array(TurnWarningSchema)),
    /** The turn's summed usage; null before the first model response. */
    usage: z.nullable(TokenUsageSchema),
    /** Set when status is `failed`. */
    error: z.nullable(TurnErrorSchema),
  }),
);

const preview = (what: string) =>
  z
    .nullable(z.string().check(z.maxLength(TURN_PREVIEW_MAX_CHARS)))
    .check(
      z.describe(
        `${what}, whitespace collapsed, at most ${TURN_PREVIEW_MAX_CHARS} UTF-16 code units (the last ` +
          "one `…` when cut).",
      ),
    );

/** `GET /v1/threads/{id}/turns`: a turn as the inspector lists it, without its items. */
export const TurnSummarySchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("turn.summary"),
    id: TurnIdSchema,
    kind: z
      .enum(["turn", "compaction"])
      .check(z.describe("`compaction`: a compaction task (manual, automatic or idle).")),
    trigger: z
      .optional(z.enum(COMPACTION_TRIGGERS))
      .check(z.describe("What started a compaction, as in the Turn; absent for user turns.")),
    status: TurnStatusSchema,
    created_at: timestamp.check(z.describe("When the turn's first rollout line was written.")),
    completed_at: z
      .nullable(timestamp)
      .check(
        z.describe(
          "When its last line was written, once the turn is completed, failed or interrupted; " +
            "else null.",
        ),
      ),
    usage: z
      .nullable(TokenUsageSchema)
      .check(z.describe("The turn's summed usage; null before the first model response.")),
    input_preview: preview("The turn's user input text; null for a compaction"),
    output_preview: preview("The turn's last agent message; null when it has none"),
    first_seq: z
      .number()
      .check(z.int(), z.describe("The seq of the turn's first rollout line (`GET …/rollout`).")),
    last_seq: z.number().check(z.int(), z.describe("The seq of the turn's last rollout line.")),
    rollback_before: z
      .nullable(
        z.object({
          turns: z
            .number()
            .check(z.int(), z.describe("The turns rolled back (summed over the rollbacks).")),
          at: timestamp.check(z.describe("When the newest of them was recorded.")),
        }),
      )
      .check(
        z.describe(
          "The rollback(s) (`POST …/rollback`) recorded after the previous turn and before this " +
            "one; null when none. The rolled-back turns stay listed.",
        ),
      ),
  }),
);

/** A page of a cursor-paginated list; `next_cursor` is null on the last page. */
export function listResourceSchema<T extends z.ZodMiniType>(item: T) {
  return z.object({
    object: z.literal("list"),
    data: z.array(item),
    next_cursor: z.nullable(z.string()),
  });
}

export const HistoryPageSchema = z.onFirstUse(() => listResourceSchema(ResponseItemOutputSchema));

/** `GET …/prompt`: the provider request, with `input` documented by its output side. */
export const PromptResourceSchema = z.onFirstUse(() =>
  z.extend(PromptSchema, {
    input: z.array(KnownResponseItemOutputSchema),
  }),
);

/**
 * One line of a Codex rollout (reference §1.1), as exported and imported: the envelope only;
 * `payload` depends on `type` (session_meta, response_item, turn_context, world_state, compacted,
 * event_msg, …) and unknown line types are kept.
 */
export const RolloutLineDocSchema = z.onFirstUse(() =>
  z.looseObject({
    timestamp: z.string(),
    ordinal: z.optional(z.number().check(z.int())),
    type: z.string(),
    payload: z.unknown(),
  }),
);

export type ResolvedThreadConfig = z.output<typeof ResolvedThreadConfigSchema>;
export type ThreadStatus = z.output<typeof ThreadStatusSchema>;
export type Warning = z.output<typeof WarningSchema>;
export type ThreadResource = z.output<typeof ThreadResourceSchema>;
export type TurnStatus = z.output<typeof TurnStatusSchema>;
export type TurnError = z.output<typeof TurnErrorSchema>;
export type TurnResource = z.output<typeof TurnResourceSchema>;
export type TurnSummary = z.output<typeof TurnSummarySchema>;
export interface ListResource<T> {
  object: "list";
  data: T[];
  next_cursor: string | null;
}

// Documentation schemas describe the types the code uses: each pair must agree both ways, so a
// new item type in the protocol fails to compile until documented.
const documentedShapes: [
  Same<z.output<typeof ResponseItemOutputSchema>, ResponseItem>,
  Same<z.output<typeof KnownResponseItemOutputSchema>, KnownResponseItem>,
  Same<z.output<typeof PromptResourceSchema>, Prompt>,
  Same<z.output<typeof HistoryPageSchema>, ListResource<ResponseItem>>,
] = [true, true, true, true];
void documentedShapes;
