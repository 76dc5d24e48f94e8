/**
 * The routes of the OpenAI-compatible surface (design §17), part of the one route table
 * (`routes.ts`): OpenAI's Responses, Conversations and Models endpoints, with their errors in
 * OpenAI's shape. Paths and operation names follow OpenAI's document.
 */
import {
  IdempotencyHeadersSchema,
  jsonBodyMaxBytes,
  turnBodyMaxBytes,
} from "../shared/api/index.ts";
import {
  AddConversationItemsBodySchema,
  ConversationItemParamsSchema,
  ConversationParamsSchema,
  ConversationSchema,
  CreateConversationBodySchema,
  CreateResponseBodySchema,
  DeletedSchema,
  GetResponseQuerySchema,
  ModelParamsSchema,
  OpenAIItemSchema,
  OpenAIListQuerySchema,
  OpenAIModelListSchema,
  OpenAIModelSchema,
  OpenAIResponseSchema,
  OpenAIStreamEventSchema,
  openAIListSchema,
  ResponseParamsSchema,
  UpdateConversationBodySchema,
} from "../shared/openai/index.ts";
import * as z from "../shared/zod/index.ts";
import { type ContentSpec, json, jsonBody, type RouteSpec } from "./route-spec.ts";

const OpenAIItemListSchema = z.onFirstUse(() => openAIListSchema(OpenAIItemSchema));

/** The list schemas of this surface, named in the OpenAPI document. */
export const OPENAI_LIST_SCHEMAS = { OpenAIItemList: OpenAIItemListSchema };

const responseEvents: ContentSpec = { format: "sse", schema: OpenAIStreamEventSchema };

const STREAM_DESCRIPTION =
  "With `stream: true`: server-sent events, `event:` the Responses event type and `data:` the " +
  "event, each with a strictly increasing `sequence_number`: `response.created`, " +
  "`response.in_progress`, per output item `response.output_item.added`, its parts and deltas " +
  "(`response.content_part.added`, `response.output_text.delta`/`.done`, " +
  "`response.function_call_arguments.delta`/`.done`, `response.content_part.done`), " +
  "`response.output_item.done`; last `response.completed`, `response.failed` or " +
  "`response.incomplete`.";

export const OPENAI_ROUTES = {
  createResponse: {
    method: "post",
    path: "/v1/responses",
    access: "threads",
    dialect: "openai",
    summary: "Create a model response (OpenAI Responses API)",
    description:
      "A response is a turn of a thread: `conversation` continues that thread, " +
      "`previous_response_id` the thread of that response (on a fork at it when it is not the " +
      "thread's newest), neither a new thread. `function_call_output` items answering a " +
      "response's calls resume its turn. `store: false` runs on a thread deleted after the " +
      "response; `background: true` answers at once, `GET` and `cancel` follow it. See " +
      "docs/openai.md for what is supported.",
    headers: IdempotencyHeadersSchema,
    body: jsonBody(CreateResponseBodySchema, turnBodyMaxBytes),
    responses: {
      200: {
        description: `The response. ${STREAM_DESCRIPTION}`,
        content: [...json(OpenAIResponseSchema), responseEvents],
      },
    },
    errors: [
      "not_found",
      "thread_busy",
      "unknown_model",
      "unsupported_parameter",
      "context_window_exceeded",
      "no_pending_calls",
      "unknown_call_id",
      "quota_exceeded",
      "idempotency_key_reused",
      "idempotency_key_in_use",
    ],
  },
  getResponse: {
    method: "get",
    path: "/v1/responses/{response_id}",
    access: "threads",
    dialect: "openai",
    summary: "Get a response",
    params: ResponseParamsSchema,
    query: GetResponseQuerySchema,
    responses: { 200: { description: "The response.", content: json(OpenAIResponseSchema) } },
    errors: ["not_found", "unsupported_parameter"],
  },
  deleteResponse: {
    method: "delete",
    path: "/v1/responses/{response_id}",
    access: "threads",
    dialect: "openai",
    summary: "Delete a response",
    description:
      "The newest response of a thread only: a response that is its thread's only turn deletes " +
      "the thread; a later one rolls the thread back by that turn. An older one is 409 " +
      "`turn_mismatch`.",
    params: ResponseParamsSchema,
    responses: { 200: { description: "Deleted.", content: json(DeletedSchema) } },
    errors: ["not_found", "turn_mismatch", "thread_busy"],
  },
  cancelResponse: {
    method: "post",
    path: "/v1/responses/{response_id}/cancel",
    access: "threads",
    dialect: "openai",
    summary: "Cancel a response that is in progress",
    description: "Interrupts its turn; a response that already ended is answered as it is.",
    params: ResponseParamsSchema,
    responses: { 200: { description: "The response.", content: json(OpenAIResponseSchema) } },
    errors: ["not_found"],
  },
  listInputItems: {
    method: "get",
    path: "/v1/responses/{response_id}/input_items",
    access: "threads",
    dialect: "openai",
    summary: "List the items a response was given",
    description: "What the client sent for this response, never Spindle's context messages.",
    params: ResponseParamsSchema,
    query: OpenAIListQuerySchema,
    responses: { 200: { description: "A page of items.", content: json(OpenAIItemListSchema) } },
    errors: ["not_found"],
  },
  createConversation: {
    method: "post",
    path: "/v1/conversations",
    access: "threads",
    dialect: "openai",
    summary: "Create a conversation (a thread)",
    headers: IdempotencyHeadersSchema,
    body: jsonBody(CreateConversationBodySchema, turnBodyMaxBytes),
    responses: { 200: { description: "The conversation.", content: json(ConversationSchema) } },
    errors: ["quota_exceeded", "idempotency_key_reused", "unsupported_parameter"],
  },
  getConversation: {
    method: "get",
    path: "/v1/conversations/{conversation_id}",
    access: "threads",
    dialect: "openai",
    summary: "Get a conversation",
    params: ConversationParamsSchema,
    responses: { 200: { description: "The conversation.", content: json(ConversationSchema) } },
    errors: ["not_found"],
  },
  updateConversation: {
    method: "post",
    path: "/v1/conversations/{conversation_id}",
    access: "threads",
    dialect: "openai",
    summary: "Replace a conversation's metadata",
    params: ConversationParamsSchema,
    body: jsonBody(UpdateConversationBodySchema, jsonBodyMaxBytes),
    responses: { 200: { description: "The conversation.", content: json(ConversationSchema) } },
    errors: ["not_found"],
  },
  deleteConversation: {
    method: "delete",
    path: "/v1/conversations/{conversation_id}",
    access: "threads",
    dialect: "openai",
    summary: "Delete a conversation and its thread",
    params: ConversationParamsSchema,
    responses: { 200: { description: "Deleted.", content: json(DeletedSchema) } },
    errors: ["not_found"],
  },
  listConversationItems: {
    method: "get",
    path: "/v1/conversations/{conversation_id}/items",
    access: "threads",
    dialect: "openai",
    summary: "List a conversation's items",
    description:
      "What clients sent and the model answered, in history order (`order=asc`) or newest " +
      "first (the default); never Spindle's context messages.",
    params: ConversationParamsSchema,
    query: OpenAIListQuerySchema,
    responses: { 200: { description: "A page of items.", content: json(OpenAIItemListSchema) } },
    errors: ["not_found"],
  },
  addConversationItems: {
    method: "post",
    path: "/v1/conversations/{conversation_id}/items",
    access: "threads",
    dialect: "openai",
    summary: "Add items to a conversation",
    params: ConversationParamsSchema,
    headers: IdempotencyHeadersSchema,
    body: jsonBody(AddConversationItemsBodySchema, turnBodyMaxBytes),
    responses: { 200: { description: "The added items.", content: json(OpenAIItemListSchema) } },
    errors: ["not_found", "thread_busy", "unsupported_parameter", "idempotency_key_reused"],
  },
  getConversationItem: {
    method: "get",
    path: "/v1/conversations/{conversation_id}/items/{item_id}",
    access: "threads",
    dialect: "openai",
    summary: "Get one item of a conversation",
    params: ConversationItemParamsSchema,
    responses: { 200: { description: "The item.", content: json(OpenAIItemSchema) } },
    errors: ["not_found"],
  },
  deleteConversationItem: {
    method: "delete",
    path: "/v1/conversations/{conversation_id}/items/{item_id}",
    access: "threads",
    dialect: "openai",
    summary: "Delete an item of a conversation (not supported)",
    description:
      "A thread's history is append-only: 400 `unsupported_parameter`. Roll back turns with " +
      "`POST /v1/threads/{id}/rollback` instead.",
    params: ConversationItemParamsSchema,
    responses: { 200: { description: "Never answered.", content: json(ConversationSchema) } },
    errors: ["not_found", "unsupported_parameter"],
  },
  listModels: {
    method: "get",
    path: "/v1/models",
    access: "threads",
    dialect: "openai",
    summary: "List the models of the catalog",
    responses: { 200: { description: "The models.", content: json(OpenAIModelListSchema) } },
    errors: [],
  },
  getModel: {
    method: "get",
    path: "/v1/models/{model}",
    access: "threads",
    dialect: "openai",
    summary: "Get a model of the catalog",
    params: ModelParamsSchema,
    responses: { 200: { description: "The model.", content: json(OpenAIModelSchema) } },
    errors: ["not_found"],
  },
} as const satisfies Record<string, RouteSpec>;

/**
 * Paths OpenAI's SDKs call: the surface's routes, and the ones it lacks, whose 404 must also be
 * OpenAI's shape for the SDK's typed errors.
 */
const OPENAI_PATHS = /^\/v1\/(responses|conversations|models|chat|completions|embeddings)(\/|$)/;

export function isOpenAIPath(path: string): boolean {
  return OPENAI_PATHS.test(path);
}
