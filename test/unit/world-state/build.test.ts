import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  type Fragment,
  fragmentToMessage,
  isContextualDevFragment,
  isContextualUserFragment,
  renderFragment,
} from "../../../shared/context/index.ts";
import type { EnvironmentConfig } from "../../../shared/protocol/index.ts";
import {
  applyMergePatch,
  buildWorldState,
  mergePatchFrom,
  SECTION_IDS,
  type WorldStateInput,
} from "../../../shared/world-state/index.ts";
import { input, roundTrip, texts } from "./builders.ts";

const everything: WorldStateInput = input({
  model: { slug: "spindle-local-lite", instructions: "Lite instructions." },
  previousModel: "spindle-local",
  collaborationMode: { mode: "plan", instructions: "Plan first." },
  personality: { name: "friendly", message: "Be warm." },
  agentsMd: { directory: "/repo", text: "Use tabs." },
  network: { allowed_domains: ["a.example"], denied_domains: [] },
  contextSections: { notes: { role: "user", text: "Remember." } },
});

describe("buildWorldState", () => {
  test("renders the built-in sections in design §4 order, model switch first", () => {
    expect(
      buildWorldState(everything)
        .renderFull()
        .map((f) => [f.role, f.startMarker]),
    ).toEqual([
      ["developer", "<model_switch>"],
      ["developer", "<permissions instructions>"],
      ["developer", "<collaboration_mode>"],
      ["developer", "<personality_spec>"],
      ["user", "# AGENTS.md instructions"],
      ["user", "<environment_context>"],
      ["user", "<extension_context"],
    ]);
  });

  test("persists one snapshot per configured section under the stable ids", () => {
    expect(SECTION_IDS).toEqual({
      model: "model",
      permissions: "permissions",
      collaborationMode: "collaboration_mode",
      personality: "personality",
      agentsMd: "agents_md",
      environments: "environments",
      contextSections: "context_sections",
      additionalContext: "additional_context",
    });
    expect(Object.keys(buildWorldState(everything).snapshot())).toEqual([
      "agents_md",
      "collaboration_mode",
      "context_sections",
      "environments",
      "model",
      "permissions",
      "personality",
    ]);
    // No AGENTS.md is a Known "none" (`{}`), so a withdrawal is remembered.
    expect(buildWorldState(input()).snapshot().agents_md).toEqual({});
    expect(Object.keys(buildWorldState(input()).snapshot())).toEqual([
      "agents_md",
      "environments",
      "model",
      "permissions",
      "personality",
    ]);
  });

  test("a minimal input renders permissions and the environment only", () => {
    expect(texts(buildWorldState(input()).renderFull()).map((t) => t.text.split("\n")[0])).toEqual([
      "<permissions instructions>",
      "<environment_context>",
    ]);
  });

  test("a model switch on the next turn renders only the switch", () => {
    const before = buildWorldState(input());
    const after = buildWorldState(
      input({ model: { slug: "spindle-local-lite", instructions: "Lite." } }),
    );
    expect(after.renderDiff(roundTrip(before.snapshot())).map((f) => f.startMarker)).toEqual([
      "<model_switch>",
    ]);
  });

  test("full context recorded in history, with its snapshot, renders nothing next time", () => {
    const world = buildWorldState(everything);
    const history = world.renderFull().map(fragmentToMessage);
    expect(world.renderHistoryDiff(roundTrip(world.snapshot()), history)).toEqual([]);
  });
});

const text = fc.string({ maxLength: 12 });
const nonEmpty = fc.string({ minLength: 1, maxLength: 12 });
const sometimesBlank = fc.oneof(text, fc.constantFrom("", "  ", "\n"));

const environment: fc.Arbitrary<EnvironmentConfig> = fc.record(
  {
    id: fc.constantFrom("local", "remote", "devbox", "a&b", '"q"'),
    cwd: fc.oneof(
      fc.constantFrom("/repo", "/srv", "C:\\work"),
      fc.string({ minLength: 1, unit: "binary" }),
    ),
    shell: fc.constantFrom("bash", "zsh", "<pwsh>"),
    status: fc.constantFrom("available" as const, "starting" as const),
  },
  { requiredKeys: ["id", "cwd"] },
);

const worldStateInput: fc.Arbitrary<WorldStateInput> = fc.record(
  {
    model: fc.record({ slug: fc.constantFrom("m1", "m2", "m3"), instructions: sometimesBlank }),
    previousModel: fc.constantFrom("m1", "m2", "m3"),
    permissions: fc.record({
      sandbox: fc.constantFrom(
        "read-only" as const,
        "workspace-write" as const,
        "danger-full-access" as const,
      ),
      approval_policy: fc.constantFrom(
        "never" as const,
        "on-request" as const,
        "on-failure" as const,
        "untrusted" as const,
      ),
      writable_roots: fc.array(nonEmpty, { maxLength: 3 }),
      network_access: fc.boolean(),
    }),
    collaborationMode: fc.record(
      { mode: fc.constantFrom("plan", "pair"), instructions: sometimesBlank },
      { requiredKeys: ["mode"] },
    ),
    personality: fc.record({ name: fc.constantFrom("friendly", "terse"), message: sometimesBlank }),
    agentsMd: fc.record({ text: sometimesBlank, directory: nonEmpty }),
    environments: fc.array(environment, { maxLength: 4 }),
    currentDate: fc.constantFrom("2026-01-01", "2026-01-02"),
    timezone: fc.constantFrom("UTC", "Europe/Paris", "A<B"),
    network: fc.record({
      allowed_domains: fc.array(fc.constantFrom("a.example", "b.example", "c"), { maxLength: 3 }),
      denied_domains: fc.array(fc.constantFrom("a.example", "d.example"), { maxLength: 2 }),
    }),
    contextSections: fc.dictionary(
      fc.constantFrom("notes", "rules", "x.y", "7"),
      fc.record({
        role: fc.constantFrom("user" as const, "developer" as const),
        text: sometimesBlank,
      }),
      { maxKeys: 4 },
    ),
  },
  {
    requiredKeys: [
      "model",
      "permissions",
      "environments",
      "currentDate",
      "timezone",
      "contextSections",
    ],
  },
);

function assertContextual(fragments: readonly Fragment[]): void {
  for (const f of fragments) {
    const part = { type: "input_text" as const, text: renderFragment(f) };
    if (f.role === "user") expect(isContextualUserFragment(part)).toBe(true);
    else expect(isContextualDevFragment(part)).toBe(true);
  }
}

describe("world-state properties", () => {
  test("an identical input diffed against its own persisted snapshot renders nothing", () => {
    fc.assert(
      fc.property(worldStateInput, (value) => {
        const world = buildWorldState(value);
        expect(buildWorldState(value).renderDiff(roundTrip(world.snapshot()))).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  test("an identical input with its full render in history renders nothing in a history diff", () => {
    fc.assert(
      fc.property(worldStateInput, (value) => {
        const world = buildWorldState(value);
        const history = world.renderFull().map(fragmentToMessage);
        expect(world.renderHistoryDiff(roundTrip(world.snapshot()), history)).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  test("every user fragment any section emits is contextual (never a turn boundary), every developer one too", () => {
    fc.assert(
      fc.property(worldStateInput, worldStateInput, (current, previous) => {
        const world = buildWorldState(current);
        const before = buildWorldState(previous);
        assertContextual(world.renderFull());
        assertContextual(world.renderDiff(roundTrip(before.snapshot())));
        const history = before.renderFull().map(fragmentToMessage);
        assertContextual(world.renderHistoryDiff(roundTrip(before.snapshot()), history));
        assertContextual(world.renderHistoryDiff(undefined, history));
      }),
      { numRuns: 300 },
    );
  });

  test("the patch between two turns' snapshots reproduces the new snapshot", () => {
    fc.assert(
      fc.property(worldStateInput, worldStateInput, (current, previous) => {
        const now = buildWorldState(current).snapshot();
        const before = buildWorldState(previous).snapshot();
        expect(applyMergePatch(before, mergePatchFrom(before, now) ?? {})).toEqual(now);
      }),
    );
  });
});
