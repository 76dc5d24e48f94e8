import { describe, expect, it } from "vitest";
import {
  DEFAULT_MAX_OUTPUT_TOKENS,
  DEFAULT_MODEL_CATALOG,
  DEFAULT_PROMPT_CACHE_TTL_S,
  effectiveContextWindow,
  parseConfiguredModels,
} from "../../../shared/models/index.ts";

describe("parseConfiguredModels", () => {
  it("turns configured entries into catalog models of the provider", () => {
    const [model] = parseConfiguredModels(
      "openai",
      JSON.stringify([
        { slug: "gpt-x", model: "gpt-5.4", context_window: 272000, input_modalities: ["text"] },
      ]),
    );
    expect(model).toMatchObject({
      slug: "gpt-x",
      provider: "openai",
      providerModel: "gpt-5.4",
      contextWindowTokens: 272000,
      inputModalities: ["text"],
      supportsParallelToolCalls: true,
    });
    expect(DEFAULT_MODEL_CATALOG.with(model ? [model] : []).get("gpt-x")?.provider).toBe("openai");
  });

  it("records 95% of the window as Codex does (258,400 for 272,000), or the configured share", () => {
    const [plain, ninety] = parseConfiguredModels(
      "openai",
      JSON.stringify([
        { slug: "gpt-a", context_window: 272000 },
        { slug: "gpt-b", context_window: 272000, effective_context_window_percent: 90 },
      ]),
    );
    if (!plain || !ninety) throw new Error("expected two models");
    expect([effectiveContextWindow(plain), effectiveContextWindow(ninety)]).toEqual([
      258_400, 244_800,
    ]);
    expect(() =>
      parseConfiguredModels(
        "openai",
        JSON.stringify([{ slug: "x", context_window: 1, effective_context_window_percent: 0 }]),
      ),
    ).toThrow();
  });

  it("takes a compaction family (comp_hash); without one the model has none", () => {
    const [named, bare] = parseConfiguredModels(
      "openai",
      JSON.stringify([
        { slug: "gpt-a", context_window: 272000, comp_hash: "2900" },
        { slug: "gpt-b", context_window: 272000 },
      ]),
    );
    expect([named?.compHash, bare && "compHash" in bare]).toEqual(["2900", false]);
  });

  it("takes a reasoning model's defaults (summary auto unless given) and a verbosity", () => {
    const models = parseConfiguredModels(
      "openai",
      JSON.stringify([
        { slug: "gpt-r", context_window: 400000, reasoning: { effort: "high" }, verbosity: "low" },
        { slug: "gpt-s", context_window: 400000, reasoning: { summary: "none" } },
        { slug: "gpt-plain", context_window: 128000, max_output_tokens: 8192 },
      ]),
    );
    expect(models).toEqual([
      {
        slug: "gpt-r",
        provider: "openai",
        providerModel: "gpt-r",
        instructions: expect.any(String),
        contextWindowTokens: 400000,
        maxOutputTokens: DEFAULT_MAX_OUTPUT_TOKENS,
        inputModalities: ["text", "image"],
        supportsParallelToolCalls: true,
        personalities: {},
        promptCacheTtlS: DEFAULT_PROMPT_CACHE_TTL_S,
        reasoning: { effort: "high", summary: "auto" },
        verbosity: "low",
      },
      {
        slug: "gpt-s",
        provider: "openai",
        providerModel: "gpt-s",
        instructions: expect.any(String),
        contextWindowTokens: 400000,
        maxOutputTokens: DEFAULT_MAX_OUTPUT_TOKENS,
        inputModalities: ["text", "image"],
        supportsParallelToolCalls: true,
        personalities: {},
        promptCacheTtlS: DEFAULT_PROMPT_CACHE_TTL_S,
        reasoning: { summary: "none" },
      },
      {
        slug: "gpt-plain",
        provider: "openai",
        providerModel: "gpt-plain",
        instructions: expect.any(String),
        contextWindowTokens: 128000,
        maxOutputTokens: 8192,
        inputModalities: ["text", "image"],
        supportsParallelToolCalls: true,
        personalities: {},
        promptCacheTtlS: DEFAULT_PROMPT_CACHE_TTL_S,
      },
    ]);
    const bad = (entry: object) =>
      parseConfiguredModels("openai", JSON.stringify([{ slug: "x", context_window: 1, ...entry }]));
    expect(() => bad({ reasoning: { effort: "extreme" } })).toThrow();
    expect(() => bad({ reasoning: { summary: "short" } })).toThrow();
    expect(() => bad({ reasoning: { effort: "low", budget: 3 } })).toThrow();
    expect(() => bad({ verbosity: "loud" })).toThrow();
    expect(() => bad({ max_output_tokens: 0 })).toThrow();
  });

  it("takes a prompt cache lifetime: 300 s by default, null for none, a positive integer", () => {
    const [plain, hour, none] = parseConfiguredModels(
      "openai",
      JSON.stringify([
        { slug: "a", context_window: 1000 },
        { slug: "b", context_window: 1000, prompt_cache_ttl_s: 3600 },
        { slug: "c", context_window: 1000, prompt_cache_ttl_s: null },
      ]),
    );
    expect([plain, hour, none].map((m) => m?.promptCacheTtlS)).toEqual([300, 3600, null]);
    const bad = (ttl: unknown) =>
      parseConfiguredModels(
        "openai",
        JSON.stringify([{ slug: "x", context_window: 1, prompt_cache_ttl_s: ttl }]),
      );
    for (const ttl of [0, -5, 1.5, "300", 86_401]) expect(() => bad(ttl)).toThrow();
  });

  it("gives no models when unset and fails loudly on a malformed configuration", () => {
    expect(parseConfiguredModels("openai", undefined)).toEqual([]);
    expect(parseConfiguredModels("openai", " ")).toEqual([]);
    expect(() => parseConfiguredModels("openai", '[{"slug":"x"}]')).toThrow();
    expect(() => parseConfiguredModels("openai", "not json")).toThrow();
  });

  it("rejects a slug that collides with a catalog model", () => {
    const [clash] = parseConfiguredModels(
      "openai",
      '[{"slug":"spindle-local","context_window":10}]',
    );
    expect(() => DEFAULT_MODEL_CATALOG.with(clash ? [clash] : [])).toThrow(/duplicate model slug/);
  });
});
