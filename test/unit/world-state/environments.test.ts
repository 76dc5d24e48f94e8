import { describe, expect, test } from "vitest";
import { isContextualUserFragment, renderFragment } from "../../../shared/context/index.ts";
import type { EnvironmentConfig, JsonObject } from "../../../shared/protocol/index.ts";
import { applyMergePatch, mergePatchFrom, WorldState } from "../../../shared/world-state/index.ts";
import {
  type EnvironmentsSectionInput,
  environmentsSection,
  fileUri,
} from "../../../shared/world-state/sections/environments.ts";
import { roundTrip, workspaceWrite } from "./builders.ts";

// Subagent lists are not part of Spindle's hosted environment context. The catalog cases are
// reproduced without a `<filesystem>` line (no permissions given); the filesystem cases below
// give permissions.

function env(id: string, cwd: string, shell?: string, status?: "starting"): EnvironmentConfig {
  return { id, cwd, ...(shell ? { shell } : {}), ...(status ? { status } : {}) };
}

function state(overrides: Partial<EnvironmentsSectionInput> = {}): WorldState {
  return new WorldState().addSection(
    environmentsSection({
      environments: [env("local", "/repo", "bash")],
      currentDate: "2026-06-20",
      timezone: "America/Los_Angeles",
      ...overrides,
    }),
  );
}

function rendered(world: WorldState, previous?: WorldState): string[] {
  const fragments =
    previous === undefined ? world.renderFull() : world.renderDiff(roundTrip(previous.snapshot()));
  for (const f of fragments) expect(f.role).toBe("user");
  return fragments.map(renderFragment);
}

describe("environments section: full render", () => {
  test("renders_full_environment_state (catalog 10)", () => {
    const world = state({
      environments: [env("laptop", "/repo", "zsh"), env("devbox", "/workspace", "bash")],
      network: { allowed_domains: ["api.example.com"], denied_domains: ["blocked.example.com"] },
    });
    expect(rendered(world)).toEqual([
      `<environment_context>
  <environments>
    <environment id="devbox">
      <cwd>/workspace</cwd>
      <shell>bash</shell>
    </environment>
    <environment id="laptop" primary="true">
      <cwd>/repo</cwd>
      <shell>zsh</shell>
    </environment>
  </environments>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
  <network enabled="true"><allowed>api.example.com</allowed><denied>blocked.example.com</denied></network>
</environment_context>`,
    ]);
  });

  test("a single available environment renders flat cwd and shell lines", () => {
    expect(rendered(state())).toEqual([
      `<environment_context>
  <cwd>/repo</cwd>
  <shell>bash</shell>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
  });

  test("a single starting environment is listed in the block with its status", () => {
    expect(rendered(state({ environments: [env("box", "/box", undefined, "starting")] }))).toEqual([
      `<environment_context>
  <environments>
    <environment id="box" status="starting">
      <cwd>/box</cwd>
    </environment>
  </environments>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
  });

  test("no environments renders only the date and timezone", () => {
    expect(rendered(state({ environments: [] }))).toEqual([
      `<environment_context>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
  });

  test("text and attribute values are XML-escaped", () => {
    const world = state({
      environments: [env(`a"b`, "/x&y", "<sh>"), env("c", "/it's")],
      timezone: "A<B",
    });
    expect(rendered(world)).toEqual([
      `<environment_context>
  <environments>
    <environment id="a&quot;b" primary="true">
      <cwd>/x&amp;y</cwd>
      <shell>&lt;sh&gt;</shell>
    </environment>
    <environment id="c">
      <cwd>/it&apos;s</cwd>
    </environment>
  </environments>
  <current_date>2026-06-20</current_date>
  <timezone>A&lt;B</timezone>
</environment_context>`,
    ]);
  });

  test("a repeated id keeps its first configuration", () => {
    const world = state({
      environments: [env("local", "/first", "bash"), env("local", "/second")],
    });
    expect(rendered(world)[0]).toContain("<cwd>/first</cwd>");
    expect(world.snapshot()).toEqual({
      environments: {
        environments: { local: { cwd: "/first", status: "available", shell: "bash" } },
        current_date: "2026-06-20",
        timezone: "America/Los_Angeles",
      },
    });
  });

  test("an unreadable stored snapshot (Unknown) renders everything", () => {
    const world = state();
    expect(
      world.renderDiff({ environments: { environments: "nope" } }).map(renderFragment),
    ).toEqual(rendered(world));
  });

  test("every render is a contextual user fragment", () => {
    const world = state({ environments: [env("a", "/a"), env("b", "/b")] });
    const previous = state({ environments: [env("a", "/old"), env("c", "/c")] });
    for (const text of [...rendered(world), ...rendered(world, previous)]) {
      expect(isContextualUserFragment({ type: "input_text", text })).toBe(true);
    }
  });
});

describe("environments section: diffs", () => {
  test("renders_only_changed_environments (catalog 11)", () => {
    const previous = state({
      environments: [
        env("laptop", "/repo", "bash"),
        env("devbox", "/workspace", undefined, "starting"),
        env("old", "/old", "sh"),
      ],
    });
    const current = state({
      environments: [
        env("laptop", "/new-repo", "zsh"),
        env("devbox", "/workspace", "powershell"),
        env("remote", "/remote", undefined, "starting"),
      ],
    });
    expect(rendered(current, previous)).toEqual([
      `<environment_context>
  <environments>
    <environment id="laptop" primary="true">
      <cwd>/new-repo</cwd>
      <shell>zsh</shell>
    </environment>
    <environment id="old" status="unavailable" />
    <environment id="remote" status="starting">
      <cwd>/remote</cwd>
    </environment>
  </environments>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
  });

  test("persisted_turn_context_values_render_a_diff (catalog 12)", () => {
    const previous = state({
      currentDate: "2026-06-19",
      timezone: "UTC",
      network: { allowed_domains: ["old.example.com"], denied_domains: [] },
    });
    const current = state({
      currentDate: "2026-06-20",
      timezone: "America/Los_Angeles",
      network: { allowed_domains: ["new.example.com"], denied_domains: ["blocked.example.com"] },
    });
    expect(rendered(current, previous)).toEqual([
      `<environment_context>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
  <network enabled="true"><allowed>new.example.com</allowed><denied>blocked.example.com</denied></network>
</environment_context>`,
    ]);
  });

  test("a changed date alone restates the timezone too, as Codex's diff does", () => {
    expect(rendered(state({ currentDate: "2026-06-21" }), state())).toEqual([
      `<environment_context>
  <current_date>2026-06-21</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
  });

  test("single_environment_diff_ignores_shell (catalog 13)", () => {
    const previous = state({ environments: [env("local", "/repo", "bash")] });
    const current = state({ environments: [env("local", "/repo", "zsh")] });
    expect(rendered(current, previous)).toEqual([]);
  });

  test("a changed cwd of the single environment renders flat lines, then the date and timezone as they are", () => {
    const current = state({ environments: [env("local", "/other", "zsh")] });
    expect(rendered(current, state())).toEqual([
      `<environment_context>
  <cwd>/other</cwd>
  <shell>zsh</shell>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
  });

  test("removed_legacy_environment_renders_unavailable (catalog 14)", () => {
    expect(rendered(state({ environments: [] }), state())).toEqual([
      `<environment_context>
  <environments>
    <environment id="local" status="unavailable" />
  </environments>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
  });

  test("loaded_environment_state_produces_no_diff_with_live_state (catalog 15)", () => {
    const live = state({
      environments: [
        env("laptop", "/repo", "zsh"),
        env("devbox", "/workspace", undefined, "starting"),
      ],
      network: { allowed_domains: ["api.example.com"], denied_domains: ["blocked.example.com"] },
    });
    const stored = roundTrip(live.snapshot());
    expect(stored).toEqual({
      environments: {
        environments: {
          devbox: { cwd: "/workspace", status: "starting" },
          laptop: { cwd: "/repo", status: "available", shell: "zsh", is_primary: true },
        },
        current_date: "2026-06-20",
        timezone: "America/Los_Angeles",
        network: { domains: { "api.example.com": "allow", "blocked.example.com": "deny" } },
      },
    });
    expect(live.renderDiff(stored)).toEqual([]);
  });

  test("moving the primary renders both environments with their new flags and patches is_primary (catalog 16)", () => {
    const previous = state({
      environments: [env("local", "/repo", "bash"), env("remote", "/srv")],
    });
    const current = state({ environments: [env("remote", "/srv"), env("local", "/repo", "bash")] });
    expect(rendered(current, previous)).toEqual([
      `<environment_context>
  <environments>
    <environment id="local" primary="false">
      <cwd>/repo</cwd>
      <shell>bash</shell>
    </environment>
    <environment id="remote" primary="true">
      <cwd>/srv</cwd>
    </environment>
  </environments>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
    expect(JSON.stringify(mergePatchFrom(previous.snapshot(), current.snapshot()))).toBe(
      '{"environments":{"environments":{"local":{"is_primary":null},"remote":{"is_primary":true}}}}',
    );
  });

  test("legacy_single_environment_snapshot_does_not_change (catalog 16)", () => {
    const legacy: JsonObject = {
      environments: {
        environments: { local: { cwd: "file:///repo", status: "available", shell: "zsh" } },
        current_date: "2026-06-20",
        timezone: "America/Los_Angeles",
        filesystem: { workspace_roots: {}, permission_profile: "disabled" },
      },
    };
    expect(state().renderDiff(legacy)).toEqual([]);
  });

  test("a stored cwd compares by its path: Codex 0.169's plain path and the earlier file:// URI are the same cwd", () => {
    const stored = (cwd: string): JsonObject => ({
      environments: {
        environments: { local: { cwd } },
        current_date: "2026-06-20",
        timezone: "America/Los_Angeles",
      },
    });
    const spaced = state({ environments: [env("local", "/a b/ü", "bash")] });
    expect({
      path: spaced.renderDiff(stored("/a b/ü")),
      uri: spaced.renderDiff(stored("file:///a%20b/%C3%BC")),
      other: spaced.renderDiff(stored("/a b")).length,
    }).toEqual({ path: [], uri: [], other: 1 });
  });

  test("adding a second environment lists only the new one", () => {
    const current = state({ environments: [env("local", "/repo", "bash"), env("remote", "/srv")] });
    expect(rendered(current, state())).toEqual([
      `<environment_context>
  <environments>
    <environment id="remote">
      <cwd>/srv</cwd>
    </environment>
  </environments>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
  });

  test("going back to one environment lists only the removed one", () => {
    const previous = state({
      environments: [env("local", "/repo", "bash"), env("remote", "/srv")],
    });
    expect(rendered(state(), previous)).toEqual([
      `<environment_context>
  <environments>
    <environment id="remote" status="unavailable" />
  </environments>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
  });

  test("removing the primary marks the remaining environment primary", () => {
    const previous = state({ environments: [env("local", "/repo"), env("remote", "/srv")] });
    const current = state({ environments: [env("remote", "/srv"), env("extra", "/x")] });
    expect(rendered(current, previous)).toEqual([
      `<environment_context>
  <environments>
    <environment id="extra">
      <cwd>/x</cwd>
    </environment>
    <environment id="local" status="unavailable" />
    <environment id="remote" primary="true">
      <cwd>/srv</cwd>
    </environment>
  </environments>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
  });

  test("a starting environment that becomes available with the same cwd renders nothing", () => {
    const previous = state({
      environments: [env("a", "/a"), env("b", "/b", undefined, "starting")],
    });
    const current = state({ environments: [env("a", "/a"), env("b", "/b", "bash")] });
    expect(rendered(current, previous)).toEqual([]);
  });

  test("a single environment renamed to another id with the same cwd renders nothing", () => {
    expect(rendered(state({ environments: [env("other", "/repo")] }), state())).toEqual([]);
  });

  test("removing the network configuration says so in one line, after the date and timezone", () => {
    const previous = state({ network: { allowed_domains: ["a.example"], denied_domains: [] } });
    expect(rendered(state(), previous)).toEqual([
      `<environment_context>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
  <network enabled="false" />
</environment_context>`,
    ]);
  });

  test("reordering network domains without changing any rule renders nothing", () => {
    const previous = state({ network: { allowed_domains: ["a", "b"], denied_domains: ["c"] } });
    const current = state({ network: { allowed_domains: ["b", "a"], denied_domains: ["c"] } });
    expect(rendered(current, previous)).toEqual([]);
  });

  test("a stored snapshot without date or timezone renders both current values", () => {
    const stored: JsonObject = {
      environments: { environments: { local: { cwd: "file:///repo" } } },
    };
    expect(state().renderDiff(stored).map(renderFragment)).toEqual([
      `<environment_context>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
</environment_context>`,
    ]);
  });
});

describe("environments section: the <filesystem> line", () => {
  const READ_ROOT = '<entry access="read"><special>:root</special></entry>';
  const write = (path: string) => `<entry access="write"><path>${path}</path></entry>`;
  const managed = (entries: string) =>
    `<permission_profile type="managed"><file_system type="restricted">${entries}</file_system></permission_profile>`;
  const ROOTS = "<workspace_roots><root>/repo</root></workspace_roots>";
  const DATE_TZ = `  <current_date>2026-06-20</current_date>\n  <timezone>America/Los_Angeles</timezone>\n`;
  const withPermissions = (permissions = workspaceWrite, overrides = {}) =>
    state({ permissions, ...overrides });

  test("closes the full render: workspace root and the permission profile of each sandbox", () => {
    const line = (w: WorldState) => rendered(w)[0]?.split("\n").at(-2);
    expect({
      workspace: line(withPermissions({ ...workspaceWrite, writable_roots: ["/data", "/repo"] })),
      readOnly: line(withPermissions({ ...workspaceWrite, sandbox: "read-only" })),
      full: line(withPermissions({ ...workspaceWrite, sandbox: "danger-full-access" })),
      noEnvironment: line(withPermissions(workspaceWrite, { environments: [] })),
      escaped: line(withPermissions({ ...workspaceWrite, writable_roots: ["/a&b<c>"] })),
    }).toEqual({
      workspace: `  <filesystem>${ROOTS}${managed(READ_ROOT + write("/repo") + write("/data"))}</filesystem>`,
      readOnly: `  <filesystem>${ROOTS}${managed(READ_ROOT)}</filesystem>`,
      full: `  <filesystem>${ROOTS}<permission_profile type="disabled"><file_system type="unrestricted" /></permission_profile></filesystem>`,
      noEnvironment: `  <filesystem>${managed(READ_ROOT)}</filesystem>`,
      escaped: `  <filesystem>${ROOTS}${managed(READ_ROOT + write("/repo") + write("/a&amp;b&lt;c&gt;"))}</filesystem>`,
    });
    expect(rendered(withPermissions())).toEqual([
      `<environment_context>
  <cwd>/repo</cwd>
  <shell>bash</shell>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
  <filesystem>${ROOTS}${managed(READ_ROOT + write("/repo"))}</filesystem>
</environment_context>`,
    ]);
  });

  test("the snapshot stores the rendered line; a changed writable root or sandbox renders that line (after the date and timezone) and patches exactly that member", () => {
    const before = withPermissions();
    expect(before.snapshot()).toEqual({
      environments: {
        environments: { local: { cwd: "/repo", status: "available", shell: "bash" } },
        current_date: "2026-06-20",
        timezone: "America/Los_Angeles",
        filesystem: `<filesystem>${ROOTS}${managed(READ_ROOT + write("/repo"))}</filesystem>`,
      },
    });
    const root = withPermissions({ ...workspaceWrite, writable_roots: ["/data"] });
    const line = `<filesystem>${ROOTS}${managed(READ_ROOT + write("/repo") + write("/data"))}</filesystem>`;
    expect(rendered(root, before)).toEqual([
      `<environment_context>\n${DATE_TZ}  ${line}\n</environment_context>`,
    ]);
    expect(mergePatchFrom(before.snapshot(), root.snapshot())).toEqual({
      environments: { filesystem: line },
    });
    const readOnly = withPermissions({ ...workspaceWrite, sandbox: "read-only" });
    expect(mergePatchFrom(before.snapshot(), readOnly.snapshot())).toEqual({
      environments: { filesystem: `<filesystem>${ROOTS}${managed(READ_ROOT)}</filesystem>` },
    });
    expect(rendered(withPermissions(), before)).toEqual([]);
  });

  test("a moved cwd restates the network line as it is, with the other turn values", () => {
    const network = { allowed_domains: ["api.example.com"], denied_domains: [] };
    const before = withPermissions(workspaceWrite, { network });
    const moved = withPermissions(workspaceWrite, {
      network,
      environments: [env("local", "/next", "bash")],
    });
    const lines = rendered(moved, before)[0]
      ?.split("\n")
      .map((l) => l.trim().split(">")[0]);
    expect(lines).toEqual([
      "<environment_context",
      "<cwd",
      "<shell",
      "<current_date",
      "<timezone",
      '<network enabled="true"',
      "<filesystem",
      "</environment_context",
    ]);
  });

  test("a moved cwd renders the cwd, the date and timezone, and the filesystem line, whose workspace root moved with it", () => {
    const moved = withPermissions(workspaceWrite, {
      environments: [env("local", "/next", "bash")],
    });
    expect(rendered(moved, withPermissions())).toEqual([
      `<environment_context>
  <cwd>/next</cwd>
  <shell>bash</shell>
  <current_date>2026-06-20</current_date>
  <timezone>America/Los_Angeles</timezone>
  <filesystem><workspace_roots><root>/next</root></workspace_roots>${managed(READ_ROOT + write("/next"))}</filesystem>
</environment_context>`,
    ]);
  });

  test("a baseline from before the line gets it once: the patch adds it, and the next diff is empty", () => {
    const old = state().snapshot();
    const current = withPermissions();
    const diff = current.renderDiff(roundTrip(old)).map(renderFragment);
    expect(diff).toEqual([
      `<environment_context>\n${DATE_TZ}  <filesystem>${ROOTS}${managed(READ_ROOT + write("/repo"))}</filesystem>\n</environment_context>`,
    ]);
    const patch = mergePatchFrom(old, current.snapshot());
    if (patch === undefined) throw new Error("expected a patch");
    const next = applyMergePatch(old, patch);
    expect(next).toEqual(current.snapshot());
    expect(current.renderDiff(roundTrip(next))).toEqual([]);
  });
});

describe("fileUri", () => {
  test("encodes POSIX and Windows paths as file URIs", () => {
    expect(fileUri("/repo")).toBe("file:///repo");
    expect(fileUri("/a b/ü%")).toBe("file:///a%20b/%C3%BC%25");
    expect(fileUri("C:\\work\\x")).toBe("file:///C:/work/x");
    expect(fileUri("relative/dir")).toBe("file:relative/dir");
  });

  test("keeps distinct paths distinct, even with lone surrogates", () => {
    expect(fileUri("/\uD800")).not.toBe(fileUri("/\uD801"));
    expect(fileUri("/%u00d8")).not.toBe(fileUri("/\u00d8"));
  });
});
