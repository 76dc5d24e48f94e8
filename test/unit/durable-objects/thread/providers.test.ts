import { describe, expect, it } from "vitest";
import { catalogOf } from "../../../../durable-objects/thread/providers.ts";
import type { Env } from "../../../../env.ts";
import { resolveSessionConfiguration } from "../../../../shared/session/index.ts";

const MODELS = JSON.stringify([{ slug: "gpt-x", context_window: 100_000 }]);
const envWith = (vars: Partial<Env>) => vars as Env;

describe("catalogOf: the models and providers of a deployment", () => {
  it("serves openai only once OPENAI_API_KEY is set, while its models stay known", () => {
    for (const key of [undefined, "", "   "]) {
      const catalog = catalogOf(envWith({ SPINDLE_OPENAI_MODELS: MODELS, OPENAI_API_KEY: key }));
      expect([catalog.providers(), catalog.get("gpt-x")?.provider]).toEqual([["local"], "openai"]);
    }
    const keyed = catalogOf(envWith({ SPINDLE_OPENAI_MODELS: MODELS, OPENAI_API_KEY: "sk-1" }));
    expect(keyed.providers()).toEqual(["local", "openai"]);
  });

  it("so a thread on an openai model is refused at create without a key, and made with one", () => {
    const create = (env: Env) => () =>
      resolveSessionConfiguration(undefined, { model: "gpt-x" }, catalogOf(env), "spindle-local");
    expect(create(envWith({ SPINDLE_OPENAI_MODELS: MODELS }))).toThrow(
      'model "gpt-x" is served by provider "openai", which is not configured; available here: local',
    );
    expect(
      create(envWith({ SPINDLE_OPENAI_MODELS: MODELS, OPENAI_API_KEY: "sk-1" }))(),
    ).toMatchObject({ model: "gpt-x", provider: "openai" });
  });
});
