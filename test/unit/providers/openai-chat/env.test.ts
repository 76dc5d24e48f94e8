import { describe, expect, it } from "vitest";
import { catalogOf } from "../../../../durable-objects/thread/providers.ts";
import type { Env } from "../../../../env.ts";
import { parseConfiguredModels } from "../../../../shared/models/index.ts";
import {
  createOpenAIChatClientFromEnv,
  openAIChatCatalogModels,
  ProviderError,
} from "../../../../shared/providers/index.ts";
import { prompt } from "./harness.ts";

const deps = { fetch: () => Promise.reject(new Error("no requests here")), model: "qwen3-8b" };

const MODELS = JSON.stringify([
  {
    slug: "qwen",
    model: "qwen3-8b",
    context_window: 32_000,
    chat: { developer_role: "system", max_tokens_field: "max_tokens" },
  },
  { slug: "gpt-chat", model: "gpt-5.4", context_window: 272_000 },
]);

describe("createOpenAIChatClientFromEnv", () => {
  it("requires OPENAI_CHAT_API_KEY", () => {
    expect(() => createOpenAIChatClientFromEnv({ OPENAI_CHAT_API_KEY: " " }, deps)).toThrow(
      ProviderError,
    );
    expect(() => createOpenAIChatClientFromEnv({}, deps)).toThrow(/OPENAI_CHAT_API_KEY is not set/);
  });

  it("rejects a base URL that is not http(s)", () => {
    expect(() =>
      createOpenAIChatClientFromEnv(
        { OPENAI_CHAT_API_KEY: "k", OPENAI_CHAT_BASE_URL: "ftp://host/v1" },
        deps,
      ),
    ).toThrow("openai-chat: the base URL must be http(s)");
  });

  it("posts to {OPENAI_CHAT_BASE_URL}/chat/completions, defaulting to OpenAI's", async () => {
    const urls: string[] = [];
    const recording = {
      ...deps,
      fetch: async (url: string) => {
        urls.push(url);
        return new Response("{}", { status: 400 });
      },
    };
    const local = createOpenAIChatClientFromEnv(
      { OPENAI_CHAT_API_KEY: "ollama", OPENAI_CHAT_BASE_URL: "http://127.0.0.1:11434/v1/" },
      recording,
    );
    const openai = createOpenAIChatClientFromEnv({ OPENAI_CHAT_API_KEY: "sk" }, recording);
    for (const client of [local, openai]) {
      await expect(async () => {
        for await (const _ of client.stream(prompt()));
      }).rejects.toThrow("openai-chat: HTTP 400");
    }
    expect(urls).toEqual([
      "http://127.0.0.1:11434/v1/chat/completions",
      "https://api.openai.com/v1/chat/completions",
    ]);
  });

  it("sends the key as Azure OpenAI's api-key header, and an api-version, when configured", async () => {
    const sent: { url: string; headers: Headers }[] = [];
    const recording = {
      ...deps,
      fetch: async (url: string, init?: RequestInit) => {
        sent.push({ url, headers: new Headers(init?.headers) });
        return new Response("{}", { status: 400 });
      },
    };
    const azure = createOpenAIChatClientFromEnv(
      {
        OPENAI_CHAT_API_KEY: "az-key",
        OPENAI_CHAT_BASE_URL: "http://127.0.0.1:9/openai/deployments/gpt-4o",
        OPENAI_CHAT_API_KEY_HEADER: "API-Key",
        OPENAI_CHAT_API_VERSION: "2024-10-21",
      },
      recording,
    );
    const bearer = createOpenAIChatClientFromEnv(
      { OPENAI_CHAT_API_KEY: "sk", OPENAI_CHAT_API_KEY_HEADER: " " },
      recording,
    );
    for (const client of [azure, bearer]) {
      await expect(async () => {
        for await (const _ of client.stream(prompt()));
      }).rejects.toThrow("openai-chat: HTTP 400");
    }
    const [toAzure, toOpenAI] = sent;
    expect(toAzure?.url).toBe(
      "http://127.0.0.1:9/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
    );
    expect([toAzure?.headers.get("api-key"), toAzure?.headers.get("authorization")]).toEqual([
      "az-key",
      null,
    ]);
    expect(toOpenAI?.url).toBe("https://api.openai.com/v1/chat/completions");
    expect([toOpenAI?.headers.get("api-key"), toOpenAI?.headers.get("authorization")]).toEqual([
      null,
      "Bearer sk",
    ]);
  });

  it("refuses an OPENAI_CHAT_API_KEY_HEADER it cannot send", () => {
    expect(() =>
      createOpenAIChatClientFromEnv(
        { OPENAI_CHAT_API_KEY: "k", OPENAI_CHAT_API_KEY_HEADER: "x-api-key" },
        deps,
      ),
    ).toThrow('OPENAI_CHAT_API_KEY_HEADER must be authorization or api-key, not "x-api-key"');
  });

  it("takes the model's wire options from its SPINDLE_OPENAI_CHAT_MODELS entry, by provider model", () => {
    const env = { OPENAI_CHAT_API_KEY: "k", SPINDLE_OPENAI_CHAT_MODELS: MODELS };
    const developer = {
      type: "message" as const,
      role: "developer" as const,
      content: [{ type: "input_text" as const, text: "<ctx/>" }],
    };
    const qwen = createOpenAIChatClientFromEnv(env, { ...deps, maxOutputTokens: 100 });
    const qwenBody = qwen.requestBody(prompt([developer]));
    expect(qwenBody.messages).toEqual([
      { role: "system", content: "be helpful" },
      { role: "system", content: "<ctx/>" },
    ]);
    expect(qwenBody.max_tokens).toBe(100);
    // An entry without `chat`: the defaults (OpenAI's layout).
    const gpt = createOpenAIChatClientFromEnv(env, {
      ...deps,
      model: "gpt-5.4",
      maxOutputTokens: 100,
    });
    const gptBody = gpt.requestBody(prompt([developer]));
    expect(gptBody.messages).toEqual([
      { role: "system", content: "be helpful" },
      { role: "developer", content: "<ctx/>" },
    ]);
    expect(gptBody.max_completion_tokens).toBe(100);
  });
});

describe("SPINDLE_OPENAI_CHAT_MODELS", () => {
  it("reaches the catalog without its chat members", () => {
    const models = parseConfiguredModels(
      "openai-chat",
      openAIChatCatalogModels({ SPINDLE_OPENAI_CHAT_MODELS: MODELS }),
    );
    expect(models.map((m) => [m.slug, m.provider, m.providerModel])).toEqual([
      ["qwen", "openai-chat", "qwen3-8b"],
      ["gpt-chat", "openai-chat", "gpt-5.4"],
    ]);
  });

  it("leaves unset, empty or invalid JSON for parseConfiguredModels to judge", () => {
    expect(openAIChatCatalogModels({})).toBeUndefined();
    expect(openAIChatCatalogModels({ SPINDLE_OPENAI_CHAT_MODELS: "" })).toBe("");
    expect(() =>
      parseConfiguredModels(
        "openai-chat",
        openAIChatCatalogModels({ SPINDLE_OPENAI_CHAT_MODELS: "[{" }),
      ),
    ).toThrow(SyntaxError);
    // An unknown member outside `chat` is still the common schema's error.
    const unknown = JSON.stringify([{ slug: "a", context_window: 1, colour: "red" }]);
    expect(() =>
      parseConfiguredModels(
        "openai-chat",
        openAIChatCatalogModels({ SPINDLE_OPENAI_CHAT_MODELS: unknown }),
      ),
    ).toThrow();
  });

  it("rejects an unknown chat option, and entries of one provider model that disagree", () => {
    const bad = JSON.stringify([
      { slug: "a", context_window: 1, chat: { developer_role: "tool" } },
    ]);
    expect(() => openAIChatCatalogModels({ SPINDLE_OPENAI_CHAT_MODELS: bad })).toThrow();
    const typo = JSON.stringify([
      { slug: "a", context_window: 1, chat: { developerRole: "user" } },
    ]);
    expect(() => openAIChatCatalogModels({ SPINDLE_OPENAI_CHAT_MODELS: typo })).toThrow();
    const split = JSON.stringify([
      { slug: "a", model: "m", context_window: 1, chat: { developer_role: "user" } },
      { slug: "b", model: "m", context_window: 1 },
    ]);
    expect(() => openAIChatCatalogModels({ SPINDLE_OPENAI_CHAT_MODELS: split })).toThrow(
      'entries for model "m" differ in "chat"',
    );
  });
});

describe("catalogOf with openai-chat", () => {
  it("knows the models from SPINDLE_OPENAI_CHAT_MODELS, and serves them once OPENAI_CHAT_API_KEY is set", () => {
    const unkeyed = catalogOf({ SPINDLE_OPENAI_CHAT_MODELS: MODELS } as Env);
    expect(unkeyed.get("qwen")?.provider).toBe("openai-chat");
    expect(unkeyed.providers()).toEqual(["local"]);
    const keyed = catalogOf({
      SPINDLE_OPENAI_CHAT_MODELS: MODELS,
      OPENAI_CHAT_API_KEY: "k",
    } as Env);
    expect(keyed.providers()).toEqual(["local", "openai-chat"]);
  });
});
