import { describe, expect, it } from "vitest";
import { withCacheHitRatio, ZERO_THREAD_USAGE } from "../../../shared/api/index.ts";

describe("the cache hit ratio of usage counts", () => {
  it("is the cached share of the input tokens, and null before any input", () => {
    expect(withCacheHitRatio(ZERO_THREAD_USAGE).cache_hit_ratio).toBeNull();
    const counts = { ...ZERO_THREAD_USAGE, input_tokens: 2000, cached_input_tokens: 1536 };
    expect(withCacheHitRatio(counts)).toEqual({ ...counts, cache_hit_ratio: 0.768 });
  });

  it("never passes 1, whatever a provider reported", () => {
    const counts = { ...ZERO_THREAD_USAGE, input_tokens: 10, cached_input_tokens: 12 };
    expect(withCacheHitRatio(counts).cache_hit_ratio).toBe(1);
  });
});
