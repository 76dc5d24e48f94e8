import { PromptSchema, TokenUsageSchema } from "../protocol/index.ts";
import * as z from "../zod/index.ts";
import { TurnIdSchema } from "./ids.ts";
import { KnownResponseItemOutputSchema, RolloutLineDocSchema } from "./resources.ts";

/** Why a request did not reuse its predecessor whole (design §14); null: it did. */
export const CACHE_BREAK_REASONS = [
  "first_request",
  "compaction",
  "rollback",
  "model_switch",
  "instructions_changed",
  "tools_changed",
  "expired",
  "history_changed",
] as const;
export type CacheBreakReason = (typeof CACHE_BREAK_REASONS)[number];

/**
 * How much of a request its thread's previous request already sent (design §14). A request is
 * compared as the bytes of its instructions, its tools and then each input item, each as JSON.
 */
export const CacheReportSchema = z.onFirstUse(() =>
  z.object({
    /** Input items at the start that are byte-identical to the previous request's. */
    reused_prefix_items: z.number(),
    /** Bytes of the longest prefix shared with the previous request. */
    reused_prefix_bytes: z.number(),
    /** Bytes after that prefix: what the provider could not have cached. */
    new_bytes: z.number(),
    /** Cached input tokens the provider reported for this request; null when it reported none. */
    provider_cached_tokens: z.nullable(z.number()),
    /**
     * Null when the previous request is a prefix of this one and its cache had not expired;
     * else the first cause that applies: `first_request`, `model_switch`, `compaction`,
     * `rollback`, `instructions_changed`, `tools_changed`, `expired` (longer apart than the
     * model's `prompt_cache_ttl_s`), `history_changed` (anything else).
     */
    break_reason: z.nullable(z.enum(CACHE_BREAK_REASONS)),
  }),
);
export type CacheReport = z.output<typeof CacheReportSchema>;

/** One provider request of a turn, rebuilt from the rollout (design §13). */
export const ModelRequestResourceSchema = z.onFirstUse(() =>
  z.extend(PromptSchema, {
    object: z.literal("model.request"),
    /** 1 for the turn's first request. */
    step: z.number(),
    /** `compaction`: the summary request of a compaction (its input ends with the request for it). */
    kind: z.enum(["sampling", "compaction"]),
    model: z.string(),
    /** When it was sent (its rollout line's time). */
    created_at: z.string(),
    /** The rollout line that records it; the turn's lines before it came before the request. */
    seq: z.number(),
    /** The input exactly as the provider received it (bookkeeping fields left out). */
    input: z.array(KnownResponseItemOutputSchema),
    /** The provider's usage for this request; null when it reported none (a failed request). */
    usage: z.nullable(TokenUsageSchema),
    cache: CacheReportSchema,
  }),
);
export type ModelRequestResource = z.output<typeof ModelRequestResourceSchema>;

/** `GET /v1/threads/{id}/turns/{turn}/requests`. */
export const TurnRequestsResourceSchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("turn.requests"),
    turn_id: TurnIdSchema,
    /** The turn's provider requests in the order they were sent. */
    data: z.array(ModelRequestResourceSchema),
    /** The turn's rollout lines, oldest first, each with its sequence number. */
    lines: z.array(z.object({ seq: z.number(), line: RolloutLineDocSchema })),
  }),
);
export type TurnRequestsResource = z.output<typeof TurnRequestsResourceSchema>;
