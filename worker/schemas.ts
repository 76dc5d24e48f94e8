import { z } from "zod";
import {
  CompactionItemSchema,
  CustomToolCallItemSchema,
  CustomToolCallOutputItemSchema,
  FunctionCallItemSchema,
  FunctionCallOutputItemSchema,
  ImageDetailSchema,
  type KnownResponseItem,
  LocalShellCallItemSchema,
  MessageItemSchema,
  type Prompt,
  PromptSchema,
  ReasoningItemSchema,
  type ResponseItem,
  SessionConfigurationSchema,
  ThreadConfigSchema,
  TokenUsageInfoSchema,
  TokenUsageSchema,
  WebSearchCallItemSchema,
} from "../shared/protocol/index.ts";
import { type FieldError, PROBLEM_CODES, type Problem } from "./errors.ts";

/**
 * Wire shapes of HTTP API v1 (design §7): the request bodies the worker validates and the
 * resources and events the Thread DO returns. These zod schemas are the single definition: the
 * types below are inferred from them and the OpenAPI document (`openapi.ts`) is generated from
 * them. Request schemas are documented by their input side, response schemas by their output
 * side, so a response schema must not transform (see `ResponseItemOutputSchema`).
 */

// --- Identifiers --------------------------------------------------------------------------------

/**
 * Tenant, thread and turn ids: 1-64 of `[A-Za-z0-9_-]`. No `:`, so the DO name
 * `{tenant}:{thread}` splits one way only (design §10 invariant 9).
 */
const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
const idSchema = (what: string) =>
  z.string().regex(ID_PATTERN, `${what} ids are 1-64 characters of [A-Za-z0-9_-]`);

export const TenantIdSchema = idSchema("tenant");
export const ThreadIdSchema = idSchema("thread");
export const TurnIdSchema = idSchema("turn");

// --- Requests -----------------------------------------------------------------------------------

/** `POST /v1/threads`: the thread configuration (design §8) plus an optional client-chosen id. */
export const CreateThreadBodySchema = ThreadConfigSchema.extend({ id: ThreadIdSchema.optional() });

export const InputTextPartSchema = z.strictObject({
  type: z.literal("input_text"),
  text: z.string(),
});

/** An image by URL (`https:`/`http:`) or inline as a `data:image/...` URL. */
export const InputImagePartSchema = z.strictObject({
  type: z.literal("input_image"),
  image_url: z
    .string()
    .refine(
      (url) => /^(https?:\/\/|data:image\/)/i.test(url),
      "image_url must be an http(s) URL or a data:image/ URL",
    ),
  detail: ImageDetailSchema.optional(),
});

export const InputPartSchema = z.discriminatedUnion("type", [
  InputTextPartSchema,
  InputImagePartSchema,
]);

/** A user message in Responses item form: the only item a turn's input may hold. */
export const InputMessageSchema = z.strictObject({
  type: z.literal("message"),
  role: z.literal("user"),
  content: z.array(InputPartSchema).min(1),
});

/** A plain string is shorthand for one user message with one `input_text` part. */
export const TurnInputSchema = z.union([
  z.string().min(1),
  z.array(InputMessageSchema).min(1).max(256),
]);

export const OnBusySchema = z.enum(["reject", "queue", "steer", "interrupt"]);

/** `POST /v1/threads/{id}/turns`. */
export const StartTurnBodySchema = z.strictObject({
  input: TurnInputSchema,
  /** Settings for this turn; they become the thread's new defaults (design §8). */
  overrides: ThreadConfigSchema.optional(),
  /** What to do when a turn is already running; `reject` answers 409 `thread_busy`. */
  on_busy: OnBusySchema.default("reject"),
  /**
   * With `on_busy: "steer"`: the id of the turn the input should join. Required there (the
   * running turn may have changed since the client looked); 409 `turn_mismatch` when it is not
   * the running turn.
   */
  expected_turn_id: TurnIdSchema.optional(),
  /**
   * Answer with server-sent events instead of one JSON Turn. Absent: whether `Accept` names
   * `text/event-stream`; an explicit value wins over `Accept`.
   */
  stream: z
    .boolean()
    .optional()
    .describe(
      "Answer with server-sent events instead of JSON. Absent: SSE when Accept names text/event-stream.",
    ),
});

/** A tool's answer to one pending `function_call`: text, or input_text/input_image parts. */
export const FunctionCallOutputInputSchema = z.strictObject({
  type: z.literal("function_call_output"),
  call_id: z.string().min(1).max(256),
  output: z.union([z.string(), z.array(InputPartSchema).min(1).max(256)]),
});

/** `POST …/turns/{turn}/outputs`: outputs for some or all of the turn's pending calls. */
export const SubmitOutputsBodySchema = z.strictObject({
  items: z
    .array(FunctionCallOutputInputSchema)
    .min(1)
    .max(128)
    .superRefine((items, ctx) => {
      const seen = new Set<string>();
      items.forEach((item, index) => {
        if (seen.has(item.call_id)) {
          ctx.addIssue({
            code: "custom",
            path: [index, "call_id"],
            message: "This call_id already has an output in this request",
          });
        }
        seen.add(item.call_id);
      });
    }),
  /** As for a turn; an explicit value wins over `Accept`. */
  stream: z
    .boolean()
    .optional()
    .describe("Answer with server-sent events of the resumed turn. Absent: as Accept asks."),
});

/** `POST …/turns/{turn}/steer`: more input for the running turn. */
export const SteerBodySchema = z.strictObject({ input: TurnInputSchema });

/** Bodies of actions that take no arguments yet: empty or `{}`, so fields can come later. */
export const EmptyBodySchema = z.strictObject({});

/** `POST /v1/threads/{id}/rollback`: drop the last `turns` user turns (reference §4.5). */
export const RollbackBodySchema = z.strictObject({
  turns: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
});

/** `POST /v1/threads/{id}/fork`. */
export const ForkBodySchema = z.strictObject({
  id: ThreadIdSchema.optional().describe("The new thread's id; generated when absent."),
  before_turn: TurnIdSchema.optional().describe(
    "The fork holds the source's rollout up to just before this turn. Absent: every ended turn.",
  ),
});

/** `POST /v1/threads/{id}/inject`: `{text}` or `{items}`, exactly one. */
export const InjectBodySchema = z
  .strictObject({
    /** Shorthand for one user message with one `input_text` part. */
    text: z.string().min(1).optional(),
    items: z.array(InputMessageSchema).min(1).max(256).optional(),
  })
  .superRefine((body, ctx) => {
    if ((body.text === undefined) === (body.items === undefined)) {
      ctx.addIssue({ code: "custom", path: [], message: "Send exactly one of `text` or `items`" });
    }
  })
  .meta({ oneOf: [{ required: ["text"] }, { required: ["items"] }] });

/**
 * An event sequence number in a query parameter or header: decimal digits only, so `""`, `-1`,
 * `1e3` and `0x10` are errors rather than coerced; 15 digits stay below 2^53.
 */
const seqParam = z
  .string()
  .regex(/^\d{1,15}$/, "an event sequence number: 0 or more, decimal digits only")
  .transform(Number);

/** `GET /v1/threads/{id}/events`: replay after this sequence number, then tail. */
export const EventsQuerySchema = z.object({
  after: seqParam.optional().describe("Replay the events after this seq, then tail."),
});

/** `Last-Event-ID` (WHATWG SSE): sent by a reconnecting EventSource; it wins over `?after=`. */
export const EventsHeadersSchema = z.object({
  "last-event-id": seqParam
    .optional()
    .describe("The id of the last event seen; it wins over `after`."),
});

/** `GET /v1/threads/{id}/rollout`. */
export const ExportQuerySchema = z.object({
  allow_incomplete: z
    .stringbool()
    .default(false)
    .describe(
      "Export the lines that can be read even when some cannot (a damaged R2 segment SQLite no longer holds); the response then says how many are missing.",
    ),
});

/**
 * `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header) on requests that change a thread
 * (turns, outputs, steer, inject, rollback): a retry with the same key and request answers with
 * what the first request did.
 */
export const IdempotencyHeadersSchema = z.object({
  "idempotency-key": z
    .string()
    .regex(/^[\x21-\x7e]{1,255}$/, "1-255 visible ASCII characters")
    .optional()
    .describe(
      "Makes a retry safe: the same key with the same request within 24 hours answers with what the first request did (the same turn, its stream replayed, or the thread) instead of doing it again; with another request it is a 422.",
    ),
});

/** `POST /v1/threads/import`. */
export const ImportQuerySchema = z.object({
  id: ThreadIdSchema.optional().describe("The new thread's id; generated when absent."),
});

/** `GET /v1/threads/{id}/history`. The cursor is opaque: only the DO reads it. */
export const HistoryQuerySchema = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  cursor: z.string().min(1).max(512).optional(),
});

export const ThreadParamsSchema = z.object({ id: ThreadIdSchema });
export const TurnParamsSchema = z.object({ id: ThreadIdSchema, turn: TurnIdSchema });

export type CreateThreadBody = z.output<typeof CreateThreadBodySchema>;
export type InputPart = z.output<typeof InputPartSchema>;
export type InputMessage = z.output<typeof InputMessageSchema>;
export type TurnInput = z.output<typeof TurnInputSchema>;
export type OnBusy = z.output<typeof OnBusySchema>;
export type StartTurnBody = z.output<typeof StartTurnBodySchema>;
export type HistoryQuery = z.output<typeof HistoryQuerySchema>;
export type FunctionCallOutputInput = z.output<typeof FunctionCallOutputInputSchema>;
export type SubmitOutputsBody = z.output<typeof SubmitOutputsBodySchema>;
export type SteerBody = z.output<typeof SteerBodySchema>;
export type RollbackBody = z.output<typeof RollbackBodySchema>;
export type ForkBody = z.output<typeof ForkBodySchema>;
export type InjectBody = z.output<typeof InjectBodySchema>;

// --- Resources ----------------------------------------------------------------------------------

/**
 * The output side of the protocol's `KnownResponseItemSchema`: what a parsed item looks like. The
 * parse schema reads the alias `compaction_summary` as `compaction` through a transform, which
 * JSON Schema cannot describe; here the type is the literal the transform produces. The item
 * shapes are the protocol's own, so the two cannot drift apart (checked below).
 */
export const KnownResponseItemOutputSchema = z.discriminatedUnion("type", [
  MessageItemSchema,
  ReasoningItemSchema,
  LocalShellCallItemSchema,
  FunctionCallItemSchema,
  FunctionCallOutputItemSchema,
  CustomToolCallItemSchema,
  CustomToolCallOutputItemSchema,
  WebSearchCallItemSchema,
  CompactionItemSchema.extend({ type: z.literal("compaction") }),
]);

/**
 * The output side of `ResponseItemSchema`: a known item, or `{type: "other", original_type}`
 * for an item type this build does not know (its payload is not kept). Response schemas use this
 * one, so the OpenAPI document shows what a client receives.
 */
export const ResponseItemOutputSchema = z.union([
  KnownResponseItemOutputSchema,
  z.object({ type: z.literal("other"), original_type: z.string() }),
]);

/**
 * A thread's resolved configuration: every field decided (`SessionConfiguration`). Optional
 * fields are absent when unset; nothing is `null` here.
 */
export const ResolvedThreadConfigSchema = SessionConfigurationSchema;

export const ThreadStatusSchema = z.enum(["idle", "running", "requires_action"]);

/** Something the thread wants a client to know that is not an error (e.g. a repaired rollout). */
export const WarningSchema = z.object({ code: z.string(), message: z.string() });

/** Timestamps are RFC 3339 UTC strings, like the rollout's. */
const timestamp = z.iso.datetime();

export const ThreadResourceSchema = z.object({
  object: z.literal("thread"),
  id: ThreadIdSchema,
  status: ThreadStatusSchema,
  config: ResolvedThreadConfigSchema,
  turn_count: z.number().int().nonnegative(),
  /** Null until the first model response reports usage. */
  token_usage: TokenUsageInfoSchema.nullable(),
  created_at: timestamp,
  updated_at: timestamp,
  /** The id of the thread this one was forked from; null when it was not forked. */
  forked_from: ThreadIdSchema.nullable(),
  warnings: z.array(WarningSchema),
});

export const TurnStatusSchema = z.enum([
  "in_progress",
  "completed",
  "requires_action",
  "interrupted",
  "failed",
]);

export const TurnErrorSchema = z.object({ code: z.enum(PROBLEM_CODES), message: z.string() });

export const TurnResourceSchema = z.object({
  object: z.literal("turn"),
  id: TurnIdSchema,
  thread_id: ThreadIdSchema,
  /**
   * `compaction`: a compaction task (`POST …/compact`, or the automatic one that a turn's stream
   * shows before the turn itself when its context is near the window).
   */
  kind: z.enum(["turn", "compaction"]),
  status: TurnStatusSchema,
  /** What the turn recorded, in order: context items, the user input, model output. */
  items: z.array(ResponseItemOutputSchema),
  /** Client tool calls still waiting for a `function_call_output` (status `requires_action`). */
  pending_calls: z.array(FunctionCallItemSchema),
  /** The turn's summed usage; null before the first model response. */
  usage: TokenUsageSchema.nullable(),
  /** Set when status is `failed`. */
  error: TurnErrorSchema.nullable(),
});

/** A page of a cursor-paginated list; `next_cursor` is null on the last page. */
export function listResourceSchema<T extends z.ZodType>(item: T) {
  return z.object({
    object: z.literal("list"),
    data: z.array(item),
    next_cursor: z.string().nullable(),
  });
}

export const HistoryPageSchema = listResourceSchema(ResponseItemOutputSchema);

/** `GET …/prompt`: the provider request, with `input` documented by its output side. */
export const PromptResourceSchema = PromptSchema.extend({
  input: z.array(KnownResponseItemOutputSchema),
});

// --- Events -------------------------------------------------------------------------------------

/** Every event type, in the order a turn emits them (design §7). */
export const THREAD_EVENT_TYPES = [
  "turn.started",
  "item.completed",
  "item.delta",
  "token_count",
  "turn.completed",
  "turn.requires_action",
  "turn.interrupted",
  "turn.failed",
] as const;
export type ThreadEventType = (typeof THREAD_EVENT_TYPES)[number];

/** The events that end a turn's stream: exactly one of them comes last. */
export const TERMINAL_EVENT_TYPES = [
  "turn.completed",
  "turn.requires_action",
  "turn.interrupted",
  "turn.failed",
] as const satisfies readonly ThreadEventType[];
export type TerminalEventType = (typeof TERMINAL_EVENT_TYPES)[number];

const TERMINAL_EVENT_TYPE_SET: ReadonlySet<string> = new Set(TERMINAL_EVENT_TYPES);
export function isTerminalEventType(type: string): type is TerminalEventType {
  return TERMINAL_EVENT_TYPE_SET.has(type);
}

/** The thread's event sequence: strictly increasing per thread, never reused, not contiguous. */
const EventSeqSchema = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

function threadEvent<T extends ThreadEventType, Turn extends z.ZodType, D extends z.ZodType>(
  type: T,
  turnId: Turn,
  data: D,
) {
  return z.object({ seq: EventSeqSchema, type: z.literal(type), turn_id: turnId, data });
}

/**
 * One thread event (design §7), as a line of the DO's NDJSON streams and as the `data:` of an SSE
 * event whose `event:` is `type` and `id:` is `seq`. `turn.*` events carry the Turn as it stands
 * (the terminal ones as it ended); `item.completed` carries every recorded item, with `context`
 * true for context items (initial context, world-state diffs) and `turn_id` null for items
 * injected outside a turn; `item.delta` is streamed model text (replay may skip it);
 * `token_count` carries the thread's usage after a model response.
 */
export const ThreadEventSchema = z.discriminatedUnion("type", [
  threadEvent("turn.started", TurnIdSchema, TurnResourceSchema),
  threadEvent(
    "item.completed",
    TurnIdSchema.nullable(),
    z.object({ item: ResponseItemOutputSchema, context: z.boolean() }),
  ),
  threadEvent("item.delta", TurnIdSchema, z.object({ delta: z.string() })),
  threadEvent("token_count", TurnIdSchema, z.object({ info: TokenUsageInfoSchema.nullable() })),
  threadEvent("turn.completed", TurnIdSchema, TurnResourceSchema),
  threadEvent("turn.requires_action", TurnIdSchema, TurnResourceSchema),
  threadEvent("turn.interrupted", TurnIdSchema, TurnResourceSchema),
  threadEvent("turn.failed", TurnIdSchema, TurnResourceSchema),
]);
export type ThreadEvent = z.output<typeof ThreadEventSchema>;

/**
 * What the worker checks of each event line before framing it: the fields SSE framing needs.
 * The rest is the DO's own output and passes through as it came.
 */
export const ThreadEventEnvelopeSchema = z.looseObject({
  seq: EventSeqSchema,
  type: z.enum(THREAD_EVENT_TYPES),
});

// --- Other documented shapes --------------------------------------------------------------------

export const FieldErrorSchema = z.object({
  path: z.string().describe("RFC 6901 JSON Pointer into the body, or a parameter name"),
  message: z.string(),
});

/** RFC 9457 problem document with the `code` extension member (`errors.ts`). */
export const ProblemSchema = z.object({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  code: z.enum(PROBLEM_CODES),
  errors: z.array(FieldErrorSchema).optional(),
});

/**
 * One line of a Codex rollout (reference §1.1), as exported and imported: the envelope only;
 * `payload` depends on `type` (session_meta, response_item, turn_context, world_state, compacted,
 * event_msg, …) and unknown line types are kept.
 */
export const RolloutLineDocSchema = z.looseObject({
  timestamp: z.string(),
  ordinal: z.number().int().optional(),
  type: z.string(),
  payload: z.unknown(),
});

export const HealthSchema = z.object({ ok: z.literal(true), service: z.literal("spindle") });

/** `GET /openapi.json`: an OpenAPI 3.1 document. */
export const OpenApiDocumentSchema = z.looseObject({ openapi: z.string() });

export type ResolvedThreadConfig = z.output<typeof ResolvedThreadConfigSchema>;
export type ThreadStatus = z.output<typeof ThreadStatusSchema>;
export type Warning = z.output<typeof WarningSchema>;
export type ThreadResource = z.output<typeof ThreadResourceSchema>;
export type TurnStatus = z.output<typeof TurnStatusSchema>;
export type TurnError = z.output<typeof TurnErrorSchema>;
export type TurnResource = z.output<typeof TurnResourceSchema>;
export interface ListResource<T> {
  object: "list";
  data: T[];
  next_cursor: string | null;
}

// Documentation schemas describe the types the code uses: each pair must agree both ways, so a
// new item type in the protocol, or a changed `Problem` field, fails to compile until documented.
// (Mutual assignability does not notice an added optional field.)
type Extends<A, B> = [A] extends [B] ? true : false;
type Same<A, B> = Extends<A, B> extends true ? Extends<B, A> : false;
const documentedShapes: [
  Same<z.output<typeof ResponseItemOutputSchema>, ResponseItem>,
  Same<z.output<typeof KnownResponseItemOutputSchema>, KnownResponseItem>,
  Same<z.output<typeof PromptResourceSchema>, Prompt>,
  Same<z.output<typeof HistoryPageSchema>, ListResource<ResponseItem>>,
  Same<z.output<typeof ProblemSchema>, Problem>,
  Same<z.output<typeof FieldErrorSchema>, FieldError>,
] = [true, true, true, true, true, true];
void documentedShapes;
