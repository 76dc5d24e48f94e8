import { describe, expect, it } from "vitest";
import { DEFAULT_MODEL_CATALOG, DEFAULT_MODEL_SLUG } from "../../../shared/models/index.ts";
import {
  type SessionConfiguration,
  type ThreadConfig,
  ThreadConfigSchema,
} from "../../../shared/protocol/index.ts";
import {
  DEFAULT_PERMISSIONS,
  InvalidConfigurationError,
  resolveSessionConfiguration,
  UnknownModelError,
} from "../../../shared/session/index.ts";

function resolve(current: SessionConfiguration | undefined, update: ThreadConfig) {
  return resolveSessionConfiguration(current, update, DEFAULT_MODEL_CATALOG, DEFAULT_MODEL_SLUG);
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
    const first = resolve(undefined, { provider: "custom" });
    expect(first.provider).toBe("custom");
    expect(resolve(first, { model: "spindle-local-lite" }).provider).toBe("local");
    expect(resolve(first, { timezone: "UTC" }).provider).toBe("custom");
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
});
