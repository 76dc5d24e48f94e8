import {
  type ContentItem,
  ImageDetailSchema,
  NewThreadMetadataSchema,
  recordOf,
  ThreadConfigSchema,
} from "../protocol/index.ts";
import * as z from "../zod/index.ts";
import { ThreadIdSchema, TurnIdSchema } from "./ids.ts";
import { MAX_ADDITIONAL_CONTEXT_ENTRIES } from "./limits.ts";

/**
 * Request shapes of HTTP API v1 (design §7): the bodies, query, path and header parameters the
 * worker validates. These zod schemas are the single definition: the types are inferred from
 * them and the OpenAPI document is generated from them (documented by their input side).
 */

/**
 * `POST /v1/threads`: the thread configuration (design §8) plus an optional client-chosen id and
 * the thread's metadata (design §11).
 */
export const CreateThreadBodySchema = z.onFirstUse(() =>
  z.extend(ThreadConfigSchema, {
    id: z.optional(ThreadIdSchema),
    metadata: z
      .optional(NewThreadMetadataSchema)
      .check(
        z.describe(
          "At most 16 keys of 1-64 characters (not `__proto__`, `constructor` or `prototype`), " +
            "values of at most 512; `GET /v1/threads` filters on them.",
        ),
      ),
  }),
);

export const InputTextPartSchema = z.onFirstUse(() =>
  z.strictObject({
    type: z.literal("input_text"),
    text: z.string(),
  }),
);

/** An image by URL (`https:`/`http:`) or inline as a `data:image/...` URL. */
export const InputImagePartSchema = z.onFirstUse(() =>
  z.strictObject({
    type: z.literal("input_image"),
    image_url: z
      .string()
      .check(
        z.refine(
          (url) => /^(https?:\/\/|data:image\/)/i.test(url),
          "image_url must be an http(s) URL or a data:image/ URL",
        ),
      ),
    detail: z.optional(ImageDetailSchema),
  }),
);

export const InputPartSchema = z.onFirstUse(() =>
  z.discriminatedUnion("type", [InputTextPartSchema, InputImagePartSchema]),
);

/** A user message in Responses item form: the only item a turn's input may hold. */
export const InputMessageSchema = z.onFirstUse(() =>
  z.strictObject({
    type: z.literal("message"),
    role: z.literal("user"),
    content: z.array(InputPartSchema).check(z.minLength(1)),
  }),
);

/** A plain string is shorthand for one user message with one `input_text` part. */
export const TurnInputSchema = z.onFirstUse(() =>
  z.union([
    z.string().check(z.minLength(1)),
    z.array(InputMessageSchema).check(z.minLength(1), z.maxLength(256)),
  ]),
);

/**
 * A turn's input as the content of the one user message it records, made once at the edge: a
 * string is one `input_text` part; messages give their parts, in order.
 */
export function turnContent(input: TurnInput): ContentItem[] {
  return typeof input === "string"
    ? [{ type: "input_text", text: input }]
    : input.flatMap((message) => message.content);
}

export const BusyPolicySchema = z.onFirstUse(() =>
  z.enum(["reject", "queue", "steer", "interrupt"]),
);

/** Codex's key grammar for additional context: a letter or `_`, then `[A-Za-z0-9_.-]`; ≤ 128. */
export const AdditionalContextKeySchema = z.onFirstUse(() =>
  z
    .string()
    .check(
      z.regex(
        /^[A-Za-z_][A-Za-z0-9_.-]{0,127}$/,
        "keys are 1-128 chars of [A-Za-z0-9_.-], starting with a letter or _",
      ),
    ),
);

/**
 * A turn's additional context (Codex's `additional_context`): key → text, each sent to the model
 * as a user message `<external_{key}>…</external_{key}>` before the input, in key order, while
 * it is new or changed since the previous turn or no longer in history (a compaction dropped
 * it). Not part of the configuration: a turn that leaves a key out drops it, and a later turn
 * that brings it back sends it again.
 */
export const AdditionalContextSchema = z.onFirstUse(() =>
  recordOf(AdditionalContextKeySchema, z.string()).check(
    z.refine((entries) => Object.keys(entries).length <= MAX_ADDITIONAL_CONTEXT_ENTRIES, {
      message: `at most ${MAX_ADDITIONAL_CONTEXT_ENTRIES} entries`,
    }),
  ),
);

/** `POST /v1/threads/{id}/turns`. */
export const StartTurnBodySchema = z.onFirstUse(() =>
  z.strictObject({
    input: TurnInputSchema,
    additional_context: z.optional(AdditionalContextSchema),
    /** Settings for this turn; they become the thread's new defaults (design §8). */
    overrides: z.optional(ThreadConfigSchema),
    /** What to do when a turn is already running; `reject` answers 409 `thread_busy`. */
    on_busy: z._default(BusyPolicySchema, "reject"),
    /**
     * With `on_busy: "steer"`: the id of the turn the input should join. Required there (the
     * running turn may have changed since the client looked); 409 `turn_mismatch` when it is not
     * the running turn.
     */
    expected_turn_id: z.optional(TurnIdSchema),
    /**
     * Answer with server-sent events instead of one JSON Turn. Absent: whether `Accept` names
     * `text/event-stream`; an explicit value wins over `Accept`.
     */
    stream: z
      .optional(z.boolean())
      .check(
        z.describe(
          "Answer with server-sent events instead of JSON. Absent: SSE when Accept names text/event-stream.",
        ),
      ),
  }),
);

/** A tool's answer to one pending `function_call`: text, or input_text/input_image parts. */
export const FunctionCallOutputInputSchema = z.onFirstUse(() =>
  z.strictObject({
    type: z.literal("function_call_output"),
    call_id: z.string().check(z.minLength(1), z.maxLength(256)),
    output: z.union([z.string(), z.array(InputPartSchema).check(z.minLength(1), z.maxLength(256))]),
  }),
);

/**
 * A person's answer to an `mcp_approval_request` of the turn (Responses' item): approved, the
 * server call runs once; denied, the model is told it was not run (with `reason`, when given).
 */
export const McpApprovalResponseInputSchema = z.onFirstUse(() =>
  z.strictObject({
    type: z.literal("mcp_approval_response"),
    approval_request_id: z.string().check(z.minLength(1), z.maxLength(256)),
    approve: z.boolean(),
    reason: z.optional(z.string().check(z.maxLength(4096))),
  }),
);

/** One answer to a pending call: a client tool's output, or an approval of a server call. */
export const PendingCallAnswerInputSchema = z.onFirstUse(() =>
  z.discriminatedUnion("type", [FunctionCallOutputInputSchema, McpApprovalResponseInputSchema]),
);

/** What an answer answers: a call id, or an approval request id (each once per request). */
function answeredId(item: PendingCallAnswerInput): { path: string; id: string } {
  return item.type === "function_call_output"
    ? { path: "call_id", id: `call:${item.call_id}` }
    : { path: "approval_request_id", id: `approval:${item.approval_request_id}` };
}

/**
 * `POST …/turns/{turn}/outputs`: an answer for each of the turn's pending calls, outputs of
 * client tools and approvals of server calls.
 */
export const SubmitOutputsBodySchema = z.onFirstUse(() =>
  z.strictObject({
    items: z.array(PendingCallAnswerInputSchema).check(
      z.minLength(1),
      z.maxLength(128),
      z.superRefine((items, ctx) => {
        const seen = new Set<string>();
        items.forEach((item, index) => {
          const { path, id } = answeredId(item);
          if (seen.has(id)) {
            ctx.addIssue({
              code: "custom",
              path: [index, path],
              message:
                path === "call_id"
                  ? "This call_id already has an output in this request"
                  : "This approval_request_id already has an answer in this request",
            });
          }
          seen.add(id);
        });
      }),
    ),
    /** As for a turn; an explicit value wins over `Accept`. */
    stream: z
      .optional(z.boolean())
      .check(
        z.describe("Answer with server-sent events of the resumed turn. Absent: as Accept asks."),
      ),
  }),
);

/** `POST …/turns/{turn}/steer`: more input for the running turn. */
export const SteerBodySchema = z.onFirstUse(() => z.strictObject({ input: TurnInputSchema }));

/** Bodies of actions that take no arguments yet: empty or `{}`, so fields can come later. */
export const EmptyBodySchema = z.onFirstUse(() => z.strictObject({}));

/** `POST /v1/threads/{id}/rollback`: drop the last `turns` user turns (reference §4.5). */
export const RollbackBodySchema = z.onFirstUse(() =>
  z.strictObject({
    turns: z.number().check(z.int(), z.gte(1), z.lte(Number.MAX_SAFE_INTEGER)),
  }),
);

/** `POST /v1/threads/{id}/fork`. */
export const ForkBodySchema = z.onFirstUse(() =>
  z.strictObject({
    id: z.optional(ThreadIdSchema).check(z.describe("The new thread's id; generated when absent.")),
    before_turn: z
      .optional(TurnIdSchema)
      .check(
        z.describe(
          "The fork holds the source's rollout up to just before this turn. Absent: every ended turn.",
        ),
      ),
    metadata: z
      .optional(NewThreadMetadataSchema)
      .check(
        z.describe(
          "The new thread's metadata. Absent: the source's, as the copied rollout holds it.",
        ),
      ),
  }),
);

/** `POST /v1/threads/{id}/inject`: `{text}` or `{items}`, exactly one. */
export const InjectBodySchema = z.onFirstUse(() =>
  z
    .strictObject({
      /** Shorthand for one user message with one `input_text` part. */
      text: z.optional(z.string().check(z.minLength(1))),
      items: z.optional(z.array(InputMessageSchema).check(z.minLength(1), z.maxLength(256))),
    })
    .check(
      z.superRefine((body, ctx) => {
        if ((body.text === undefined) === (body.items === undefined)) {
          ctx.addIssue({
            code: "custom",
            path: [],
            message: "Send exactly one of `text` or `items`",
          });
        }
      }),
      z.meta({ oneOf: [{ required: ["text"] }, { required: ["items"] }] }),
    ),
);

/**
 * A number in a query parameter or header: decimal digits only, so `""`, ` 5`, `-1`, `1.0`,
 * `1e3` and `0x10` are errors rather than read as numbers (as `Number()` would read them). At
 * most `digits` digits (15 stay below 2^53).
 */
const decimalParam = (digits: number, what: string) =>
  z.pipe(
    z
      .string()
      .check(z.regex(new RegExp(`^[0-9]{1,${digits}}$`), `${what}, in decimal digits only`)),
    z.transform(Number),
  );

/** An event sequence number: 0 or more. */
const seqParam = z.onFirstUse(() => decimalParam(15, "an event sequence number: 0 or more"));

/** `GET /v1/threads/{id}/events`: replay after this sequence number, then tail. */
export const EventsQuerySchema = z.onFirstUse(() =>
  z.strictObject({
    after: z.optional(seqParam).check(z.describe("Replay the events after this seq, then tail.")),
  }),
);

/** `Last-Event-ID` (WHATWG SSE): sent by a reconnecting EventSource; it wins over `?after=`. */
export const EventsHeadersSchema = z.onFirstUse(() =>
  z.object({
    "last-event-id": z
      .optional(seqParam)
      .check(z.describe("The id of the last event seen; it wins over `after`.")),
  }),
);

/** `GET /v1/threads/{id}/rollout`. */
export const ExportQuerySchema = z.onFirstUse(() =>
  z.strictObject({
    allow_incomplete: z
      ._default(z.stringbool(), false)
      .check(
        z.describe(
          "Export the lines that can be read even when some cannot (a damaged R2 segment SQLite no longer holds); the response then says how many are missing.",
        ),
      ),
  }),
);

/**
 * `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header) on requests that change a thread
 * (turns, outputs, steer, inject, rollback): a retry with the same key and request answers with
 * what the first request did.
 */
export const IdempotencyHeadersSchema = z.onFirstUse(() =>
  z.object({
    "idempotency-key": z
      .optional(z.string().check(z.regex(/^[\x21-\x7e]{1,255}$/, "1-255 visible ASCII characters")))
      .check(
        z.describe(
          "Makes a retry safe: the same key with the same request within 24 hours answers with what the first request did (the same turn, its stream replayed, or the thread) instead of doing it again; with another request it is a 422.",
        ),
      ),
  }),
);

/** `POST /v1/threads/import`. */
export const ImportQuerySchema = z.onFirstUse(() =>
  z.strictObject({
    id: z.optional(ThreadIdSchema).check(z.describe("The new thread's id; generated when absent.")),
    parent: z
      .optional(ThreadIdSchema)
      .check(
        z.describe(
          "For a paginated Codex fork (its session_meta has a history_base): the thread imported " +
            "from its parent rollout, whose lines its history starts with.",
        ),
      ),
  }),
);

/** A page size in a query: 1 to `max` in decimal digits, `fallback` when absent. */
export const pageLimitParam = (max: number, fallback: number) =>
  z
    .prefault(
      z.pipe(
        decimalParam(String(max).length, `1-${max} items`),
        z.number().check(z.gte(1), z.lte(max)),
      ),
      String(fallback),
    )
    .check(z.describe(`Items per page: 1-${max}, in decimal digits; default ${fallback}.`));

/** `GET /v1/threads/{id}/history`. The cursor is opaque: only the DO reads it. */
export const HistoryQuerySchema = z.onFirstUse(() =>
  z.strictObject({
    limit: pageLimitParam(1000, 100),
    cursor: z.optional(z.string().check(z.minLength(1), z.maxLength(512))),
  }),
);

export const ThreadParamsSchema = z.onFirstUse(() => z.object({ id: ThreadIdSchema }));
export const TurnParamsSchema = z.onFirstUse(() =>
  z.object({ id: ThreadIdSchema, turn: TurnIdSchema }),
);

export type CreateThreadBody = z.output<typeof CreateThreadBodySchema>;
export type InputPart = z.output<typeof InputPartSchema>;
export type InputMessage = z.output<typeof InputMessageSchema>;
export type TurnInput = z.output<typeof TurnInputSchema>;
export type BusyPolicy = z.output<typeof BusyPolicySchema>;
export type StartTurnBody = z.output<typeof StartTurnBodySchema>;
export type HistoryQuery = z.output<typeof HistoryQuerySchema>;
export type FunctionCallOutputInput = z.output<typeof FunctionCallOutputInputSchema>;
export type McpApprovalResponseInput = z.output<typeof McpApprovalResponseInputSchema>;
export type PendingCallAnswerInput = z.output<typeof PendingCallAnswerInputSchema>;
export type SubmitOutputsBody = z.output<typeof SubmitOutputsBodySchema>;
export type SteerBody = z.output<typeof SteerBodySchema>;
export type RollbackBody = z.output<typeof RollbackBodySchema>;
export type ForkBody = z.output<typeof ForkBodySchema>;
export type InjectBody = z.output<typeof InjectBodySchema>;
