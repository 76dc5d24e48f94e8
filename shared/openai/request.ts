import { recordOf } from "../protocol/index.ts";
import * as z from "../zod/index.ts";

/**
 * What the OpenAI surface accepts (design §17), as OpenAI's Responses and Conversations APIs
 * define it. Objects are loose where OpenAI's own items carry fields a client echoes back (an
 * item's `status`, an output part's `annotations`), strict where an unknown field would be a
 * setting silently ignored.
 */

const text = z.onFirstUse(() => z.string().check(z.maxLength(10_485_760)));

export const OpenAIInputTextSchema = z.onFirstUse(() =>
  z.looseObject({ type: z.literal("input_text"), text }),
);
export const OpenAIInputImageSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("input_image"),
    image_url: z.optional(z.nullable(z.string())),
    file_id: z.optional(z.nullable(z.string())),
    detail: z._default(z.enum(["auto", "low", "high"]), "auto"),
  }),
);
export const OpenAIOutputTextSchema = z.onFirstUse(() =>
  z.looseObject({ type: z.literal("output_text"), text }),
);
export const OpenAIRefusalSchema = z.onFirstUse(() =>
  z.looseObject({ type: z.literal("refusal"), refusal: text }),
);
export const OpenAIInputFileSchema = z.onFirstUse(() =>
  z.looseObject({ type: z.literal("input_file") }),
);

export const OpenAIContentPartSchema = z.onFirstUse(() =>
  z.discriminatedUnion("type", [
    OpenAIInputTextSchema,
    OpenAIInputImageSchema,
    OpenAIOutputTextSchema,
    OpenAIRefusalSchema,
    OpenAIInputFileSchema,
  ]),
);

/** A message: `type` may be left out (OpenAI's "easy input message"); content a string or parts. */
export const OpenAIMessageInputSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.optional(z.literal("message")),
    id: z.optional(z.string()),
    role: z.enum(["user", "assistant", "system", "developer"]),
    content: z.union([text, z.array(OpenAIContentPartSchema).check(z.maxLength(1024))]),
  }),
);

export const OpenAIFunctionCallInputSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("function_call"),
    id: z.optional(z.string()),
    call_id: z.string().check(z.minLength(1), z.maxLength(256)),
    name: z.string().check(z.minLength(1), z.maxLength(256)),
    arguments: text,
  }),
);

export const OpenAIFunctionCallOutputInputSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("function_call_output"),
    id: z.optional(z.nullable(z.string())),
    call_id: z.string().check(z.minLength(1), z.maxLength(256)),
    output: z.union([text, z.array(OpenAIContentPartSchema).check(z.maxLength(256))]),
  }),
);

export const OpenAIReasoningInputSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("reasoning"),
    id: z.optional(z.string()),
    summary: z.array(z.looseObject({ type: z.literal("summary_text"), text })),
    encrypted_content: z.optional(z.nullable(z.string())),
  }),
);

export const OpenAIItemReferenceSchema = z.onFirstUse(() =>
  z.looseObject({ type: z.literal("item_reference"), id: z.string() }),
);

export const OpenAIMcpApprovalResponseInputSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("mcp_approval_response"),
    id: z.optional(z.nullable(z.string())),
    approval_request_id: z.string().check(z.minLength(1), z.maxLength(256)),
    approve: z.boolean(),
    reason: z.optional(z.nullable(z.string().check(z.maxLength(4096)))),
  }),
);

/** One input item. A message first: it is the one whose `type` may be missing. */
export const OpenAIInputItemSchema = z.onFirstUse(() =>
  z.union([
    OpenAIMessageInputSchema,
    OpenAIFunctionCallInputSchema,
    OpenAIFunctionCallOutputInputSchema,
    OpenAIReasoningInputSchema,
    OpenAIItemReferenceSchema,
    OpenAIMcpApprovalResponseInputSchema,
  ]),
);

export const OpenAIFunctionToolSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("function"),
    name: z.string(),
    description: z.optional(z.nullable(z.string())),
    parameters: z.optional(z.nullable(recordOf(z.string(), z.unknown()))),
    strict: z.optional(z.nullable(z.boolean())),
  }),
);

export const OpenAIMcpToolSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("mcp"),
    server_label: z.string(),
    server_url: z.optional(z.string()),
    allowed_tools: z.optional(
      z.nullable(
        z.union([
          z.array(z.string()),
          z.looseObject({ tool_names: z.optional(z.array(z.string())) }),
        ]),
      ),
    ),
    require_approval: z.optional(z.nullable(z.unknown())),
    headers: z.optional(z.nullable(recordOf(z.string(), z.string()))),
  }),
);

export const OpenAIToolSchema = z.onFirstUse(() =>
  z.union([OpenAIFunctionToolSchema, OpenAIMcpToolSchema, z.looseObject({ type: z.string() })]),
);

const metadata = z.onFirstUse(() =>
  z.nullable(
    recordOf(z.string().check(z.maxLength(64)), z.string().check(z.maxLength(512))).check(
      z.refine((entries) => Object.keys(entries).length <= 16, "at most 16 metadata keys"),
    ),
  ),
);

/** `POST /v1/responses`. */
export const CreateResponseBodySchema = z.onFirstUse(() =>
  z.strictObject({
    model: z.optional(z.string().check(z.minLength(1))),
    input: z.optional(z.union([text, z.array(OpenAIInputItemSchema).check(z.maxLength(2048))])),
    instructions: z.optional(z.nullable(text)),
    previous_response_id: z.optional(z.nullable(z.string())),
    conversation: z.optional(z.nullable(z.union([z.string(), z.looseObject({ id: z.string() })]))),
    tools: z.optional(z.nullable(z.array(OpenAIToolSchema).check(z.maxLength(128)))),
    tool_choice: z.optional(z.nullable(z.unknown())),
    parallel_tool_calls: z.optional(z.nullable(z.boolean())),
    reasoning: z.optional(
      z.nullable(
        z.looseObject({
          effort: z.optional(z.nullable(z.string())),
          summary: z.optional(z.nullable(z.string())),
        }),
      ),
    ),
    text: z.optional(z.nullable(z.looseObject({ format: z.optional(z.unknown()) }))),
    max_output_tokens: z.optional(z.nullable(z.number().check(z.int(), z.positive()))),
    max_tool_calls: z.optional(z.nullable(z.number().check(z.int(), z.positive()))),
    truncation: z.optional(z.nullable(z.enum(["auto", "disabled"]))),
    metadata: z.optional(metadata),
    stream: z.optional(z.nullable(z.boolean())),
    stream_options: z.optional(z.nullable(z.looseObject({}))),
    store: z.optional(z.nullable(z.boolean())),
    background: z.optional(z.nullable(z.boolean())),
    temperature: z.optional(z.nullable(z.number().check(z.gte(0), z.lte(2)))),
    top_p: z.optional(z.nullable(z.number().check(z.gte(0), z.lte(1)))),
    top_logprobs: z.optional(z.nullable(z.number().check(z.int(), z.gte(0), z.lte(20)))),
    presence_penalty: z.optional(z.nullable(z.number())),
    frequency_penalty: z.optional(z.nullable(z.number())),
    include: z.optional(z.nullable(z.array(z.string()))),
    user: z.optional(z.nullable(z.string())),
    safety_identifier: z.optional(z.nullable(z.string())),
    prompt_cache_key: z.optional(z.nullable(z.string())),
    prompt_cache_retention: z.optional(z.nullable(z.string())),
    service_tier: z.optional(z.nullable(z.string())),
    prompt: z.optional(z.nullable(z.unknown())),
  }),
);

/** `POST /v1/conversations`. */
export const CreateConversationBodySchema = z.onFirstUse(() =>
  z.strictObject({
    items: z.optional(z.nullable(z.array(OpenAIInputItemSchema).check(z.maxLength(20)))),
    metadata: z.optional(metadata),
  }),
);

/** `POST /v1/conversations/{id}`: the metadata, replaced whole. */
export const UpdateConversationBodySchema = z.onFirstUse(() => z.strictObject({ metadata }));

/** `POST /v1/conversations/{id}/items`. */
export const AddConversationItemsBodySchema = z.onFirstUse(() =>
  z.strictObject({
    items: z.array(OpenAIInputItemSchema).check(z.minLength(1), z.maxLength(20)),
  }),
);

/** OpenAI's list pages: `after` an item id, `order` (newest first by default), `limit` 1-100. */
export const OpenAIListQuerySchema = z.onFirstUse(() =>
  z.strictObject({
    after: z.optional(z.string()),
    order: z._default(z.enum(["asc", "desc"]), "desc"),
    limit: z._default(
      z.pipe(
        z.string().check(z.regex(/^[0-9]{1,3}$/, "a number from 1 to 100")),
        z.pipe(z.transform(Number), z.number().check(z.gte(1), z.lte(100))),
      ),
      20,
    ),
    include: z.optional(z.union([z.string(), z.array(z.string())])),
  }),
);

export const ResponseParamsSchema = z.onFirstUse(() =>
  z.object({ response_id: z.string().check(z.minLength(1), z.maxLength(256)) }),
);
export const ConversationParamsSchema = z.onFirstUse(() =>
  z.object({ conversation_id: z.string().check(z.minLength(1), z.maxLength(256)) }),
);
export const ConversationItemParamsSchema = z.onFirstUse(() =>
  z.object({
    conversation_id: z.string().check(z.minLength(1), z.maxLength(256)),
    item_id: z.string().check(z.minLength(1), z.maxLength(256)),
  }),
);
export const ModelParamsSchema = z.onFirstUse(() =>
  z.object({ model: z.string().check(z.minLength(1), z.maxLength(256)) }),
);
/** `GET /v1/responses/{id}` takes `stream`, `starting_after` and `include`, as OpenAI's. */
export const GetResponseQuerySchema = z.onFirstUse(() =>
  z.strictObject({
    include: z.optional(z.union([z.string(), z.array(z.string())])),
    stream: z.optional(z.enum(["true", "false"])),
    starting_after: z.optional(z.string()),
    include_obfuscation: z.optional(z.string()),
  }),
);

export type CreateResponseBody = z.output<typeof CreateResponseBodySchema>;
export type OpenAIInputItem = z.output<typeof OpenAIInputItemSchema>;
export type OpenAIContentPart = z.output<typeof OpenAIContentPartSchema>;
export type OpenAITool = z.output<typeof OpenAIToolSchema>;
export type CreateConversationBody = z.output<typeof CreateConversationBodySchema>;
export type OpenAIListQuery = z.output<typeof OpenAIListQuerySchema>;
