/**
 * The OpenAPI 3.1 document of HTTP API v1, generated from the route table (`routes.ts`) and the
 * zod schemas that validate the requests and describe the responses (`schemas.ts`), so the
 * document cannot disagree with the code. OpenAPI 3.1 schema objects are JSON Schema 2020-12,
 * which `z.toJSONSchema` writes directly.
 */

import {
  ApiKeyResourceSchema,
  CacheReportSchema,
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
  EndpointResourceSchema,
  FieldErrorSchema,
  ForkBodySchema,
  HistoryPageSchema,
  HookResourceSchema,
  InjectBodySchema,
  InputMessageSchema,
  McpServerResourceSchema,
  ModelRequestResourceSchema,
  PatchEndpointBodySchema,
  PatchMcpServerBodySchema,
  PatchTenantBodySchema,
  PatchThreadBodySchema,
  PROBLEM_CONTENT_TYPE,
  type ProblemCode,
  ProblemSchema,
  PromptResourceSchema,
  problemStatus,
  QuotasInputSchema,
  QuotasSchema,
  ResolvedThreadConfigSchema,
  ResponseItemOutputSchema,
  RollbackBodySchema,
  RolloutLineDocSchema,
  RotateHookSecretBodySchema,
  SlackChallengeSchema,
  StartTurnBodySchema,
  SteerBodySchema,
  SubmitOutputsBodySchema,
  TenantResourceSchema,
  ThreadEventSchema,
  ThreadResourceSchema,
  ThreadUsageSchema,
  TurnInputSchema,
  TurnRequestsResourceSchema,
  TurnResourceSchema,
  TurnSummarySchema,
  UsageBucketSchema,
  WebhookAttemptSchema,
  WebhookDeliverySchema,
  WebhookEventSchema,
} from "../shared/api/index.ts";
import { REQUEST_ID_HEADER, REQUEST_ID_PATTERN } from "../shared/observability/index.ts";
import {
  AddConversationItemsBodySchema,
  ConversationSchema,
  CreateConversationBodySchema,
  CreateResponseBodySchema,
  DeletedSchema,
  OpenAIErrorSchema,
  OpenAIItemSchema,
  OpenAIModelListSchema,
  OpenAIModelSchema,
  OpenAIResponseSchema,
  OpenAIStreamEventSchema,
  UpdateConversationBodySchema,
} from "../shared/openai/index.ts";
import {
  ThreadConfigSchema,
  ThreadMetadataSchema,
  TokenUsageInfoSchema,
  TokenUsageSchema,
} from "../shared/protocol/index.ts";
import { WEBHOOK_EVENT_TYPES } from "../shared/webhooks/index.ts";
import * as z from "../shared/zod/index.ts";
import { OPENAI_LIST_SCHEMAS } from "./openai-routes.ts";
import {
  API_ROUTES,
  type ContentSpec,
  HealthSchema,
  HookAnswerSchema,
  LIST_SCHEMAS,
  OpenApiDocumentSchema,
  type ResponseSpec,
  type RouteSpec,
} from "./routes.ts";

type JsonSchema = Record<string, unknown>;

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description: string };
  security: Record<string, string[]>[];
  paths: Record<string, Record<string, Record<string, unknown>>>;
  /** The events Spindle posts to webhook endpoints (OpenAPI 3.1 §4.8.1 `webhooks`). */
  webhooks: Record<string, Record<string, Record<string, unknown>>>;
  components: {
    schemas: Record<string, JsonSchema>;
    parameters: Record<string, Record<string, unknown>>;
    headers: Record<string, Record<string, unknown>>;
    securitySchemes: Record<string, Record<string, unknown>>;
  };
}

/**
 * Named request schemas, documented by their input side (what a client may send: defaults make
 * a field optional). Every JSON request body of the table must be here.
 */
const REQUEST_COMPONENTS: ReadonlyMap<z.ZodMiniType, string> = new Map<z.ZodMiniType, string>([
  [CreateThreadBodySchema, "CreateThreadBody"],
  [StartTurnBodySchema, "StartTurnBody"],
  [SubmitOutputsBodySchema, "SubmitOutputsBody"],
  [SteerBodySchema, "SteerBody"],
  [EmptyBodySchema, "EmptyBody"],
  [RollbackBodySchema, "RollbackBody"],
  [ForkBodySchema, "ForkBody"],
  [InjectBodySchema, "InjectBody"],
  [TurnInputSchema, "TurnInput"],
  [InputMessageSchema, "InputMessage"],
  [ThreadConfigSchema, "ThreadConfig"],
  [PatchThreadBodySchema, "PatchThreadBody"],
  [CreateTenantBodySchema, "CreateTenantBody"],
  [PatchTenantBodySchema, "PatchTenantBody"],
  [QuotasInputSchema, "QuotasInput"],
  [CreateKeyBodySchema, "CreateKeyBody"],
  [CreateHookBodySchema, "CreateHookBody"],
  [RotateHookSecretBodySchema, "RotateHookSecretBody"],
  [CreateEndpointBodySchema, "CreateWebhookEndpointBody"],
  [PatchEndpointBodySchema, "PatchWebhookEndpointBody"],
  [CreateMcpServerBodySchema, "CreateMcpServerBody"],
  [PatchMcpServerBodySchema, "PatchMcpServerBody"],
  // The OpenAI-compatible surface (design §17).
  [CreateResponseBodySchema, "CreateResponseBody"],
  [CreateConversationBodySchema, "CreateConversationBody"],
  [UpdateConversationBodySchema, "UpdateConversationBody"],
  [AddConversationItemsBodySchema, "AddConversationItemsBody"],
]);

/**
 * Named response schemas, documented by their output side (what a client receives). Every
 * response schema of the table must be here; none may transform.
 */
const RESPONSE_COMPONENTS: ReadonlyMap<z.ZodMiniType, string> = new Map<z.ZodMiniType, string>([
  [ThreadResourceSchema, "Thread"],
  [ResolvedThreadConfigSchema, "ResolvedThreadConfig"],
  [TurnResourceSchema, "Turn"],
  [TurnSummarySchema, "TurnSummary"],
  [ResponseItemOutputSchema, "ResponseItem"],
  [TokenUsageSchema, "TokenUsage"],
  [TokenUsageInfoSchema, "TokenUsageInfo"],
  [ThreadEventSchema, "ThreadEvent"],
  [HistoryPageSchema, "HistoryPage"],
  [PromptResourceSchema, "Prompt"],
  [TurnRequestsResourceSchema, "TurnRequests"],
  [ModelRequestResourceSchema, "ModelRequest"],
  [CacheReportSchema, "CacheReport"],
  [ProblemSchema, "Problem"],
  [FieldErrorSchema, "FieldError"],
  [RolloutLineDocSchema, "RolloutLine"],
  [HealthSchema, "Health"],
  [OpenApiDocumentSchema, "OpenApiDocument"],
  [ThreadMetadataSchema, "ThreadMetadata"],
  [ThreadUsageSchema, "ThreadUsage"],
  [TenantResourceSchema, "Tenant"],
  [QuotasSchema, "Quotas"],
  [ApiKeyResourceSchema, "ApiKey"],
  [CreatedApiKeySchema, "CreatedApiKey"],
  [UsageBucketSchema, "UsageBucket"],
  [HookResourceSchema, "Hook"],
  [CreatedHookSchema, "CreatedHook"],
  [DeliveryResourceSchema, "Delivery"],
  [SlackChallengeSchema, "SlackChallenge"],
  [HookAnswerSchema, "HookAnswer"],
  [EndpointResourceSchema, "WebhookEndpoint"],
  [CreatedEndpointSchema, "CreatedWebhookEndpoint"],
  [WebhookAttemptSchema, "WebhookAttempt"],
  [WebhookDeliverySchema, "WebhookDelivery"],
  [WebhookEventSchema, "WebhookEvent"],
  [McpServerResourceSchema, "McpServer"],
  ...Object.entries(LIST_SCHEMAS).map(([name, schema]) => [schema, name] as const),
  // The OpenAI-compatible surface (design §17).
  [OpenAIResponseSchema, "OpenAIResponse"],
  [OpenAIStreamEventSchema, "OpenAIStreamEvent"],
  [OpenAIItemSchema, "OpenAIItem"],
  [ConversationSchema, "OpenAIConversation"],
  [DeletedSchema, "OpenAIDeleted"],
  [OpenAIModelSchema, "OpenAIModel"],
  [OpenAIModelListSchema, "OpenAIModelList"],
  [OpenAIErrorSchema, "OpenAIError"],
  ...Object.entries(OPENAI_LIST_SCHEMAS).map(([name, schema]) => [schema, name] as const),
]);

const MEDIA_TYPES: Record<ContentSpec["format"], string> = {
  json: "application/json",
  sse: "text/event-stream",
  ndjson: "application/x-ndjson",
};

const componentRef = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/**
 * `x-request-id`, on every operation: the client may name its request, and every answer (a
 * problem and a stream too) carries the id the request was logged and traced under.
 */
const REQUEST_ID_PARAMETER = { $ref: "#/components/parameters/RequestId" };
const REQUEST_ID_RESPONSE_HEADER = { $ref: "#/components/headers/RequestId" };

/** Builds the document; throws when a route uses a schema that has no component name. */
export function buildOpenApiDocument(
  routes: Readonly<Record<string, RouteSpec>> = API_ROUTES,
): OpenApiDocument {
  const schemas = {
    ...componentSchemas(REQUEST_COMPONENTS, "input"),
    ...componentSchemas(RESPONSE_COMPONENTS, "output"),
  };
  const paths: OpenApiDocument["paths"] = {};
  for (const [operationId, route] of Object.entries(routes)) {
    paths[route.path] ??= {};
    const item = paths[route.path] ?? {};
    item[route.method] = operation(operationId, route);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Spindle",
      version: "1",
      description:
        "Hosted AI-agent conversation threads. Every `/v1` route needs `Authorization: Bearer " +
        "<api key>`: a tenant's key (it names the tenant; each route names the scope it needs) " +
        "or, under `/v1/admin`, an admin key. Errors are RFC 9457 problem documents " +
        "(`application/problem+json`) with a stable `code`.",
    },
    security: [{ apiKey: [] }],
    paths,
    webhooks: outboundEvents(),
    components: {
      schemas,
      parameters: {
        RequestId: {
          name: REQUEST_ID_HEADER,
          in: "header",
          required: false,
          description:
            "The client's name for this request, used as the request id when it matches the " +
            "pattern (otherwise the service makes one): answered in `x-request-id`, written on " +
            "the request's log lines and carried into the webhook events it causes.",
          schema: { type: "string", pattern: REQUEST_ID_PATTERN },
        },
      },
      headers: {
        RequestId: {
          description:
            "The request's id: the client's `x-request-id` when valid, else `req_` and 32 hex " +
            "digits. Quote it when asking about a request; it names its log lines.",
          schema: { type: "string", pattern: REQUEST_ID_PATTERN },
        },
      },
      securitySchemes: {
        apiKey: {
          type: "http",
          scheme: "bearer",
          description:
            "An API key of the tenant. A route's requirement lists the scope the key needs " +
            "(`threads`, `hooks`, `keys`, `usage`, `tools`); a key without it is a 403 `forbidden`.",
        },
        adminKey: {
          type: "http",
          scheme: "bearer",
          description: "An operator's admin key (`SPINDLE_ADMIN_KEYS`): the admin API only.",
        },
      },
    },
  };
}

/**
 * The events posted to webhook endpoints, one entry per type: Standard Webhooks headers and the
 * thin JSON body; a 2xx within 15 s is a delivery.
 */
function outboundEvents(): OpenApiDocument["webhooks"] {
  const headers = [
    ["webhook-id", "One per event and endpoint, the same on every attempt: dedup on it."],
    ["webhook-timestamp", "The attempt's time, unix seconds."],
    ["webhook-signature", "`v1,<base64 HMAC-SHA256>` per secret (two for a day after a rotation)."],
  ].map(([name, description]) => ({
    in: "header",
    name,
    required: true,
    description,
    schema: { type: "string" },
  }));
  return Object.fromEntries(
    WEBHOOK_EVENT_TYPES.map((type) => [
      type,
      {
        post: {
          operationId: `event:${type}`,
          summary: `The \`${type}\` event`,
          parameters: headers,
          requestBody: {
            required: true,
            content: {
              "application/json": { schema: componentRef(responseName(WebhookEventSchema)) },
            },
          },
          responses: {
            "2XX": { description: "Delivered." },
            "410": { description: "Gone: the endpoint is disabled, no more attempts." },
            default: { description: "Failed: retried on the schedule." },
          },
        },
      },
    ]),
  );
}

function componentSchemas(
  names: ReadonlyMap<z.ZodMiniType, string>,
  io: "input" | "output",
): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [schema, id] of names) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    io,
    target: "draft-2020-12",
    uri: (id) => `#/components/schemas/${id}`,
    // A response may gain fields in a later version; zod writes its output objects as closed.
    override: ({ jsonSchema }) => {
      if (io === "output" && jsonSchema.additionalProperties === false) {
        delete jsonSchema.additionalProperties;
      }
    },
  });
  // Each comes out as a standalone document; as a component it needs neither marker.
  return Object.fromEntries(
    Object.entries(schemas).map(([id, { $schema: _, $id: __, ...schema }]) => [id, schema]),
  );
}

function operation(operationId: string, route: RouteSpec): Record<string, unknown> {
  const op: Record<string, unknown> = { operationId, summary: route.summary };
  if (route.description !== undefined) op.description = route.description;
  const isPublic = route.access === "public";
  // OpenAPI 3.1 §4.8.30: for a non-OAuth scheme the array lists the roles needed: the scope.
  op.security = isPublic
    ? []
    : route.access === "admin"
      ? [{ adminKey: [] }]
      : [{ apiKey: [route.access] }];
  const parameters = [
    ...parametersOf(route.params, "path"),
    ...parametersOf(route.query, "query"),
    ...parametersOf(route.headers, "header"),
    REQUEST_ID_PARAMETER,
  ];
  op.parameters = parameters;
  if (route.body?.kind === "json") {
    op.requestBody = {
      required: !route.body.schema.safeParse({}).success,
      content: { "application/json": { schema: componentRef(requestName(route.body.schema)) } },
    };
  } else if (route.body?.kind === "webhook") {
    const raw = { schema: { description: "The bytes the sender signed." } };
    op.requestBody = {
      required: true,
      description: `What the hook's scheme sends, at most ${route.body.maxBytes} bytes.`,
      content: Object.fromEntries(route.body.mediaTypes.map((type) => [type, raw])),
    };
  } else if (route.body?.kind === "rollout") {
    const line = { schema: componentRef(responseName(RolloutLineDocSchema)) };
    op.requestBody = {
      required: true,
      description: "Codex rollout JSONL: one rollout line per line.",
      content: Object.fromEntries(route.body.mediaTypes.map((type) => [type, line])),
    };
  }
  const responses: Record<string, unknown> = {};
  for (const [status, response] of Object.entries(route.responses)) {
    responses[status] = successResponse(response);
  }
  for (const [status, codes] of errorCodesByStatus(route, isPublic)) {
    responses[String(status)] = problemResponse(codes, route.dialect);
  }
  op.responses = responses;
  return op;
}

/** The route's own codes plus the ones every route of its kind answers with. */
function errorCodesByStatus(route: RouteSpec, isPublic: boolean): Map<number, ProblemCode[]> {
  const validated = route.params ?? route.query ?? route.headers ?? route.body;
  const codes = new Set<ProblemCode>([
    ...(isPublic ? [] : (["unauthorized", "forbidden"] as const)),
    ...(validated === undefined ? [] : (["invalid_request"] as const)),
    ...(route.body === undefined ? [] : (["payload_too_large"] as const)),
    ...route.errors,
    "internal",
  ]);
  const byStatus = new Map<number, ProblemCode[]>();
  for (const code of codes) {
    const status = problemStatus(code);
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return new Map([...byStatus].sort(([a], [b]) => a - b));
}

function successResponse(response: ResponseSpec): Record<string, unknown> {
  const out: Record<string, unknown> = { description: response.description };
  out.headers = {
    ...Object.fromEntries(
      Object.entries(response.headers ?? {}).map(([name, description]) => [
        name,
        { description, schema: { type: "string" } },
      ]),
    ),
    [REQUEST_ID_HEADER]: REQUEST_ID_RESPONSE_HEADER,
  };
  if (response.content !== undefined) {
    out.content = Object.fromEntries(
      response.content.map(({ format, schema }) => [
        MEDIA_TYPES[format],
        { schema: componentRef(responseName(schema)) },
      ]),
    );
  }
  return out;
}

const PROBLEM_HEADERS: Partial<Record<ProblemCode, [string, string]>> = {
  unauthorized: ["WWW-Authenticate", "The Bearer challenge (RFC 6750 §3)."],
  unsupported_media_type: ["Accept-Post", "The media types the body may have."],
  quota_exceeded: [
    "Retry-After",
    "For `tokens_per_day`: seconds until the next UTC day, or (when the day's tokens left are reserved by other threads' admissions) until the oldest of those reservations lapses.",
  ],
};

/**
 * A problem response whose `code` is one of `codes` (all of the same status). On the OpenAI
 * surface the same codes arrive as `error.code` of OpenAI's error body, as `application/json`.
 */
function problemResponse(codes: ProblemCode[], dialect?: "openai"): Record<string, unknown> {
  const enumOf = { enum: codes };
  const content =
    dialect === "openai"
      ? {
          "application/json": {
            schema: {
              allOf: [
                componentRef(responseName(OpenAIErrorSchema)),
                {
                  type: "object",
                  properties: { error: { type: "object", properties: { code: enumOf } } },
                },
              ],
            },
          },
        }
      : {
          [PROBLEM_CONTENT_TYPE]: {
            schema: {
              allOf: [
                componentRef(responseName(ProblemSchema)),
                { type: "object", properties: { code: enumOf } },
              ],
            },
          },
        };
  const out: Record<string, unknown> = {
    description: `${dialect === "openai" ? "Error" : "Problem"}: ${codes.map((code) => `\`${code}\``).join(", ")}.`,
    content,
  };
  const headers = codes.flatMap((code) => {
    const header = PROBLEM_HEADERS[code];
    return header === undefined ? [] : [header];
  });
  out.headers = {
    ...Object.fromEntries(
      headers.map(([name, description]) => [name, { description, schema: { type: "string" } }]),
    ),
    [REQUEST_ID_HEADER]: REQUEST_ID_RESPONSE_HEADER,
  };
  return out;
}

/** One OpenAPI parameter per field of a params/query/headers schema, inlined. */
function parametersOf(
  schema: z.ZodMiniObject | undefined,
  where: "path" | "query" | "header",
): Record<string, unknown>[] {
  if (schema === undefined) return [];
  return Object.entries(schema.shape).map(([name, field]) => {
    const { description, ...fieldSchema } = parameterSchema(field as z.ZodMiniType);
    const parameter: Record<string, unknown> = {
      name,
      in: where,
      // Path parameters are always required (OpenAPI 3.1 §4.8.12.1).
      required: where === "path" || !(field as z.ZodMiniType).safeParse(undefined).success,
      schema: fieldSchema,
    };
    // An object in the query is sent as `name[key]=value` (e.g. `metadata[team]=core`).
    if (where === "query" && fieldSchema.type === "object") {
      parameter.style = "deepObject";
      parameter.explode = true;
    }
    if (typeof description === "string") parameter.description = description;
    return parameter;
  });
}

/** A pattern of decimal digits only (`^[0-9]{1,4}$`, `^[0-9]+$`): a number sent as text. */
const DECIMAL_PATTERN = /^\^\[0-9\](\{1,\d+\}|\+)\$$/;

/**
 * A parameter's schema, by its input side (what a client sends). A number in the query or a
 * header is validated as a string of decimal digits and piped to `Number`; documented so, it
 * would make a generator type it `string`. It is documented as the `integer` it means, with the
 * digits pattern kept (what the service checks) and the bounds of the validated number.
 */
function parameterSchema(field: z.ZodMiniType): JsonSchema {
  const { $schema: _, ...input } = z.toJSONSchema(field, { io: "input", target: "draft-2020-12" });
  if (input.type !== "string" || typeof input.pattern !== "string") return input;
  if (!DECIMAL_PATTERN.test(input.pattern)) return input;
  // The output side is the number (or, without a check after the transform, nothing).
  const output = z.toJSONSchema(field, {
    io: "output",
    target: "draft-2020-12",
    unrepresentable: "any",
  });
  const { minimum, maximum } = output;
  return {
    ...input,
    type: "integer",
    ...(typeof minimum === "number" ? { minimum } : {}),
    ...(typeof maximum === "number" ? { maximum } : {}),
    ...(typeof input.default === "string" ? { default: Number(input.default) } : {}),
  };
}

function requestName(schema: z.ZodMiniType): string {
  const name = REQUEST_COMPONENTS.get(schema);
  if (name === undefined) throw new Error("A request body schema has no component name.");
  return name;
}

function responseName(schema: z.ZodMiniType): string {
  const name = RESPONSE_COMPONENTS.get(schema);
  if (name === undefined) throw new Error("A response schema has no component name.");
  return name;
}
