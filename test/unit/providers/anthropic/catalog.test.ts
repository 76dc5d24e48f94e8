import { describe, expect, it } from "vitest";
import { catalogOf } from "../../../../durable-objects/thread/providers.ts";
import type { Env } from "../../../../env.ts";

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
