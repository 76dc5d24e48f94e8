import { describe, expect, it } from "vitest";
import { DEFAULT_MODEL_CATALOG, parseConfiguredModels } from "../../../shared/models/index.ts";

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
