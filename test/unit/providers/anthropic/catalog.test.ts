import { describe, expect, it } from "vitest";
import { catalogOf } from "../../../../durable-objects/thread/providers.ts";
import type { Env } from "../../../../env.ts";
import { PromptInput } from "../../../../shared/context-manager/index.ts";
import { readAnthropicModels } from "../../../../shared/providers/anthropic/models.ts";
import {
  anthropicCatalogModels,
  createAnthropicClientFromEnv,
} from "../../../../shared/providers/index.ts";

const MODELS = JSON.stringify([
  { slug: "claude-x", model: "claude-sonnet-x", context_window: 200_000 },
]);
const envWith = (vars: Partial<Env>) => vars as Env;

describe("the anthropic provider in a deployment's catalog", () => {
  it("knows the models of SPINDLE_ANTHROPIC_MODELS, and serves them once ANTHROPIC_API_KEY is set", () => {
    for (const key of [undefined, "", "   "]) {
      const catalog = catalogOf(
        envWith({ SPINDLE_ANTHROPIC_MODELS: MODELS, ANTHROPIC_API_KEY: key }),
      );
      expect([catalog.providers(), catalog.get("claude-x")?.provider]).toEqual([
        ["local"],
        "anthropic",
      ]);
    }
    const keyed = catalogOf(envWith({ SPINDLE_ANTHROPIC_MODELS: MODELS, ANTHROPIC_API_KEY: "k" }));
    expect(keyed.providers()).toEqual(["local", "anthropic"]);
    expect(keyed.get("claude-x")).toMatchObject({ providerModel: "claude-sonnet-x" });
  });
});

describe("the anthropic member of SPINDLE_ANTHROPIC_MODELS", () => {
  const models = JSON.stringify([
    {
      slug: "opus",
      model: "claude-opus-new",
      context_window: 200_000,
      reasoning: {},
      anthropic: { thinking: "adaptive" },
    },
    { slug: "sonnet", model: "claude-sonnet-x", context_window: 200_000, reasoning: {} },
  ]);
  const env = { ANTHROPIC_API_KEY: "k", SPINDLE_ANTHROPIC_MODELS: models };
  const deps = {
    fetch: () => Promise.reject(new Error("no requests here")),
    maxOutputTokens: 32_000,
  };
  const thinkingOf = (model: string) => {
    const client = createAnthropicClientFromEnv(env, { ...deps, model });
    return client.requestBody({
      instructions: "",
      input: PromptInput.of([]),
      tools: [],
      parallel_tool_calls: true,
      reasoning: { effort: "high" },
    }).thinking;
  };

  it("gives each provider model its thinking, and leaves the member out of the catalog", () => {
    expect(thinkingOf("claude-opus-new")).toEqual({ type: "adaptive" });
    expect(thinkingOf("claude-sonnet-x")).toEqual({ type: "enabled", budget_tokens: 16_000 });
    const catalog = catalogOf(envWith(env));
    expect(catalog.get("opus")).toMatchObject({
      provider: "anthropic",
      providerModel: "claude-opus-new",
    });
    expect(JSON.parse(anthropicCatalogModels(env) ?? "[]")[0]).not.toHaveProperty("anthropic");
  });

  it("gives a model whose entry sets cache_ttl 1h a prompt_cache_ttl_s of 3600, unless it sets its own", () => {
    const entries = JSON.stringify([
      { slug: "hour", model: "m1", context_window: 1000, anthropic: { cache_ttl: "1h" } },
      {
        slug: "own",
        model: "m2",
        context_window: 1000,
        prompt_cache_ttl_s: 1800,
        anthropic: { cache_ttl: "1h" },
      },
      { slug: "five", model: "m3", context_window: 1000 },
    ]);
    const catalog = catalogOf(
      envWith({ SPINDLE_ANTHROPIC_MODELS: entries, ANTHROPIC_API_KEY: "k" }),
    );
    expect(["hour", "own", "five"].map((slug) => catalog.get(slug)?.promptCacheTtlS)).toEqual([
      3600, 1800, 300,
    ]);
  });

  it("reads a value once: the same JSON gives the same split, another JSON a new one", () => {
    const first = readAnthropicModels(models);
    expect(readAnthropicModels(models)).toBe(first);
    const other = readAnthropicModels(JSON.stringify([{ slug: "b", context_window: 1 }]));
    expect(other).not.toBe(first);
    expect([...other.options.keys()]).toEqual(["b"]);
  });

  it("refuses an unknown option or value, and entries of one model that disagree", () => {
    const bad = (entries: unknown[]) => () =>
      anthropicCatalogModels({ SPINDLE_ANTHROPIC_MODELS: JSON.stringify(entries) });
    expect(bad([{ slug: "a", context_window: 1, anthropic: { thinking: "always" } }])).toThrow();
    expect(bad([{ slug: "a", context_window: 1, anthropic: { effort: "max" } }])).toThrow();
    expect(bad([{ slug: "a", context_window: 1, anthropic: { cache_ttl: "24h" } }])).toThrow();
    expect(
      bad([
        { slug: "a", model: "m", context_window: 1, anthropic: { thinking: "adaptive" } },
        { slug: "b", model: "m", context_window: 1 },
      ]),
    ).toThrow('SPINDLE_ANTHROPIC_MODELS: entries for model "m" differ in "anthropic"');
  });
});
