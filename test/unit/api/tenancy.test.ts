import { describe, expect, it } from "vitest";
import {
  formatApiKey,
  mergeMetadata,
  NO_QUOTAS,
  parseApiKey,
  patchQuotas,
  redactApiKey,
} from "../../../shared/api/index.ts";
import { requestUsage } from "../../../shared/protocol/index.ts";

const SECRET = "Ab-_0123456789abcdefghijklmnopqrstuvwxyzAB";

describe("the API key format", () => {
  it("names the jurisdiction, the tenant and the key, and parses back to the same parts", () => {
    for (const jurisdiction of [null, "eu", "fedramp"] as const) {
      const parts = {
        jurisdiction,
        tenant: "acme_corp-1",
        keyId: "key_a1B2c3D4e5F6g7H8",
        secret: SECRET,
      };
      const key = formatApiKey(parts);
      expect(key).toBe(`sk_${jurisdiction ?? "g"}.acme_corp-1.key_a1B2c3D4e5F6g7H8.${SECRET}`);
      expect(parseApiKey(key)).toEqual(parts);
      expect(redactApiKey(parts)).toBe(
        `sk_${jurisdiction ?? "g"}.acme_corp-1.key_a1B2c3D4e5F6g7H8.…${SECRET.slice(-4)}`,
      );
    }
  });

  it("is not what the static keys or a key in another shape look like", () => {
    for (const key of [
      "sk-local-dev",
      `sk_us.acme.key_x.${SECRET}`,
      `sk_g.acme.key_x.short`,
      `sk_g.ac:me.key_x.${SECRET}`,
      `sk_g.acme.notakey.${SECRET}`,
      `sk_g.acme.key_x.${SECRET}.extra`,
      `sk_g..key_x.${SECRET}`,
    ]) {
      expect({ key, parsed: parseApiKey(key) }).toEqual({ key, parsed: undefined });
    }
  });
});

describe("metadata merge patches", () => {
  it("sets keys, removes the ones patched to null, and keeps the rest", () => {
    expect(mergeMetadata({ a: "1", b: "2" }, { b: null, c: "3", a: "one" })).toEqual({
      a: "one",
      c: "3",
    });
    expect(mergeMetadata({}, { gone: null })).toEqual({});
  });

  it("refuses a result of more than 16 keys, also when the patch alone is within the limit", () => {
    const fifteen = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, "v"]));
    expect(mergeMetadata(fifteen, { extra: "v" })).toEqual({ ...fifteen, extra: "v" });
    expect(mergeMetadata(fifteen, { extra: "v", more: "v" })).toBe(undefined);
    expect(mergeMetadata({ ...fifteen, extra: "v" }, { extra: null, more: "v" })).toEqual({
      ...fifteen,
      more: "v",
    });
  });
});

describe("quota patches", () => {
  it("a number sets a quota, null removes it, absent keeps it", () => {
    const base = { ...NO_QUOTAS, max_threads: 10, tokens_per_day: 500 };
    expect(patchQuotas(base, { max_threads: null, max_running_turns: 2 })).toEqual({
      max_threads: null,
      max_running_turns: 2,
      tokens_per_day: 500,
      max_thread_bytes: null,
    });
  });
});

describe("requestUsage", () => {
  const usage = (input: number, cached: number, output: number, reasoning: number) => ({
    input_tokens: input,
    cached_input_tokens: cached,
    output_tokens: output,
    reasoning_output_tokens: reasoning,
    total_tokens: input + output,
  });

  it("is how far the running total moved, whatever the last usage says (a compaction's is an estimate)", () => {
    const before = usage(100, 20, 10, 2);
    const info = {
      total_token_usage: usage(160, 30, 15, 3),
      last_token_usage: { ...usage(0, 0, 0, 0), total_tokens: 42 },
    };
    expect(requestUsage(before, info)).toEqual(usage(60, 10, 5, 1));
    expect(requestUsage(undefined, info)).toEqual(info.total_token_usage);
  });
});
