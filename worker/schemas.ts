import { z } from "zod";
import {
  FunctionCallItemSchema,
  ImageDetailSchema,
  type ResponseItem,
  ResponseItemSchema,
  SessionConfigurationSchema,
  ThreadConfigSchema,
  TokenUsageInfoSchema,
  TokenUsageSchema,
} from "../shared/protocol/index.ts";
import { PROBLEM_CODES } from "./errors.ts";

/**
 * Wire shapes of HTTP API v1 (design §7): the request bodies the worker validates and the
 * resources the Thread DO returns. These zod schemas are the single definition; the types below
 * are inferred from them.
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
  stream: z.boolean().default(false),
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

// --- Resources ----------------------------------------------------------------------------------

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
  status: TurnStatusSchema,
  /** What the turn recorded, in order: context items, the user input, model output. */
  items: z.array(ResponseItemSchema),
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

export const HistoryPageSchema = listResourceSchema(ResponseItemSchema);

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

// The history page schema and the ListResource type the DO returns stay the same shape.
type Extends<A, B> = [A] extends [B] ? true : false;
const historyPageMatchesList: Extends<
  z.output<typeof HistoryPageSchema>,
  ListResource<ResponseItem>
> = true;
void historyPageMatchesList;
