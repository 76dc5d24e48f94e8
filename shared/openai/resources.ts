import * as z from "../zod/index.ts";

/**
 * What the OpenAI surface answers with (design §17): OpenAI's Responses and Conversations
 * objects, as the Open Responses specification defines them. Documentation schemas: the
 * handlers build these shapes and the OpenAPI document shows them.
 */

const unixSeconds = z.onFirstUse(() => z.number().check(z.int(), z.nonnegative()));

export const OpenAIUsageSchema = z.onFirstUse(() =>
  z.object({
    input_tokens: z.number(),
    input_tokens_details: z.object({ cached_tokens: z.number() }),
    output_tokens: z.number(),
    output_tokens_details: z.object({ reasoning_tokens: z.number() }),
    total_tokens: z.number(),
  }),
);

export const OutputTextPartSchema = z.onFirstUse(() =>
  z.object({
    type: z.literal("output_text"),
    text: z.string(),
    annotations: z.array(z.unknown()),
    logprobs: z.array(z.unknown()),
  }),
);

const itemStatus = z.onFirstUse(() => z.enum(["in_progress", "completed", "incomplete"]));

/** An item of a response's `output`, of `input_items` or of a conversation. */
export const OpenAIItemSchema = z.onFirstUse(() =>
  z.discriminatedUnion("type", [
    z.object({
      type: z.literal("message"),
      id: z.string(),
      status: itemStatus,
      role: z.enum(["user", "assistant", "system", "developer"]),
      content: z.array(z.looseObject({ type: z.string() })),
    }),
    z.object({
      type: z.literal("function_call"),
      id: z.string(),
      call_id: z.string(),
      name: z.string(),
      arguments: z.string(),
      status: itemStatus,
    }),
    z.object({
      type: z.literal("function_call_output"),
      id: z.string(),
      call_id: z.string(),
      output: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]),
      status: itemStatus,
    }),
    z.object({
      type: z.literal("reasoning"),
      id: z.string(),
      summary: z.array(z.object({ type: z.literal("summary_text"), text: z.string() })),
      encrypted_content: z.optional(z.string()),
    }),
    z.object({
      type: z.literal("mcp_call"),
      id: z.string(),
      server_label: z.string(),
      name: z.string(),
      arguments: z.string(),
      output: z.nullable(z.string()),
      error: z.nullable(z.string()),
      status: z.optional(itemStatus),
    }),
    z.object({
      type: z.literal("mcp_approval_request"),
      id: z.string(),
      server_label: z.string(),
      name: z.string(),
      arguments: z.string(),
    }),
  ]),
);

export const ResponseStatusSchema = z.onFirstUse(() =>
  z.enum(["queued", "in_progress", "completed", "failed", "cancelled", "incomplete"]),
);

export const OpenAIResponseSchema = z.onFirstUse(() =>
  z.object({
    id: z.string(),
    object: z.literal("response"),
    created_at: unixSeconds,
    completed_at: z.nullable(unixSeconds),
    status: ResponseStatusSchema,
    background: z.boolean(),
    conversation: z.nullable(z.object({ id: z.string() })),
    error: z.nullable(z.object({ code: z.string(), message: z.string() })),
    incomplete_details: z.nullable(z.object({ reason: z.string() })),
    instructions: z.nullable(z.string()),
    max_output_tokens: z.nullable(z.number()),
    max_tool_calls: z.nullable(z.number()),
    model: z.string(),
    output: z.array(OpenAIItemSchema),
    parallel_tool_calls: z.boolean(),
    previous_response_id: z.nullable(z.string()),
    prompt_cache_key: z.nullable(z.string()),
    reasoning: z.nullable(
      z.object({ effort: z.nullable(z.string()), summary: z.nullable(z.string()) }),
    ),
    safety_identifier: z.nullable(z.string()),
    service_tier: z.string(),
    store: z.boolean(),
    temperature: z.number(),
    text: z.object({ format: z.looseObject({ type: z.string() }) }),
    tool_choice: z.unknown(),
    tools: z.array(z.looseObject({ type: z.string() })),
    top_logprobs: z.number(),
    top_p: z.number(),
    presence_penalty: z.number(),
    frequency_penalty: z.number(),
    truncation: z.enum(["auto", "disabled"]),
    usage: z.nullable(OpenAIUsageSchema),
    user: z.nullable(z.string()),
    metadata: z.record(z.string(), z.string()),
  }),
);

/** A streamed Responses event: `type`, a strictly increasing `sequence_number`, its fields. */
export const OpenAIStreamEventSchema = z.onFirstUse(() =>
  z.looseObject({ type: z.string(), sequence_number: z.number().check(z.int()) }),
);

export const ConversationSchema = z.onFirstUse(() =>
  z.object({
    id: z.string(),
    object: z.literal("conversation"),
    created_at: unixSeconds,
    metadata: z.record(z.string(), z.string()),
  }),
);

export const DeletedSchema = z.onFirstUse(() =>
  z.object({ id: z.string(), object: z.string(), deleted: z.literal(true) }),
);

/** OpenAI's list page: `first_id`/`last_id`, `has_more`; the next page is `after=last_id`. */
export function openAIListSchema<T extends z.ZodMiniType>(item: T) {
  return z.object({
    object: z.literal("list"),
    data: z.array(item),
    first_id: z.nullable(z.string()),
    last_id: z.nullable(z.string()),
    has_more: z.boolean(),
  });
}

export const OpenAIModelSchema = z.onFirstUse(() =>
  z.object({
    id: z.string(),
    object: z.literal("model"),
    created: unixSeconds,
    owned_by: z.string(),
  }),
);

export const OpenAIModelListSchema = z.onFirstUse(() =>
  z.object({ object: z.literal("list"), data: z.array(OpenAIModelSchema) }),
);

/** OpenAI's error body; `code` is Spindle's problem code. */
export const OpenAIErrorSchema = z.onFirstUse(() =>
  z.object({
    error: z.object({
      message: z.string(),
      type: z.string(),
      param: z.nullable(z.string()),
      code: z.nullable(z.string()),
    }),
  }),
);

export type OpenAIUsage = z.output<typeof OpenAIUsageSchema>;
export type OpenAIItem = z.output<typeof OpenAIItemSchema>;
export type OpenAIResponse = z.output<typeof OpenAIResponseSchema>;
export type ResponseStatus = z.output<typeof ResponseStatusSchema>;
export type Conversation = z.output<typeof ConversationSchema>;
export interface OpenAIList<T> {
  object: "list";
  data: T[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}
