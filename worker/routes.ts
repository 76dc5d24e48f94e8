/**
 * The route table of HTTP API v1 (design §7): the single list of routes. `createApp` registers
 * exactly these (each with its handler, which the compiler requires) and validates requests with
 * their schemas; `openapi.ts` documents exactly these from the same schemas. A route cannot
 * exist in one place and not the other.
 */
import { z } from "zod";
import {
  CreateThreadBodySchema,
  EmptyBodySchema,
  EventsHeadersSchema,
  EventsQuerySchema,
  ExportQuerySchema,
  ForkBodySchema,
  HistoryPageSchema,
  HistoryQuerySchema,
  IdempotencyHeadersSchema,
  ImportQuerySchema,
  InjectBodySchema,
  jsonBodyMaxBytes,
  type ProblemCode,
  PromptResourceSchema,
  RollbackBodySchema,
  RolloutLineDocSchema,
  StartTurnBodySchema,
  SteerBodySchema,
  SubmitOutputsBodySchema,
  ThreadEventSchema,
  ThreadParamsSchema,
  ThreadResourceSchema,
  TurnParamsSchema,
  TurnResourceSchema,
  turnBodyMaxBytes,
} from "../shared/api/index.ts";

export const HealthSchema = z.object({ ok: z.literal(true), service: z.literal("spindle") });

/** `GET /openapi.json`: an OpenAPI 3.1 document. */
export const OpenApiDocumentSchema = z.looseObject({ openapi: z.string() });

export type HttpMethod = "get" | "post" | "delete";

/** A JSON body: limited to `maxBytes`, then parsed with `schema` (an empty body reads as `{}`). */
export interface JsonBodySpec<S extends z.ZodType = z.ZodType> {
  kind: "json";
  schema: S;
  maxBytes: number;
}

/** A Codex rollout JSONL body, streamed to the DO unparsed (its size limit is an app option). */
export interface RolloutBodySpec {
  kind: "rollout";
  /** Accepted media types; any other is 415 `unsupported_media_type`. */
  mediaTypes: readonly string[];
}

/**
 * One way a response body is written, for the document: `json` is the schema of the body, `sse`
 * and `ndjson` the schema of each event's `data` or of each line (the OpenAPI 3.1 convention for
 * streams, as OpenAI's document uses for SSE).
 */
export interface ContentSpec {
  format: "json" | "sse" | "ndjson";
  schema: z.ZodType;
}

export interface ResponseSpec {
  description: string;
  content?: readonly ContentSpec[];
  /** Response header name → its description. */
  headers?: Readonly<Record<string, string>>;
}

export interface RouteSpec {
  method: HttpMethod;
  /** OpenAPI path template (`/v1/threads/{id}`); every route under `/v1/` needs an API key. */
  path: string;
  summary: string;
  description?: string;
  params?: z.ZodObject;
  query?: z.ZodObject;
  /** Header parameters; keys lowercase (`c.req.header()` gives them so). */
  headers?: z.ZodObject;
  body?: JsonBodySpec | RolloutBodySpec;
  responses: Readonly<Record<number, ResponseSpec>>;
  /**
   * The problem codes this route answers with beyond the ones every route of its kind has
   * (`unauthorized`, `invalid_request` for a validated request, `payload_too_large` for a body,
   * `internal`), which the document adds itself.
   */
  errors: readonly ProblemCode[];
}

/** What a route that takes an `Idempotency-Key` may answer besides its own codes. */
const KEYED_ERRORS = ["idempotency_key_reused", "idempotency_key_in_use"] as const;

const jsonBody = <S extends z.ZodType>(schema: S, maxBytes: number): JsonBodySpec<S> => ({
  kind: "json",
  schema,
  maxBytes,
});
const json = (schema: z.ZodType): readonly ContentSpec[] => [{ format: "json", schema }];
const sse: ContentSpec = { format: "sse", schema: ThreadEventSchema };
const threadCreated = (description: string): ResponseSpec => ({
  description,
  content: json(ThreadResourceSchema),
  headers: { Location: "The new thread's URL." },
});

/** The media types an import accepts: the JSONL spellings in use, and plain text for curl. */
export const IMPORT_MEDIA_TYPES: readonly string[] = [
  "application/x-ndjson",
  "application/jsonl",
  "text/plain",
];

const SSE_DESCRIPTION =
  "With `stream: true` or `Accept: text/event-stream`: server-sent events, `event:` the type, " +
  "`id:` the thread's event seq, `data:` the ThreadEvent as JSON; a `: keep-alive` comment " +
  "after 15 s of silence; the last event is the turn's terminal event, or an `error` event " +
  "(data: a problem document, no id) when the stream broke off.";

/**
 * Every route, in document order. The key is the OpenAPI `operationId` and names the handler in
 * `app.ts`.
 */
export const API_ROUTES = {
  health: {
    method: "get",
    path: "/healthz",
    summary: "Liveness",
    responses: { 200: { description: "The worker is up.", content: json(HealthSchema) } },
    errors: [],
  },
  openApiDocument: {
    method: "get",
    path: "/openapi.json",
    summary: "This API's OpenAPI 3.1 document",
    responses: { 200: { description: "The document.", content: json(OpenApiDocumentSchema) } },
    errors: [],
  },
  createThread: {
    method: "post",
    path: "/v1/threads",
    summary: "Create a thread",
    description: "Configuration as in design §8; what the body leaves out takes the defaults.",
    headers: IdempotencyHeadersSchema,
    body: jsonBody(CreateThreadBodySchema, jsonBodyMaxBytes),
    responses: { 201: threadCreated("The new thread.") },
    errors: ["thread_exists", "unknown_model", "context_window_exceeded", "idempotency_key_reused"],
  },
  importThread: {
    method: "post",
    path: "/v1/threads/import",
    summary: "Import a Codex rollout as a new thread",
    description:
      "The body is a Codex rollout JSONL file (one rollout line per line), streamed and limited " +
      "to 64 MiB, each line to 32 MiB (413 `payload_too_large`, also mid-upload). Other media " +
      "types than the ones listed are 415 `unsupported_media_type`, with `Accept-Post`. A line " +
      "that cannot be read (not JSON, nested deeper than 64 levels, a wrong envelope) is 400 " +
      "`invalid_request` with `errors[0].path` `/line/{n}`. The thread resumes from the " +
      "rollout: no context is written before its first turn. What the rollout holds that cannot " +
      "be used shows in the thread's `warnings`. A paginated Codex fork is imported with " +
      "`?parent=` naming the thread imported from its parent rollout; without it the answer is " +
      "400 `parent_rollout_required`.",
    query: ImportQuerySchema,
    headers: IdempotencyHeadersSchema,
    body: { kind: "rollout", mediaTypes: IMPORT_MEDIA_TYPES },
    responses: { 201: threadCreated("The imported thread.") },
    errors: [
      "thread_exists",
      "not_found",
      "parent_rollout_required",
      "unsupported_media_type",
      "idempotency_key_reused",
    ],
  },
  getThread: {
    method: "get",
    path: "/v1/threads/{id}",
    summary: "Get a thread",
    params: ThreadParamsSchema,
    responses: { 200: { description: "The thread.", content: json(ThreadResourceSchema) } },
    errors: ["not_found"],
  },
  deleteThread: {
    method: "delete",
    path: "/v1/threads/{id}",
    summary: "Delete a thread, its state and its R2 objects",
    params: ThreadParamsSchema,
    responses: { 204: { description: "Deleted." } },
    errors: ["not_found"],
  },
  startTurn: {
    method: "post",
    path: "/v1/threads/{id}/turns",
    summary: "Start a turn",
    description:
      "JSON: the Turn when it ends or pauses (`requires_action`), 202 when it was queued. " +
      "Errors before the first event are problem documents either way; a provider that fails " +
      "during the turn ends it `failed`, with `error.code` `provider_error` in the Turn.",
    params: ThreadParamsSchema,
    headers: IdempotencyHeadersSchema,
    body: jsonBody(StartTurnBodySchema, turnBodyMaxBytes),
    responses: {
      200: {
        description: `The turn as it ended or paused. ${SSE_DESCRIPTION}`,
        content: [...json(TurnResourceSchema), sse],
      },
      202: {
        description: "The turn is queued (`on_busy: queue`).",
        content: json(TurnResourceSchema),
      },
    },
    errors: [
      "not_found",
      "thread_busy",
      "turn_mismatch",
      "turn_not_steerable",
      "unknown_model",
      "context_window_exceeded",
      "event_expired",
      ...KEYED_ERRORS,
    ],
  },
  getTurn: {
    method: "get",
    path: "/v1/threads/{id}/turns/{turn}",
    summary: "Get a turn",
    params: TurnParamsSchema,
    responses: { 200: { description: "The turn.", content: json(TurnResourceSchema) } },
    errors: ["not_found", "turn_not_found"],
  },
  submitOutputs: {
    method: "post",
    path: "/v1/threads/{id}/turns/{turn}/outputs",
    summary: "Send outputs for a turn's pending tool calls",
    description:
      "When no call is left pending the turn resumes, and the answer comes when it ends or " +
      "pauses again; otherwise at once, still `requires_action`. All or nothing.",
    params: TurnParamsSchema,
    headers: IdempotencyHeadersSchema,
    body: jsonBody(SubmitOutputsBodySchema, turnBodyMaxBytes),
    responses: {
      200: {
        description: `The turn after the outputs. ${SSE_DESCRIPTION}`,
        content: [...json(TurnResourceSchema), sse],
      },
    },
    errors: [
      "not_found",
      "turn_not_found",
      "thread_busy",
      "no_pending_calls",
      "unknown_call_id",
      "event_expired",
      ...KEYED_ERRORS,
    ],
  },
  steerTurn: {
    method: "post",
    path: "/v1/threads/{id}/turns/{turn}/steer",
    summary: "Add input to the running turn",
    description: "The input is recorded before the turn's next model call; answers at once.",
    params: TurnParamsSchema,
    headers: IdempotencyHeadersSchema,
    body: jsonBody(SteerBodySchema, turnBodyMaxBytes),
    responses: { 200: { description: "The running turn.", content: json(TurnResourceSchema) } },
    errors: ["not_found", "turn_not_found", "turn_mismatch", "turn_not_steerable", ...KEYED_ERRORS],
  },
  interruptTurn: {
    method: "post",
    path: "/v1/threads/{id}/turns/{turn}/interrupt",
    summary: "End a turn as interrupted",
    description: "Answers once the turn has ended; a turn that already ended is answered as is.",
    params: TurnParamsSchema,
    body: jsonBody(EmptyBodySchema, jsonBodyMaxBytes),
    responses: { 200: { description: "The ended turn.", content: json(TurnResourceSchema) } },
    errors: ["not_found", "turn_not_found"],
  },
  getEvents: {
    method: "get",
    path: "/v1/threads/{id}/events",
    summary: "Stream the thread's events",
    description:
      "Replays the retained events after `Last-Event-ID` (or `after`), then streams live events " +
      "of every turn until the client disconnects. Without either: live events only. 410 " +
      "`event_expired` when events after that point are no longer retained.",
    params: ThreadParamsSchema,
    query: EventsQuerySchema,
    headers: EventsHeadersSchema,
    responses: {
      200: {
        description:
          "Server-sent events, framed as for a streamed turn, with no terminal event: the " +
          "stream ends only when the client leaves or the thread goes away.",
        content: [sse],
      },
    },
    errors: ["not_found", "event_expired"],
  },
  rollbackThread: {
    method: "post",
    path: "/v1/threads/{id}/rollback",
    summary: "Drop the last n user turns",
    params: ThreadParamsSchema,
    headers: IdempotencyHeadersSchema,
    body: jsonBody(RollbackBodySchema, jsonBodyMaxBytes),
    responses: { 200: { description: "The thread.", content: json(ThreadResourceSchema) } },
    errors: ["not_found", "thread_busy", ...KEYED_ERRORS],
  },
  forkThread: {
    method: "post",
    path: "/v1/threads/{id}/fork",
    summary: "Fork a new thread from this one's rollout",
    description:
      "The new thread (same tenant) holds the source's rollout up to `before_turn`, or every " +
      "turn that has ended; its `forked_from` is the source.",
    params: ThreadParamsSchema,
    headers: IdempotencyHeadersSchema,
    body: jsonBody(ForkBodySchema, jsonBodyMaxBytes),
    responses: { 201: threadCreated("The new thread.") },
    errors: ["not_found", "turn_not_found", "thread_exists", "idempotency_key_reused"],
  },
  compactThread: {
    method: "post",
    path: "/v1/threads/{id}/compact",
    summary: "Run a compaction turn",
    params: ThreadParamsSchema,
    headers: IdempotencyHeadersSchema,
    body: jsonBody(EmptyBodySchema, jsonBodyMaxBytes),
    responses: { 200: { description: "The compaction turn.", content: json(TurnResourceSchema) } },
    errors: ["not_found", "thread_busy", ...KEYED_ERRORS],
  },
  injectItems: {
    method: "post",
    path: "/v1/threads/{id}/inject",
    summary: "Record user messages without a turn",
    description: "While a turn runs, they join it as pending input.",
    params: ThreadParamsSchema,
    headers: IdempotencyHeadersSchema,
    body: jsonBody(InjectBodySchema, turnBodyMaxBytes),
    responses: { 200: { description: "The thread.", content: json(ThreadResourceSchema) } },
    errors: ["not_found", "thread_busy", ...KEYED_ERRORS],
  },
  listHistory: {
    method: "get",
    path: "/v1/threads/{id}/history",
    summary: "List the live history items",
    params: ThreadParamsSchema,
    query: HistoryQuerySchema,
    responses: { 200: { description: "A page of items.", content: json(HistoryPageSchema) } },
    errors: ["not_found"],
  },
  getPrompt: {
    method: "get",
    path: "/v1/threads/{id}/prompt",
    summary: "The exact next provider request",
    params: ThreadParamsSchema,
    responses: { 200: { description: "The prompt.", content: json(PromptResourceSchema) } },
    errors: ["not_found"],
  },
  exportRollout: {
    method: "get",
    path: "/v1/threads/{id}/rollout",
    summary: "Export the rollout as Codex JSONL",
    description:
      "A rollout with lines that cannot be read (a damaged R2 segment whose lines SQLite no longer holds) is refused with `rollout_incomplete`, so an export is never silently partial; `allow_incomplete=true` exports the lines that can be read.",
    params: ThreadParamsSchema,
    query: ExportQuerySchema,
    responses: {
      200: {
        description: "The rollout, streamed: one rollout line per line.",
        content: [{ format: "ndjson", schema: RolloutLineDocSchema }],
        headers: {
          "Spindle-Missing-Lines":
            "Only with `allow_incomplete=true` and lines missing: how many of the rollout's lines the export lacks.",
        },
      },
    },
    errors: ["not_found", "rollout_incomplete"],
  },
  restoreThread: {
    method: "post",
    path: "/v1/threads/{id}/restore",
    summary: "Rebuild the thread from its R2 rollout",
    params: ThreadParamsSchema,
    responses: { 200: { description: "The rebuilt thread.", content: json(ThreadResourceSchema) } },
    errors: ["not_found", "thread_busy"],
  },
} as const satisfies Record<string, RouteSpec>;

export type OperationId = keyof typeof API_ROUTES;

type Parsed<R, K extends string> = R extends { [P in K]: infer S extends z.ZodType }
  ? z.output<S>
  : undefined;

/** What a handler receives: each validated part of the request, `undefined` when not declared. */
export interface RouteInput<R> {
  param: Parsed<R, "params">;
  query: Parsed<R, "query">;
  header: Parsed<R, "headers">;
  body: R extends { body: JsonBodySpec<infer S> } ? z.output<S> : undefined;
}

/** `{id}` → `:id`: Hono's spelling of a path template. */
export function honoPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, ":$1");
}

/** Whether a concrete request path matches a path template. */
export function matchesPath(template: string, path: string): boolean {
  const pattern = template
    .split(/\{\w+\}/)
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join("[^/]+");
  return new RegExp(`^${pattern}$`).test(path);
}
