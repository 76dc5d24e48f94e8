import * as z from "../zod/index.ts";
import { MAX_ITEM_DEPTH, nestedWithin } from "./json-nesting.ts";

/**
 * ResponseItem wire shapes (Codex `protocol/src/models.rs`, reference §1.2).
 *
 * Field order in each shape follows Codex's serialization order so that a parsed item
 * re-serializes to the same bytes. Objects are loose: fields from newer Codex revisions survive
 * a parse/serialize round trip. Absent optionals stay absent (never `undefined` keys).
 */

const optionalString = z.onFirstUse(() => z.nullish(z.string()));

/** Newer Codex stamps the turn id on every item here (reference §1.2). */
export const ItemMetadataSchema = z.onFirstUse(() =>
  z.looseObject({ turn_id: z.optional(z.string()) }),
);
const metadata = () => ({
  internal_chat_message_metadata_passthrough: z.optional(ItemMetadataSchema),
});

export const ImageDetailSchema = z.onFirstUse(() => z.enum(["auto", "low", "high", "original"]));

export const InputTextSchema = z.onFirstUse(() =>
  z.looseObject({ type: z.literal("input_text"), text: z.string() }),
);
export const InputImageSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("input_image"),
    image_url: z.string(),
    detail: z.optional(ImageDetailSchema),
  }),
);
export const OutputTextSchema = z.onFirstUse(() =>
  z.looseObject({ type: z.literal("output_text"), text: z.string() }),
);
export const ContentItemSchema = z.onFirstUse(() =>
  z.discriminatedUnion("type", [InputTextSchema, InputImageSchema, OutputTextSchema]),
);

export const EncryptedContentPartSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("encrypted_content"),
    encrypted_content: z.string(),
  }),
);
export const FunctionCallOutputContentItemSchema = z.onFirstUse(() =>
  z.discriminatedUnion("type", [InputTextSchema, InputImageSchema, EncryptedContentPartSchema]),
);
/** A tool output is a plain string or a list of content items. */
export const ToolOutputSchema = z.onFirstUse(() =>
  z.union([z.string(), z.array(FunctionCallOutputContentItemSchema)]),
);

export const MessageRoleSchema = z.onFirstUse(() =>
  z.enum(["user", "assistant", "developer", "system"]),
);

export const MessageItemSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("message"),
    id: optionalString,
    role: MessageRoleSchema,
    content: z.array(ContentItemSchema),
    phase: z.nullish(z.enum(["commentary", "final_answer"])),
    ...metadata(),
  }),
);

export const ReasoningItemSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("reasoning"),
    id: optionalString,
    summary: z.array(z.looseObject({ type: z.literal("summary_text"), text: z.string() })),
    // Codex serializes an absent content as `null`; both forms are kept as they came.
    content: z.nullish(
      z.array(z.looseObject({ type: z.enum(["reasoning_text", "text"]), text: z.string() })),
    ),
    encrypted_content: z.nullish(z.string()),
    ...metadata(),
  }),
);

export const LocalShellActionSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("exec"),
    command: z.array(z.string()),
    timeout_ms: z.nullish(z.number()),
    working_directory: z.nullish(z.string()),
    env: z.nullish(z.record(z.string(), z.string())),
    user: z.nullish(z.string()),
  }),
);
export const LocalShellCallItemSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("local_shell_call"),
    id: optionalString,
    call_id: z.nullable(z.string()),
    status: z.enum(["completed", "in_progress", "incomplete"]),
    action: LocalShellActionSchema,
    ...metadata(),
  }),
);

export const FunctionCallItemSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("function_call"),
    id: optionalString,
    name: z.string(),
    namespace: optionalString,
    /** A string that holds JSON, exactly as the model produced it. */
    arguments: z.string(),
    call_id: z.string(),
    ...metadata(),
  }),
);

export const FunctionCallOutputItemSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("function_call_output"),
    id: optionalString,
    call_id: z.string(),
    output: ToolOutputSchema,
    ...metadata(),
  }),
);

export const CustomToolCallItemSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("custom_tool_call"),
    id: optionalString,
    status: optionalString,
    call_id: z.string(),
    name: z.string(),
    namespace: optionalString,
    input: z.string(),
    ...metadata(),
  }),
);

export const CustomToolCallOutputItemSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("custom_tool_call_output"),
    id: optionalString,
    call_id: z.string(),
    name: optionalString,
    output: ToolOutputSchema,
    ...metadata(),
  }),
);

export const WebSearchCallItemSchema = z.onFirstUse(() =>
  z.looseObject({
    type: z.literal("web_search_call"),
    id: optionalString,
    status: optionalString,
    action: z.nullish(z.looseObject({ type: z.string() })),
    ...metadata(),
  }),
);

export const CompactionItemSchema = z.onFirstUse(() =>
  z.looseObject({
    // `compaction_summary` is an accepted alias, read as `compaction`.
    type: z.pipe(
      z.enum(["compaction", "compaction_summary"]),
      z.transform(() => "compaction" as const),
    ),
    id: optionalString,
    encrypted_content: z.string(),
    ...metadata(),
  }),
);

/** An item nested deeper than `MAX_ITEM_DEPTH` is not one: it never enters history. */
export const KnownResponseItemSchema = z.onFirstUse(() =>
  z
    .discriminatedUnion("type", [
      MessageItemSchema,
      ReasoningItemSchema,
      LocalShellCallItemSchema,
      FunctionCallItemSchema,
      FunctionCallOutputItemSchema,
      CustomToolCallItemSchema,
      CustomToolCallOutputItemSchema,
      WebSearchCallItemSchema,
      CompactionItemSchema,
    ])
    .check(nestedWithin(MAX_ITEM_DEPTH, "an item")),
);

/** Any item type this build does not know. Its payload is not kept and it is never recorded. */
export const OtherItemSchema = z.onFirstUse(() =>
  z.pipe(
    z.looseObject({ type: z.string() }),
    z.transform((v) => ({ type: "other" as const, original_type: v.type })),
  ),
);

/** Parses any item: known types into their shape, anything else into `other`. */
export const ResponseItemSchema = z.onFirstUse(() =>
  z.union([KnownResponseItemSchema, OtherItemSchema]),
);

export type ContentItem = z.infer<typeof ContentItemSchema>;
export type InputText = z.infer<typeof InputTextSchema>;
export type InputImage = z.infer<typeof InputImageSchema>;
export type FunctionCallOutputContentItem = z.infer<typeof FunctionCallOutputContentItemSchema>;
export type ToolOutput = z.infer<typeof ToolOutputSchema>;
export type MessageRole = z.infer<typeof MessageRoleSchema>;
export type MessageItem = z.infer<typeof MessageItemSchema>;
export type ReasoningItem = z.infer<typeof ReasoningItemSchema>;
export type LocalShellCallItem = z.infer<typeof LocalShellCallItemSchema>;
export type FunctionCallItem = z.infer<typeof FunctionCallItemSchema>;
export type FunctionCallOutputItem = z.infer<typeof FunctionCallOutputItemSchema>;
export type CustomToolCallItem = z.infer<typeof CustomToolCallItemSchema>;
export type CustomToolCallOutputItem = z.infer<typeof CustomToolCallOutputItemSchema>;
export type WebSearchCallItem = z.infer<typeof WebSearchCallItemSchema>;
export type CompactionItem = z.infer<typeof CompactionItemSchema>;
export type OtherItem = z.output<typeof OtherItemSchema>;
export type KnownResponseItem = z.infer<typeof KnownResponseItemSchema>;
export type ResponseItem = KnownResponseItem | OtherItem;
