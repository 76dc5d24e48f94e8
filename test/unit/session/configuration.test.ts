import { describe, expect, it } from "vitest";
import {
  DEFAULT_MODEL_CATALOG,
  DEFAULT_MODEL_SLUG,
  type ModelInfo,
  SPINDLE_LOCAL,
} from "../../../shared/models/index.ts";
import {
  type SessionConfiguration,
  type ThreadConfig,
  ThreadConfigSchema,
} from "../../../shared/protocol/index.ts";
import {
  DEFAULT_PERMISSIONS,
  InvalidConfigurationError,
  MAX_CONFIGURATION_BYTES,
  resolveSessionConfiguration,
  UnknownModelError,
} from "../../../shared/session/index.ts";

function resolve(
  current: SessionConfiguration | undefined,
  update: ThreadConfig,
  catalog = DEFAULT_MODEL_CATALOG,
) {
  return resolveSessionConfiguration(current, update, catalog, DEFAULT_MODEL_SLUG);
}

/** A deployment with an `openai` model whose provider has no key: `openai` serves no turn. */
const OPENAI_MODEL: ModelInfo = {
  ...SPINDLE_LOCAL,
  slug: "gpt-x",
  provider: "openai",
};
const WITHOUT_OPENAI_KEY = DEFAULT_MODEL_CATALOG.with([OPENAI_MODEL]).servedBy(["local"]);

function configurationError(run: () => unknown): { path: string; message: string } | undefined {
  try {
    run();
  } catch (err) {
    if (err instanceof InvalidConfigurationError) return { path: err.path, message: err.message };
    throw err;
  }
  return undefined;
}

describe("resolveSessionConfiguration", () => {
  it("fills a new thread's configuration with the defaults", () => {
    expect(resolve(undefined, {})).toEqual({
      model: "spindle-local",
      provider: "local",
      permissions: DEFAULT_PERMISSIONS,
      environments: [],
      timezone: "UTC",
      context_sections: {},
      tools: [],
      truncation: { tokens: 10_000 },
    });
  });

  it("keeps overrides as the new defaults and leaves unset fields as they were", () => {
    const first = resolve(undefined, {
      cwd: "/repo",
      timezone: "Europe/Paris",
      personality: "friendly",
    });
    const second = resolve(first, { model: "spindle-local-lite" });
    expect(second.model).toBe("spindle-local-lite");
    expect(second.environments).toEqual([{ id: "local", cwd: "/repo" }]);
    expect(second.timezone).toBe("Europe/Paris");
    expect(second.personality).toBe("friendly");
  });

  it("clears nullable fields with null", () => {
    const first = resolve(undefined, {
      agents_md: { directory: "/r", text: "x" },
      personality: "friendly",
      developer_instructions: "be nice",
    });
    const second = resolve(first, {
      agents_md: null,
      personality: null,
      developer_instructions: null,
    });
    expect(second).not.toHaveProperty("agents_md");
    expect(second).not.toHaveProperty("personality");
    expect(second).not.toHaveProperty("developer_instructions");
  });

  it("moves the primary environment with the cwd shorthand and keeps the others", () => {
    const first = resolve(undefined, {
      environments: [
        { id: "laptop", cwd: "/a", shell: "zsh" },
        { id: "devbox", cwd: "/b" },
      ],
    });
    expect(resolve(first, { cwd: "/c" }).environments).toEqual([
      { id: "laptop", cwd: "/c", shell: "zsh" },
      { id: "devbox", cwd: "/b" },
    ]);
  });

  it("merges context sections per id and removes an id set to null, keeping insertion order", () => {
    const first = resolve(undefined, {
      context_sections: { a: { role: "user", text: "A" }, b: { role: "developer", text: "B" } },
    });
    const second = resolve(first, {
      context_sections: { a: null, c: { role: "user", text: "C" } },
    });
    expect(Object.keys(second.context_sections)).toEqual(["b", "c"]);
    expect(first.context_sections).toHaveProperty("a");
  });

  it("rejects an unknown model", () => {
    expect(() => resolve(undefined, { model: "gpt-nope" })).toThrow(UnknownModelError);
  });

  it("rejects an unknown timezone", () => {
    expect(() => resolve(undefined, { timezone: "Mars/Olympus" })).toThrow(
      InvalidConfigurationError,
    );
  });

  it("switches to the new model's provider when the model changes without a provider", () => {
    const catalog = DEFAULT_MODEL_CATALOG.servedBy(["local", "custom"]);
    const first = resolve(undefined, { provider: "custom" }, catalog);
    expect(first.provider).toBe("custom");
    expect(resolve(first, { model: "spindle-local-lite" }, catalog).provider).toBe("local");
    expect(resolve(first, { timezone: "UTC" }, catalog).provider).toBe("custom");
  });

  it("refuses a provider the deployment does not serve, named or implied by the model", () => {
    expect(configurationError(() => resolve(undefined, { provider: "nope" }))).toEqual({
      path: "provider",
      message: 'provider "nope" is not configured; available here: local',
    });
    const local = resolve(undefined, {}, WITHOUT_OPENAI_KEY);
    expect(
      configurationError(() => resolve(local, { model: "gpt-x" }, WITHOUT_OPENAI_KEY)),
    ).toEqual({
      path: "model",
      message:
        'model "gpt-x" is served by provider "openai", which is not configured; available here: local',
    });
    expect(
      configurationError(() => resolve(local, { provider: "openai" }, WITHOUT_OPENAI_KEY)),
    ).toEqual({
      path: "provider",
      message: 'provider "openai" is not configured; available here: local',
    });
  });

  it("serves a provider once it is configured", () => {
    const withKey = DEFAULT_MODEL_CATALOG.with([OPENAI_MODEL]);
    expect(withKey.providers()).toEqual(["local", "openai"]);
    expect(resolve(undefined, { model: "gpt-x" }, withKey).provider).toBe("openai");
  });

  it("keeps a thread whose provider went away usable for overrides that do not choose one", () => {
    const withKey = DEFAULT_MODEL_CATALOG.with([OPENAI_MODEL]);
    const onOpenai = resolve(undefined, { model: "gpt-x" }, withKey);
    expect(resolve(onOpenai, { timezone: "Asia/Tokyo" }, WITHOUT_OPENAI_KEY)).toEqual({
      ...onOpenai,
      timezone: "Asia/Tokyo",
    });
  });

  it("merges context sections as own members: ids named like Object.prototype's stay data", () => {
    const ids = ["constructor", "toString", "hasOwnProperty", "valueOf"];
    const first = resolve(undefined, {
      context_sections: Object.fromEntries(ids.map((id) => [id, { role: "user", text: id }])),
    });
    const second = resolve(first, { context_sections: { toString: null, extra: null } });
    expect(Object.entries(second.context_sections)).toEqual([
      ["constructor", { role: "user", text: "constructor" }],
      ["hasOwnProperty", { role: "user", text: "hasOwnProperty" }],
      ["valueOf", { role: "user", text: "valueOf" }],
    ]);
    expect(Object.getPrototypeOf(second.context_sections)).toBe(Object.prototype);
  });

  it("refuses a configuration that outgrows a turn body as overrides accumulate", () => {
    const section = (text: string) => ({ role: "user" as const, text });
    const big = "s".repeat(3 * 1024 * 1024);
    const one = resolve(undefined, { context_sections: { a: section(big) } });
    const two = resolve(one, { context_sections: { b: section(big) } });
    const error = configurationError(() => resolve(two, { context_sections: { c: section(big) } }));
    expect(error).toEqual({
      path: "",
      message: expect.stringMatching(
        /^the configuration would be \d+ bytes of JSON; at most 8388608$/,
      ),
    });
    // Replacing a section instead of adding one stays within the bound.
    expect(
      Object.keys(resolve(two, { context_sections: { b: section("small") } }).context_sections),
    ).toEqual(["a", "b"]);
    expect(MAX_CONFIGURATION_BYTES).toBe(8 * 1024 * 1024);
  });

  it("refuses __proto__ as a context section id, where an object would drop it", () => {
    const parsed = ThreadConfigSchema.safeParse(
      JSON.parse('{"context_sections":{"__proto__":{"role":"user","text":"x"}}}'),
    );
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map(({ path, message }) => ({ path, message }))).toEqual([
      { path: ["context_sections", "__proto__"], message: "__proto__ cannot be a key" },
    ]);
  });

  it("carries auto_compact_fraction as a new default; null goes back to the engine default", () => {
    const first = resolve(undefined, { auto_compact_fraction: 0.5 });
    expect(first.auto_compact_fraction).toBe(0.5);
    const second = resolve(first, { timezone: "UTC" });
    expect(second.auto_compact_fraction).toBe(0.5);
    expect(resolve(second, { auto_compact_fraction: null })).not.toHaveProperty(
      "auto_compact_fraction",
    );
  });

  it("carries idle_compaction as a new default; null turns it off and is kept; bounds are checked", () => {
    const settings = { after_idle_s: 240, min_context_tokens: 50_000 };
    const first = resolve(undefined, { idle_compaction: settings });
    expect(first.idle_compaction).toEqual(settings);
    const second = resolve(first, { timezone: "UTC" });
    expect(second.idle_compaction).toEqual(settings);
    // Kept as null, not removed: a thread's null outranks its tenant's default.
    const off = resolve(second, { idle_compaction: null });
    expect(off.idle_compaction).toBeNull();
    expect(resolve(off, {}).idle_compaction).toBeNull();
    expect(resolve(undefined, {})).not.toHaveProperty("idle_compaction");
    const issues = (idle_compaction: unknown) =>
      ThreadConfigSchema.safeParse({ idle_compaction }).error?.issues.map((i) => i.path.join("."));
    expect(issues(settings)).toBeUndefined();
    expect(issues({ after_idle_s: 0, min_context_tokens: 1 })).toEqual([
      "idle_compaction.after_idle_s",
    ]);
    expect(issues({ after_idle_s: 86_401, min_context_tokens: 1.5 })).toEqual([
      "idle_compaction.after_idle_s",
      "idle_compaction.min_context_tokens",
    ]);
    expect(issues({ after_idle_s: 60 })).toEqual(["idle_compaction.min_context_tokens"]);
    expect(issues({ after_idle_s: 60, min_context_tokens: 1, extra: true })).toEqual([
      "idle_compaction",
    ]);
  });

  it("keeps a reasoning override whole as the new default; null goes back to the model's defaults", () => {
    const first = resolve(undefined, { reasoning: { effort: "high", summary: "concise" } });
    expect(first.reasoning).toEqual({ effort: "high", summary: "concise" });
    expect(resolve(first, { timezone: "UTC" }).reasoning).toEqual(first.reasoning);
    // A new object replaces the old one: its summary is not kept.
    expect(resolve(first, { reasoning: { effort: "low" } }).reasoning).toEqual({ effort: "low" });
    expect(resolve(first, { reasoning: null })).not.toHaveProperty("reasoning");
  });

  it("accepts only the known reasoning efforts and summaries", () => {
    const accepts = (reasoning: unknown) => ThreadConfigSchema.safeParse({ reasoning }).success;
    expect(accepts({ effort: "xhigh", summary: "none" })).toBe(true);
    expect(accepts({})).toBe(true);
    expect(accepts({ effort: "extreme" })).toBe(false);
    expect(accepts({ summary: "brief" })).toBe(false);
    expect(accepts({ effort: "low", verbosity: "low" })).toBe(false);
  });

  it("accepts auto_compact_fraction only in (0, 1]", () => {
    expect(ThreadConfigSchema.safeParse({ auto_compact_fraction: 1 }).success).toBe(true);
    expect(ThreadConfigSchema.safeParse({ auto_compact_fraction: 0 }).success).toBe(false);
    expect(ThreadConfigSchema.safeParse({ auto_compact_fraction: 1.5 }).success).toBe(false);
  });

  it("resolves MCP servers from labels, references and inline tool entries", () => {
    const parse = (config: unknown) => ThreadConfigSchema.parse(config);
    const created = resolve(
      undefined,
      parse({
        mcp_servers: ["docs", { label: "ci", allowed_tools: ["run"] }],
        tools: [
          { name: "client_tool" },
          { type: "mcp", server_label: "search", server_url: "https://mcp.example/s" },
        ],
      }),
    );
    expect(created.tools.map((t) => t.name)).toEqual(["client_tool"]);
    expect(created.mcp_servers).toEqual([
      { label: "docs" },
      { label: "ci", allowed_tools: ["run"] },
      { label: "search", url: "https://mcp.example/s" },
    ]);
    // An override without servers keeps them; one that names servers replaces them; null clears.
    expect(resolve(created, parse({ cwd: "/w" })).mcp_servers).toEqual(created.mcp_servers);
    expect(resolve(created, parse({ mcp_servers: ["docs"] })).mcp_servers).toEqual([
      { label: "docs" },
    ]);
    expect(resolve(created, parse({ mcp_servers: null }))).not.toHaveProperty("mcp_servers");
    // Function tools replaced without MCP entries leave the servers alone.
    expect(resolve(created, parse({ tools: [] })).mcp_servers).toEqual(created.mcp_servers);
  });

  it("refuses a server named twice and a label outside [A-Za-z0-9_-]{1,64}", () => {
    const twice = ThreadConfigSchema.parse({
      mcp_servers: ["docs"],
      tools: [{ type: "mcp", server_label: "docs" }],
    });
    expect(configurationError(() => resolve(undefined, twice))?.path).toBe("mcp_servers");
    expect(ThreadConfigSchema.safeParse({ mcp_servers: ["a b"] }).success).toBe(false);
    expect(ThreadConfigSchema.safeParse({ mcp_servers: ["x".repeat(65)] }).success).toBe(false);
    expect(
      ThreadConfigSchema.safeParse({ tools: [{ type: "mcp", server_label: "ok", headers: {} }] })
        .success,
    ).toBe(false);
  });
});
