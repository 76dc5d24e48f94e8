/**
 * The route table of HTTP API v1 (design §7): the single list of routes. `createApp` registers
 * exactly these (each with its handler, which the compiler requires) and validates requests with
 * their schemas; `openapi.ts` documents exactly these from the same schemas. A route cannot
 * exist in one place and not the other.
 */

import {
  ApiKeyResourceSchema,
  CreatedApiKeySchema,
  CreatedEndpointSchema,
  CreatedHookSchema,
  CreateEndpointBodySchema,
  CreateHookBodySchema,
  CreateKeyBodySchema,
  CreateMcpServerBodySchema,
  CreateTenantBodySchema,
  CreateThreadBodySchema,
  DeliveryResourceSchema,
  EmptyBodySchema,
  EndpointParamsSchema,
  EndpointResourceSchema,
  EventsHeadersSchema,
  EventsQuerySchema,
  ExportQuerySchema,
  ForkBodySchema,
  HistoryPageSchema,
  HistoryQuerySchema,
  HookDeliveryParamsSchema,
  HookParamsSchema,
  HookResourceSchema,
  IdempotencyHeadersSchema,
  ImportQuerySchema,
  InjectBodySchema,
  jsonBodyMaxBytes,
  KeyParamsSchema,
  ListQuerySchema,
  ListThreadsQuerySchema,
  listResourceSchema,
  McpServerParamsSchema,
  McpServerResourceSchema,
  mcpServerTimeoutMsDefault,
  PatchEndpointBodySchema,
  PatchMcpServerBodySchema,
  PatchTenantBodySchema,
  PatchThreadBodySchema,
  PromptResourceSchema,
  RollbackBodySchema,
  RolloutLineDocSchema,
  RotateHookSecretBodySchema,
  SlackChallengeSchema,
  StartTurnBodySchema,
  SteerBodySchema,
  SubmitOutputsBodySchema,
  TenantKeyParamsSchema,
  TenantParamsSchema,
  TenantResourceSchema,
  ThreadEventSchema,
  ThreadParamsSchema,
  ThreadResourceSchema,
  TurnParamsSchema,
  TurnRequestsResourceSchema,
  TurnResourceSchema,
  TurnSummarySchema,
  tenantLimits,
  turnBodyMaxBytes,
  UsageBucketSchema,
  UsageQuerySchema,
  WebhookDeliverySchema,
  webhookBodyMaxBytes,
} from "../shared/api/index.ts";
import * as z from "../shared/zod/index.ts";
import { OPENAI_ROUTES } from "./openai-routes.ts";
import {
  type ContentSpec,
  type JsonBodySpec,
  json,
  jsonBody,
  type ResponseSpec,
  type RouteSpec,
} from "./route-spec.ts";

export * from "./route-spec.ts";

export const HealthSchema = z.onFirstUse(() =>
  z.object({ ok: z.literal(true), service: z.literal("spindle") }),
);

/** `GET /openapi.json`: an OpenAPI 3.1 document. */
export const OpenApiDocumentSchema = z.onFirstUse(() => z.looseObject({ openapi: z.string() }));

/** What a route that takes an `Idempotency-Key` may answer besides its own codes. */
const KEYED_ERRORS = ["idempotency_key_reused", "idempotency_key_in_use"] as const;

const sse: ContentSpec = { format: "sse", schema: ThreadEventSchema };
const threadCreated = (description: string): ResponseSpec => ({
  description,
  content: json(ThreadResourceSchema),
  headers: { Location: "The new thread's URL." },
});
const ThreadListSchema = z.onFirstUse(() => listResourceSchema(ThreadResourceSchema));
const TenantListSchema = z.onFirstUse(() => listResourceSchema(TenantResourceSchema));
const ApiKeyListSchema = z.onFirstUse(() => listResourceSchema(ApiKeyResourceSchema));
const UsageListSchema = z.onFirstUse(() => listResourceSchema(UsageBucketSchema));
const HookListSchema = z.onFirstUse(() => listResourceSchema(HookResourceSchema));
const DeliveryListSchema = z.onFirstUse(() => listResourceSchema(DeliveryResourceSchema));
const EndpointListSchema = z.onFirstUse(() => listResourceSchema(EndpointResourceSchema));
const WebhookDeliveryListSchema = z.onFirstUse(() => listResourceSchema(WebhookDeliverySchema));
const McpServerListSchema = z.onFirstUse(() => listResourceSchema(McpServerResourceSchema));
const TurnSummaryListSchema = z.onFirstUse(() => listResourceSchema(TurnSummarySchema));

/** What `POST /hooks/{tenant}/{hook}` answers with 200: a duplicate's first delivery, or Slack's challenge. */
export const HookAnswerSchema = z.onFirstUse(() =>
  z.union([DeliveryResourceSchema, SlackChallengeSchema]),
);

/** The schemas of the list resources of this table, named in the OpenAPI document. */
export const LIST_SCHEMAS = {
  ThreadList: ThreadListSchema,
  TenantList: TenantListSchema,
  ApiKeyList: ApiKeyListSchema,
  UsageList: UsageListSchema,
  HookList: HookListSchema,
  DeliveryList: DeliveryListSchema,
  WebhookEndpointList: EndpointListSchema,
  WebhookDeliveryList: WebhookDeliveryListSchema,
  McpServerList: McpServerListSchema,
  TurnSummaryList: TurnSummaryListSchema,
};

/** The quota a turn-starting route may refuse with (429, `Retry-After` for `tokens_per_day`). */
const QUOTA_ERRORS = ["quota_exceeded"] as const;

/** What a create of something a tenant holds a limited number of may answer (409, `limit`). */
const LIMIT_ERRORS = ["limit_exceeded"] as const;

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
    access: "public",
    summary: "Liveness",
    responses: { 200: { description: "The worker is up.", content: json(HealthSchema) } },
    errors: [],
  },
  openApiDocument: {
    method: "get",
    path: "/openapi.json",
    access: "public",
    summary: "This API's OpenAPI 3.1 document",
    responses: { 200: { description: "The document.", content: json(OpenApiDocumentSchema) } },
    errors: [],
  },
  createThread: {
    method: "post",
    path: "/v1/threads",
    access: "threads",
    summary: "Create a thread",
    description: "Configuration as in design §8; what the body leaves out takes the defaults.",
    headers: IdempotencyHeadersSchema,
    body: jsonBody(CreateThreadBodySchema, jsonBodyMaxBytes),
    responses: { 201: threadCreated("The new thread.") },
    errors: [
      "thread_exists",
      "unknown_model",
      "context_window_exceeded",
      "idempotency_key_reused",
      ...QUOTA_ERRORS,
    ],
  },
  importThread: {
    method: "post",
    path: "/v1/threads/import",
    access: "threads",
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
      ...QUOTA_ERRORS,
    ],
  },
  getThread: {
    method: "get",
    path: "/v1/threads/{id}",
    access: "threads",
    summary: "Get a thread",
    params: ThreadParamsSchema,
    responses: { 200: { description: "The thread.", content: json(ThreadResourceSchema) } },
    errors: ["not_found"],
  },
  listThreads: {
    method: "get",
    path: "/v1/threads",
    access: "threads",
    summary: "List the tenant's threads",
    description:
      "Newest `updated_at` first (or oldest with `order=asc`), in keyset pages. Each item is the " +
      "thread as of its last index update, which follows the thread's own changes within about " +
      "a second; `GET /v1/threads/{id}` answers with the thread as it is now.",
    query: ListThreadsQuerySchema,
    responses: { 200: { description: "A page of threads.", content: json(ThreadListSchema) } },
    errors: [],
  },
  patchThread: {
    method: "patch",
    path: "/v1/threads/{id}",
    access: "threads",
    summary: "Change a thread's metadata",
    description:
      "`metadata` is a JSON merge patch: a string sets a key, null removes it; at most 16 keys " +
      "after the patch.",
    params: ThreadParamsSchema,
    body: jsonBody(PatchThreadBodySchema, jsonBodyMaxBytes),
    responses: { 200: { description: "The thread.", content: json(ThreadResourceSchema) } },
    errors: ["not_found"],
  },
  deleteThread: {
    method: "delete",
    path: "/v1/threads/{id}",
    access: "threads",
    summary: "Delete a thread, its state and its R2 objects",
    params: ThreadParamsSchema,
    responses: { 204: { description: "Deleted." } },
    errors: ["not_found"],
  },
  startTurn: {
    method: "post",
    path: "/v1/threads/{id}/turns",
    access: "threads",
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
      ...QUOTA_ERRORS,
    ],
  },
  listTurns: {
    method: "get",
    path: "/v1/threads/{id}/turns",
    access: "threads",
    summary: "List the thread's turns, newest first",
    description:
      "Each turn's times, usage, previews of its input and output and the seq range of its " +
      "rollout lines (`GET …/rollout`), without its items (`GET …/turns/{turn}`). Turns that " +
      "ended before they started (queued, then interrupted) recorded no line and are left out.",
    params: ThreadParamsSchema,
    query: ListQuerySchema,
    responses: { 200: { description: "A page of turns.", content: json(TurnSummaryListSchema) } },
    errors: ["not_found"],
  },
  getTurn: {
    method: "get",
    path: "/v1/threads/{id}/turns/{turn}",
    access: "threads",
    summary: "Get a turn",
    params: TurnParamsSchema,
    responses: { 200: { description: "The turn.", content: json(TurnResourceSchema) } },
    errors: ["not_found", "turn_not_found"],
  },
  listTurnRequests: {
    method: "get",
    path: "/v1/threads/{id}/turns/{turn}/requests",
    access: "threads",
    summary: "The provider requests of a turn",
    description:
      "Each provider request the turn made, rebuilt from the rollout: instructions, input and tools as the provider received them, its usage, and its cache report against the thread's previous request (design §14); with the turn's raw rollout lines. Requests of a turn imported from a Codex rollout were not recorded: `data` is empty.",
    params: TurnParamsSchema,
    responses: {
      200: { description: "The turn's requests.", content: json(TurnRequestsResourceSchema) },
    },
    errors: ["not_found", "turn_not_found"],
  },
  submitOutputs: {
    method: "post",
    path: "/v1/threads/{id}/turns/{turn}/outputs",
    access: "threads",
    summary: "Send outputs for a turn's pending tool calls, and answers to its MCP approvals",
    description:
      "Every pending call is answered: a client tool's with a `function_call_output`, an MCP " +
      "server call held for approval with an `mcp_approval_response` naming its request (approved, " +
      "the call runs once; denied, the model is told). The turn then resumes, and the answer " +
      "comes when it ends or pauses again. All or nothing.",
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
      ...QUOTA_ERRORS,
    ],
  },
  steerTurn: {
    method: "post",
    path: "/v1/threads/{id}/turns/{turn}/steer",
    access: "threads",
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
    access: "threads",
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
    access: "threads",
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
    access: "threads",
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
    access: "threads",
    summary: "Fork a new thread from this one's rollout",
    description:
      "The new thread (same tenant) holds the source's rollout up to `before_turn`, or every " +
      "turn that has ended; its `forked_from` is the source.",
    params: ThreadParamsSchema,
    headers: IdempotencyHeadersSchema,
    body: jsonBody(ForkBodySchema, jsonBodyMaxBytes),
    responses: { 201: threadCreated("The new thread.") },
    errors: [
      "not_found",
      "turn_not_found",
      "thread_exists",
      "idempotency_key_reused",
      ...QUOTA_ERRORS,
    ],
  },
  compactThread: {
    method: "post",
    path: "/v1/threads/{id}/compact",
    access: "threads",
    summary: "Run a compaction turn",
    params: ThreadParamsSchema,
    headers: IdempotencyHeadersSchema,
    body: jsonBody(EmptyBodySchema, jsonBodyMaxBytes),
    responses: { 200: { description: "The compaction turn.", content: json(TurnResourceSchema) } },
    errors: ["not_found", "thread_busy", ...KEYED_ERRORS, ...QUOTA_ERRORS],
  },
  injectItems: {
    method: "post",
    path: "/v1/threads/{id}/inject",
    access: "threads",
    summary: "Record user messages without a turn",
    description: "While a turn runs, they join it as pending input.",
    params: ThreadParamsSchema,
    headers: IdempotencyHeadersSchema,
    body: jsonBody(InjectBodySchema, turnBodyMaxBytes),
    responses: { 200: { description: "The thread.", content: json(ThreadResourceSchema) } },
    errors: ["not_found", "thread_busy", ...KEYED_ERRORS, ...QUOTA_ERRORS],
  },
  listHistory: {
    method: "get",
    path: "/v1/threads/{id}/history",
    access: "threads",
    summary: "List the live history items",
    params: ThreadParamsSchema,
    query: HistoryQuerySchema,
    responses: { 200: { description: "A page of items.", content: json(HistoryPageSchema) } },
    errors: ["not_found"],
  },
  getPrompt: {
    method: "get",
    path: "/v1/threads/{id}/prompt",
    access: "threads",
    summary: "The exact next provider request",
    params: ThreadParamsSchema,
    responses: { 200: { description: "The prompt.", content: json(PromptResourceSchema) } },
    errors: ["not_found"],
  },
  exportRollout: {
    method: "get",
    path: "/v1/threads/{id}/rollout",
    access: "threads",
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
    access: "threads",
    summary: "Rebuild the thread from its R2 rollout",
    params: ThreadParamsSchema,
    responses: { 200: { description: "The rebuilt thread.", content: json(ThreadResourceSchema) } },
    errors: ["not_found", "thread_busy"],
  },
  getUsage: {
    method: "get",
    path: "/v1/usage",
    access: "usage",
    summary: "The tenant's token usage, by UTC day, thread or model",
    description:
      "Sums of the usage ledger: every provider request's tokens, counted once, in the bucket of " +
      "its UTC day, thread and model. `turns` counts a turn in the bucket of its first request.",
    query: UsageQuerySchema,
    responses: { 200: { description: "The buckets, by key.", content: json(UsageListSchema) } },
    errors: [],
  },
  createKey: {
    method: "post",
    path: "/v1/keys",
    access: "keys",
    summary: "Create an API key of the caller's tenant",
    description:
      "The secret is in this answer only. A key may give only scopes it has itself; without " +
      "`scopes` the new key gets the caller's. Keys of `SPINDLE_API_KEYS` manage no keys (403). " +
      `A tenant holds at most ${tenantLimits.api_keys_per_tenant} keys (409 \`limit_exceeded\`).`,
    body: jsonBody(CreateKeyBodySchema, jsonBodyMaxBytes),
    responses: { 201: { description: "The new key.", content: json(CreatedApiKeySchema) } },
    // `not_found`: a key still trusted by an isolate while its tenant is being deleted.
    errors: ["not_found", ...LIMIT_ERRORS],
  },
  listKeys: {
    method: "get",
    path: "/v1/keys",
    access: "keys",
    summary: "List the caller's tenant's API keys (never their secrets)",
    query: ListQuerySchema,
    responses: { 200: { description: "A page of keys.", content: json(ApiKeyListSchema) } },
    errors: [],
  },
  revokeKey: {
    method: "delete",
    path: "/v1/keys/{key_id}",
    access: "keys",
    summary: "Revoke an API key",
    description: "The key fails everywhere within 30 s (at once through this worker's isolate).",
    params: KeyParamsSchema,
    responses: { 204: { description: "Revoked." } },
    errors: ["not_found"],
  },
  createTenant: {
    method: "post",
    path: "/v1/admin/tenants",
    access: "admin",
    summary: "Create a tenant",
    description:
      "`jurisdiction` is fixed from now on: the tenant's Durable Objects and R2 objects are " +
      "created there. An id that a static key of `SPINDLE_API_KEYS` names is taken.",
    body: jsonBody(CreateTenantBodySchema, jsonBodyMaxBytes),
    responses: {
      201: {
        description: "The new tenant.",
        content: json(TenantResourceSchema),
        headers: { Location: "The tenant's URL." },
      },
    },
    errors: ["tenant_exists"],
  },
  listTenants: {
    method: "get",
    path: "/v1/admin/tenants",
    access: "admin",
    summary: "List the tenants",
    query: ListQuerySchema,
    responses: { 200: { description: "A page of tenants.", content: json(TenantListSchema) } },
    errors: [],
  },
  getTenant: {
    method: "get",
    path: "/v1/admin/tenants/{tenant}",
    access: "admin",
    summary: "Get a tenant",
    params: TenantParamsSchema,
    responses: { 200: { description: "The tenant.", content: json(TenantResourceSchema) } },
    errors: ["not_found"],
  },
  patchTenant: {
    method: "patch",
    path: "/v1/admin/tenants/{tenant}",
    access: "admin",
    summary: "Change a tenant's name or quotas",
    description:
      "`quotas` is merged: a number sets one, null removes it. Requests see the change within " +
      "30 s (at once through this worker's isolate).",
    params: TenantParamsSchema,
    body: jsonBody(PatchTenantBodySchema, jsonBodyMaxBytes),
    responses: { 200: { description: "The tenant.", content: json(TenantResourceSchema) } },
    errors: ["not_found"],
  },
  deleteTenant: {
    method: "delete",
    path: "/v1/admin/tenants/{tenant}",
    access: "admin",
    summary: "Delete a tenant, its keys and all its threads",
    description:
      "Its keys stop working (within 30 s); its threads are deleted in the background, resuming " +
      "after any failure; until that is done the tenant is listed with status `deleting`, and " +
      "then it is gone.",
    params: TenantParamsSchema,
    responses: {
      202: { description: "The tenant, `deleting`.", content: json(TenantResourceSchema) },
    },
    errors: ["not_found"],
  },
  createTenantKey: {
    method: "post",
    path: "/v1/admin/tenants/{tenant}/keys",
    access: "admin",
    summary: "Create an API key of a tenant",
    description:
      "The secret is in this answer only. Without `scopes` the key has every scope. A tenant " +
      `holds at most ${tenantLimits.api_keys_per_tenant} keys (409 \`limit_exceeded\`).`,
    params: TenantParamsSchema,
    body: jsonBody(CreateKeyBodySchema, jsonBodyMaxBytes),
    responses: { 201: { description: "The new key.", content: json(CreatedApiKeySchema) } },
    errors: ["not_found", ...LIMIT_ERRORS],
  },
  listTenantKeys: {
    method: "get",
    path: "/v1/admin/tenants/{tenant}/keys",
    access: "admin",
    summary: "List a tenant's API keys (never their secrets)",
    params: TenantParamsSchema,
    query: ListQuerySchema,
    responses: { 200: { description: "A page of keys.", content: json(ApiKeyListSchema) } },
    errors: ["not_found"],
  },
  revokeTenantKey: {
    method: "delete",
    path: "/v1/admin/tenants/{tenant}/keys/{key_id}",
    access: "admin",
    summary: "Revoke a tenant's API key",
    params: TenantKeyParamsSchema,
    responses: { 204: { description: "Revoked." } },
    errors: ["not_found"],
  },
  createHook: {
    method: "post",
    path: "/v1/hooks",
    access: "hooks",
    summary: "Create an inbound hook: deliveries to its URL start turns",
    description:
      "The sender posts to the hook's `url` with no API key: its signature (`verify.scheme`) is " +
      "the credential. A generated `secret` is in this answer only. A tenant holds at most " +
      `${tenantLimits.hooks_per_tenant} hooks (409 \`limit_exceeded\`).`,
    body: jsonBody(CreateHookBodySchema, jsonBodyMaxBytes),
    responses: { 201: { description: "The new hook.", content: json(CreatedHookSchema) } },
    // `not_found`: a key still trusted by an isolate while its tenant is being deleted.
    errors: ["hook_exists", "not_found", ...LIMIT_ERRORS],
  },
  listHooks: {
    method: "get",
    path: "/v1/hooks",
    access: "hooks",
    summary: "List the tenant's hooks (never their secrets)",
    query: ListQuerySchema,
    responses: { 200: { description: "A page of hooks.", content: json(HookListSchema) } },
    errors: [],
  },
  getHook: {
    method: "get",
    path: "/v1/hooks/{id}",
    access: "hooks",
    summary: "Get a hook",
    params: HookParamsSchema,
    responses: { 200: { description: "The hook.", content: json(HookResourceSchema) } },
    errors: ["not_found"],
  },
  deleteHook: {
    method: "delete",
    path: "/v1/hooks/{id}",
    access: "hooks",
    summary: "Delete a hook and its delivery log",
    description:
      "Its URL answers 404 at once through this worker's isolate, everywhere within 30 s.",
    params: HookParamsSchema,
    responses: { 204: { description: "Deleted." } },
    errors: ["not_found"],
  },
  rotateHookSecret: {
    method: "post",
    path: "/v1/hooks/{id}/rotate-secret",
    access: "hooks",
    summary: "Give a hook a new signing secret",
    description:
      "The previous secret still verifies for 24 hours, so the sender can switch without a " +
      "lost delivery. A generated `secret` is in this answer only.",
    params: HookParamsSchema,
    body: jsonBody(RotateHookSecretBodySchema, jsonBodyMaxBytes),
    responses: { 200: { description: "The hook.", content: json(CreatedHookSchema) } },
    errors: ["not_found"],
  },
  listHookDeliveries: {
    method: "get",
    path: "/v1/hooks/{id}/deliveries",
    access: "hooks",
    summary: "A hook's delivery log, newest first",
    description:
      "Every request with a valid signature from the last 7 days: accepted (with the turn it " +
      "started and how that turn ended, which follows within about a second), ignored, " +
      "duplicate or rejected.",
    params: HookParamsSchema,
    query: ListQuerySchema,
    responses: { 200: { description: "A page of deliveries.", content: json(DeliveryListSchema) } },
    errors: ["not_found"],
  },
  deliverHook: {
    method: "post",
    path: "/hooks/{tenant}/{hook}",
    access: "public",
    summary: "A delivery to an inbound hook (the sender's request)",
    description:
      "No API key: the signature of the hook's scheme is the credential (Standard Webhooks " +
      "`webhook-id`/`webhook-timestamp`/`webhook-signature`; GitHub `X-Hub-Signature-256`; " +
      "Slack `X-Slack-Signature` and `X-Slack-Request-Timestamp`; Stripe `Stripe-Signature`), " +
      "and a signed timestamp more than 5 minutes off is refused. 202 once the delivery is " +
      "durable, before its turn runs; a redelivery of the same delivery id within 72 hours is " +
      "answered 200 with the first delivery and starts nothing. A bad, missing or stale " +
      "signature is 401 `invalid_signature` and nothing is recorded.",
    params: HookDeliveryParamsSchema,
    body: {
      kind: "webhook",
      maxBytes: webhookBodyMaxBytes,
      mediaTypes: ["application/json", "application/x-www-form-urlencoded"],
    },
    responses: {
      200: {
        description:
          "A duplicate: the first delivery. Or Slack's `url_verification`: `{challenge}`.",
        content: json(HookAnswerSchema),
      },
      202: {
        description: "Accepted (its turn is queued), or `ignored` by the hook's `events`.",
        content: json(DeliveryResourceSchema),
      },
    },
    errors: [
      "invalid_signature",
      "not_found",
      "thread_busy",
      "unknown_model",
      "context_window_exceeded",
      ...QUOTA_ERRORS,
    ],
  },
  createEndpoint: {
    method: "post",
    path: "/v1/webhook-endpoints",
    access: "hooks",
    summary: "Create a webhook endpoint: the tenant's threads' events are posted to it",
    description:
      "Events are Standard Webhooks, signed with the endpoint's `whsec_` secret (in this " +
      "answer only), retried after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h. A tenant holds " +
      `at most ${tenantLimits.webhook_endpoints_per_tenant} endpoints, disabled ones included ` +
      "(409 `limit_exceeded`).",
    body: jsonBody(CreateEndpointBodySchema, jsonBodyMaxBytes),
    responses: {
      201: { description: "The new endpoint.", content: json(CreatedEndpointSchema) },
    },
    errors: ["not_found", ...LIMIT_ERRORS],
  },
  listEndpoints: {
    method: "get",
    path: "/v1/webhook-endpoints",
    access: "hooks",
    summary: "List the tenant's webhook endpoints (never their secrets)",
    query: ListQuerySchema,
    responses: {
      200: { description: "A page of endpoints.", content: json(EndpointListSchema) },
    },
    errors: [],
  },
  getEndpoint: {
    method: "get",
    path: "/v1/webhook-endpoints/{id}",
    access: "hooks",
    summary: "Get a webhook endpoint",
    params: EndpointParamsSchema,
    responses: { 200: { description: "The endpoint.", content: json(EndpointResourceSchema) } },
    errors: ["not_found"],
  },
  patchEndpoint: {
    method: "patch",
    path: "/v1/webhook-endpoints/{id}",
    access: "hooks",
    summary: "Change a webhook endpoint's URL, events, description, or disable it",
    description: "Threads record their events by the new subscriptions within 10 s.",
    params: EndpointParamsSchema,
    body: jsonBody(PatchEndpointBodySchema, jsonBodyMaxBytes),
    responses: { 200: { description: "The endpoint.", content: json(EndpointResourceSchema) } },
    errors: ["not_found"],
  },
  deleteEndpoint: {
    method: "delete",
    path: "/v1/webhook-endpoints/{id}",
    access: "hooks",
    summary: "Delete a webhook endpoint and its delivery records",
    params: EndpointParamsSchema,
    responses: { 204: { description: "Deleted." } },
    errors: ["not_found"],
  },
  rotateEndpointSecret: {
    method: "post",
    path: "/v1/webhook-endpoints/{id}/rotate-secret",
    access: "hooks",
    summary: "Give a webhook endpoint a new signing secret",
    description:
      "For 24 hours every event carries a signature with the previous secret beside the new " +
      "one. The new secret is in this answer only.",
    params: EndpointParamsSchema,
    body: jsonBody(EmptyBodySchema, jsonBodyMaxBytes),
    responses: { 200: { description: "The endpoint.", content: json(CreatedEndpointSchema) } },
    errors: ["not_found"],
  },
  testEndpoint: {
    method: "post",
    path: "/v1/webhook-endpoints/{id}/test",
    access: "hooks",
    summary: "Send a `webhook.test` event to an endpoint",
    params: EndpointParamsSchema,
    body: jsonBody(EmptyBodySchema, jsonBodyMaxBytes),
    responses: {
      202: {
        description: "The event's delivery, queued: its attempts follow in the deliveries.",
        content: json(WebhookDeliverySchema),
      },
    },
    errors: ["not_found"],
  },
  listEndpointDeliveries: {
    method: "get",
    path: "/v1/webhook-endpoints/{id}/deliveries",
    access: "hooks",
    summary: "An endpoint's deliveries, newest first, each with its attempts",
    description:
      "The last 7 days. Each attempt: when, the status code or the error, and when the next " +
      "one is due.",
    params: EndpointParamsSchema,
    query: ListQuerySchema,
    responses: {
      200: { description: "A page of deliveries.", content: json(WebhookDeliveryListSchema) },
    },
    errors: ["not_found"],
  },
  createMcpServer: {
    method: "post",
    path: "/v1/mcp-servers",
    access: "tools",
    summary: "Register a remote MCP server the tenant's threads may use",
    description:
      'Threads name it by `label` (`mcp_servers`, or a `{type: "mcp"}` tool). `headers` ' +
      "(its credentials) are stored and sent with every request to the server, never answered: " +
      "a resource lists `header_names` only. The URL is checked against the outbound URL " +
      "policy now (400 at `/url`) and again before each request. Defaults: every tool, " +
      `\`require_approval: "always"\`, \`timeout_ms\` ${mcpServerTimeoutMsDefault}. A tenant ` +
      `holds at most ${tenantLimits.mcp_servers_per_tenant} servers (409 \`limit_exceeded\`).`,
    body: jsonBody(CreateMcpServerBodySchema, jsonBodyMaxBytes),
    responses: {
      201: {
        description: "The new server.",
        content: json(McpServerResourceSchema),
        headers: { Location: "The server's URL." },
      },
    },
    // A key still trusted by an isolate while its tenant is being deleted: 401 `unauthorized`.
    errors: ["mcp_server_exists", ...LIMIT_ERRORS],
  },
  listMcpServers: {
    method: "get",
    path: "/v1/mcp-servers",
    access: "tools",
    summary: "List the tenant's MCP servers (never their headers' values)",
    description: "Oldest first, in keyset pages.",
    query: ListQuerySchema,
    responses: { 200: { description: "A page of servers.", content: json(McpServerListSchema) } },
    errors: [],
  },
  getMcpServer: {
    method: "get",
    path: "/v1/mcp-servers/{label}",
    access: "tools",
    summary: "Get an MCP server",
    params: McpServerParamsSchema,
    responses: { 200: { description: "The server.", content: json(McpServerResourceSchema) } },
    errors: ["not_found"],
  },
  patchMcpServer: {
    method: "patch",
    path: "/v1/mcp-servers/{label}",
    access: "tools",
    summary: "Change an MCP server's URL, headers, tools, approvals or timeout",
    description:
      "What is given changes; `headers` is a merge patch (a string sets a header, null removes " +
      "it), and the limits apply to the result (400 at `/headers`). A new `url` is checked as " +
      "on create.",
    params: McpServerParamsSchema,
    body: jsonBody(PatchMcpServerBodySchema, jsonBodyMaxBytes),
    responses: { 200: { description: "The server.", content: json(McpServerResourceSchema) } },
    errors: ["not_found"],
  },
  deleteMcpServer: {
    method: "delete",
    path: "/v1/mcp-servers/{label}",
    access: "tools",
    summary: "Delete an MCP server and its stored headers",
    description:
      "A thread that names it finds it unavailable from then on (a warning, no failure).",
    params: McpServerParamsSchema,
    responses: { 204: { description: "Deleted." } },
    errors: ["not_found"],
  },
  ...OPENAI_ROUTES,
} as const satisfies Record<string, RouteSpec>;

export type OperationId = keyof typeof API_ROUTES;

type Parsed<R, K extends string> = R extends { [P in K]: infer S extends z.ZodMiniType }
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
