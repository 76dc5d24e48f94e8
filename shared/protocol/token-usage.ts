import * as z from "../zod/index.ts";

export const TokenUsageSchema = z.onFirstUse(() =>
  z.looseObject({
    input_tokens: z.number(),
    cached_input_tokens: z.number(),
    output_tokens: z.number(),
    reasoning_output_tokens: z.number(),
    total_tokens: z.number(),
  }),
);

export const TokenUsageInfoSchema = z.onFirstUse(() =>
  z.looseObject({
    total_token_usage: TokenUsageSchema,
    last_token_usage: TokenUsageSchema,
    model_context_window: z.nullish(z.number()),
  }),
);

export type TokenUsage = z.infer<typeof TokenUsageSchema>;
export type TokenUsageInfo = z.infer<typeof TokenUsageInfoSchema>;

export const ZERO_TOKEN_USAGE: TokenUsage = Object.freeze({
  input_tokens: 0,
  cached_input_tokens: 0,
  output_tokens: 0,
  reasoning_output_tokens: 0,
  total_tokens: 0,
});

/** The field-by-field sum of two usages. */
export function addTokenUsage(a: TokenUsage, b: TokenUsage): TokenUsage {
  return {
    input_tokens: a.input_tokens + b.input_tokens,
    cached_input_tokens: a.cached_input_tokens + b.cached_input_tokens,
    output_tokens: a.output_tokens + b.output_tokens,
    reasoning_output_tokens: a.reasoning_output_tokens + b.reasoning_output_tokens,
    total_tokens: a.total_tokens + b.total_tokens,
  };
}

/**
 * `TokenUsageInfo::new_or_append` (reference §1.7): undefined when there is nothing to add;
 * otherwise adds `last` into the running total and replaces `last_token_usage`.
 */
export function appendTokenUsage(
  info: TokenUsageInfo | undefined,
  last: TokenUsage | undefined,
  modelContextWindow?: number,
): TokenUsageInfo | undefined {
  if (info === undefined && last === undefined) return undefined;
  const base = info ?? {
    total_token_usage: { ...ZERO_TOKEN_USAGE },
    last_token_usage: { ...ZERO_TOKEN_USAGE },
  };
  const next: TokenUsageInfo = { ...base };
  if (last !== undefined) {
    next.total_token_usage = addTokenUsage(base.total_token_usage, last);
    next.last_token_usage = { ...last };
  }
  if (modelContextWindow !== undefined) next.model_context_window = modelContextWindow;
  return next;
}

/**
 * What one provider request used, read from the `token_count` line it produced: how far the
 * running total moved since the previous `token_count` line's (`previousTotal`; undefined before
 * the first). `last_token_usage` is not it: after a compaction it holds the estimate of the new,
 * shorter context, not what the summary request cost. The totals only ever grow (a rollback or a
 * reload keeps the newest one), so every field is a non-negative count.
 */
export function requestUsage(
  previousTotal: TokenUsage | undefined,
  info: TokenUsageInfo,
): TokenUsage {
  const now = info.total_token_usage;
  const before = previousTotal ?? ZERO_TOKEN_USAGE;
  return {
    input_tokens: now.input_tokens - before.input_tokens,
    cached_input_tokens: now.cached_input_tokens - before.cached_input_tokens,
    output_tokens: now.output_tokens - before.output_tokens,
    reasoning_output_tokens: now.reasoning_output_tokens - before.reasoning_output_tokens,
    total_tokens: now.total_tokens - before.total_tokens,
  };
}
