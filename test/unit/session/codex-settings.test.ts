import { describe, expect, it } from "vitest";
import type { TurnContextItem } from "../../../shared/protocol/index.ts";
import {
  collaborationModeOf,
  settingsFromTurnContext,
  settingsFromWorldState,
  threadSettingsAsTurnContext,
} from "../../../shared/session/index.ts";
import { pathOf } from "../../../shared/world-state/index.ts";

const item = (fields: Partial<TurnContextItem>): TurnContextItem => ({
  cwd: "/r",
  model: "m",
  ...fields,
});

/** The permissions a turn_context gives, and the notes on what did not carry over. */
function permissions(fields: Partial<TurnContextItem>) {
  const { update, notes } = settingsFromTurnContext(item(fields));
  return { permissions: update.permissions, notes };
}

const READ_ROOT = { path: { type: "special", value: { kind: "root" } }, access: "read" };

describe("settingsFromTurnContext: a Codex turn_context as a configuration request", () => {
  it("reads the sandbox under either tag, and danger-full-access always has the network", () => {
    expect(
      permissions({ sandbox_policy: { mode: "read-only" }, approval_policy: "never" }),
    ).toEqual({
      permissions: {
        sandbox: "read-only",
        approval_policy: "never",
        writable_roots: [],
        network_access: false,
      },
      notes: [],
    });
    expect(
      permissions({
        sandbox_policy: { type: "danger-full-access", network_access: false },
        approval_policy: "untrusted",
      }).permissions,
    ).toEqual({
      sandbox: "danger-full-access",
      approval_policy: "untrusted",
      writable_roots: [],
      network_access: true,
    });
    expect(
      permissions({ sandbox_policy: { type: "read-only", network_access: true } }).permissions,
    ).toEqual({
      sandbox: "read-only",
      approval_policy: "on-request",
      writable_roots: [],
      network_access: true,
    });
  });

  it("adds the workspace roots besides the cwd to a workspace-write sandbox's writable roots", () => {
    expect(
      permissions({
        cwd: "file:///r",
        workspace_roots: ["/r", "file:///lib%20s"],
        sandbox_policy: { type: "workspace-write", writable_roots: ["/tmp/x"] },
      }).permissions?.writable_roots,
    ).toEqual(["/tmp/x", "/lib s"]);
  });

  it("says what it cannot express: an unknown sandbox or approval, excluded temp dirs", () => {
    expect(
      permissions({
        sandbox_policy: { type: "sandbox-of-the-future", exclude_slash_tmp: true },
        approval_policy: "sometimes",
      }),
    ).toEqual({
      permissions: undefined,
      notes: [
        "exclude_slash_tmp is not modelled here",
        'sandbox "sandbox-of-the-future" is unknown here',
        'approval policy "sometimes" is unknown here',
      ],
    });
  });

  it("reads object approval policies: all prompting is on-request, none is never", () => {
    const granular = (flags: Record<string, boolean>) =>
      permissions({ approval_policy: { granular: flags } });
    expect(granular({ sandbox_approval: true, rules: true })).toEqual({
      permissions: { ...granular({}).permissions, approval_policy: "on-request" },
      notes: [],
    });
    expect(granular({ sandbox_approval: false, rules: false }).permissions?.approval_policy).toBe(
      "never",
    );
    // `reject` is the inverse: nothing rejected is everything prompting.
    expect(
      permissions({ approval_policy: { reject: { sandbox_approval: false, rules: false } } }),
    ).toMatchObject({ permissions: { approval_policy: "on-request" }, notes: [] });
    expect(granular({ sandbox_approval: false, rules: true })).toMatchObject({
      permissions: { approval_policy: "never" },
      notes: ["the granular approval policy is read as never; rules may prompt in Codex, not here"],
    });
  });

  it("takes the permission profile over the sandbox policy, in each of its forms", () => {
    const profile = (permission_profile: unknown) =>
      permissions({ sandbox_policy: { type: "read-only" }, permission_profile });
    expect(profile({ type: "disabled" }).permissions).toMatchObject({
      sandbox: "danger-full-access",
      network_access: true,
    });
    expect(profile({ type: "external", network: "restricted" })).toMatchObject({
      permissions: { sandbox: "danger-full-access", network_access: true },
      notes: [
        "an external sandbox is read as danger-full-access (no sandbox here)",
        "the external sandbox's network restriction is not kept",
      ],
    });
    expect(
      profile({
        type: "managed",
        file_system: {
          type: "restricted",
          entries: [
            READ_ROOT,
            { path: { type: "path", path: "/r" }, access: "write" },
            { path: { type: "path", path: "/data" }, access: "write" },
            { path: { type: "special", value: { kind: "tmpdir" } }, access: "write" },
            { path: { type: "path", path: "/r/secrets" }, access: "deny" },
          ],
        },
        network: "enabled",
      }),
    ).toEqual({
      permissions: {
        sandbox: "workspace-write",
        approval_policy: "on-request",
        writable_roots: ["/data"],
        network_access: true,
      },
      notes: ["permission entries with no equivalent here: deny /r/secrets"],
    });
    expect(
      profile({
        type: "managed",
        file_system: {
          type: "restricted",
          entries: [{ path: { type: "special", value: { kind: "root" } }, access: "write" }],
        },
      }).permissions?.sandbox,
    ).toBe("danger-full-access");
    // The 0.124 struct.
    expect(
      profile({ network: { enabled: false }, file_system: { read: ["/"], write: [] } }).permissions,
    ).toMatchObject({ sandbox: "read-only", network_access: false });
    expect(
      profile({ type: "managed", file_system: { type: "unrestricted" }, network: "restricted" }),
    ).toMatchObject({
      permissions: { sandbox: "danger-full-access", network_access: true },
      notes: ["the network restriction of an unrestricted file system is not kept"],
    });
  });

  it("falls back to the sandbox policy, saying so, when the profile is of a shape it does not know", () => {
    expect(
      permissions({ sandbox_policy: { type: "read-only" }, permission_profile: { type: "hmm" } }),
    ).toMatchObject({
      permissions: { sandbox: "read-only" },
      notes: ["the permission profile could not be read; sandbox_policy is used instead"],
    });
  });

  it("reads the 0.122 file-system policy when there is no permission profile", () => {
    expect(
      permissions({
        sandbox_policy: { type: "workspace-write", network_access: true },
        file_system_sandbox_policy: {
          kind: "restricted",
          entries: [READ_ROOT, { path: { type: "path", path: "/out" }, access: "write" }],
        },
      }).permissions,
    ).toEqual({
      sandbox: "workspace-write",
      approval_policy: "on-request",
      writable_roots: ["/out"],
      network_access: true,
    });
  });

  it("reads Spindle's own turn_context back: several environments, its collaboration mode", () => {
    const { update, notes } = settingsFromTurnContext(
      item({
        model: "spindle-local",
        environments: [
          { environment_id: "a", cwd: "/a" },
          { environment_id: "b", cwd: "/b" },
        ],
        collaboration_mode: { mode: "plan", instructions: "Plan first." },
        truncation_policy: { mode: "tokens", limit: 500 },
        summary: "auto",
      }),
    );
    expect({ update, notes }).toEqual({
      update: {
        model: "spindle-local",
        environments: [
          { id: "a", cwd: "/a" },
          { id: "b", cwd: "/b" },
        ],
        collaboration_mode: { mode: "plan", instructions: "Plan first." },
        truncation: { tokens: 500 },
      },
      notes: [],
    });
  });
});

describe("collaborationModeOf: every form Codex wrote", () => {
  it("reads the bare name, the 0.89 flat form, the settings form and Spindle's", () => {
    expect(collaborationModeOf("plan")).toEqual({ mode: "plan" });
    expect(
      collaborationModeOf({ mode: "plan", model: "m", developer_instructions: "Outline." }),
    ).toEqual({ mode: "plan", instructions: "Outline." });
    expect(
      collaborationModeOf({
        mode: "execute",
        settings: { model: "m", developer_instructions: "Go." },
      }),
    ).toEqual({ mode: "default", instructions: "Go." });
    expect(collaborationModeOf({ mode: "review", instructions: "Look." })).toEqual({
      mode: "review",
      instructions: "Look.",
    });
  });

  it("is no setting for the default mode without instructions, or without a mode", () => {
    expect(collaborationModeOf({ mode: "code", settings: { developer_instructions: null } })).toBe(
      undefined,
    );
    expect(collaborationModeOf({ settings: {} })).toBe(undefined);
    expect(collaborationModeOf(undefined)).toBe(undefined);
  });
});

describe("settingsFromWorldState: what newer Codex keeps only in world_state", () => {
  it("lists the environments primary first, names the legacy one local, joins AGENTS.md shards", () => {
    expect(
      settingsFromWorldState({
        agents_md: { directory: "file:///w", text: "Part one. " },
        agents_md_2: { text: "Part two." },
        collaboration_mode: "plan",
        environments: {
          environments: {
            a: { cwd: "/a", status: "starting" },
            b: { cwd: "file:///b", shell: "fish", is_primary: true },
            broken: { shell: "sh" },
          },
          timezone: "Pacific/Auckland",
          network: "<network …>",
        },
        personality: { model: "m", personality: "friendly" },
      }),
    ).toEqual({
      update: {
        environments: [
          { id: "b", cwd: "/b", shell: "fish" },
          { id: "a", cwd: "/a", status: "starting" },
        ],
        timezone: "Pacific/Auckland",
        personality: "friendly",
        collaboration_mode: { mode: "plan" },
        agents_md: { directory: "/w", text: "Part one. Part two." },
      },
      notes: [],
    });
    expect(
      settingsFromWorldState({ environments: { environments: { "": { cwd: "/x" } } } }).update,
    ).toEqual({ environments: [{ id: "local", cwd: "/x" }] });
  });
});

describe("threadSettingsAsTurnContext and pathOf", () => {
  it("reads thread_settings_applied as a turn_context, reasoning fields renamed", () => {
    expect(
      threadSettingsAsTurnContext({
        type: "other",
        thread_settings: {
          cwd: "/r",
          model: "m",
          reasoning_effort: "high",
          approval_policy: "never",
        },
      }),
    ).toEqual({ cwd: "/r", model: "m", approval_policy: "never", effort: "high" });
    expect(threadSettingsAsTurnContext({ thread_settings: { cwd: "/r" } })).toBe(undefined);
  });

  it("turns file URIs into paths and leaves paths alone", () => {
    expect(["file:///srv/a%20b", "file:///C:/Users/ana", "/plain", "file://%"].map(pathOf)).toEqual(
      ["/srv/a b", "C:/Users/ana", "/plain", "file://%"],
    );
  });
});
