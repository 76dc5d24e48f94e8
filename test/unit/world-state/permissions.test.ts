import { createHash } from "node:crypto";
import { describe, expect, test } from "vitest";
import { renderFragment } from "../../../shared/context/index.ts";
import type { PermissionsConfig } from "../../../shared/protocol/index.ts";
import { hasNetworkAccess, WorldState } from "../../../shared/world-state/index.ts";
import { permissionsSection } from "../../../shared/world-state/sections/permissions.ts";
import { developer, roundTrip, user, workspaceWrite } from "./builders.ts";

// Spindle's permissions have no reviewer, exec-policy prefixes or "disabled" state; catalog
// 26-30 are reproduced with the settings Spindle does have (approval policy, sandbox, writable
// roots, network access, model).

function world(permissions: PermissionsConfig = workspaceWrite): WorldState {
  return new WorldState().addSection(permissionsSection(permissions));
}

function texts(fragments: ReturnType<WorldState["renderFull"]>): string[] {
  for (const f of fragments) expect(f.role).toBe("developer");
  return fragments.map(renderFragment);
}

const WORKSPACE_WRITE_TEXT = `<permissions instructions>
Sandbox mode: \`workspace-write\`. Commands can read any file, and can write only inside the working directory and the writable roots listed below.
Approval policy: \`on-request\`. Commands run inside the sandbox. When one truly needs to run outside it, you may ask the user to approve that specific command.
Writable roots: none besides the working directory.
Network access: disabled. Sandboxed commands cannot reach the network.
</permissions instructions>`;

describe("permissions section", () => {
  test("renders sandbox mode, approval policy, writable roots and network access", () => {
    expect(texts(world().renderFull())).toEqual([WORKSPACE_WRITE_TEXT]);
  });

  test("the snapshot carries the sha1 of the rendered body", () => {
    const body = WORKSPACE_WRITE_TEXT.slice(
      "<permissions instructions>".length,
      -"</permissions instructions>".length,
    );
    const sha1 = createHash("sha1").update(body, "utf8").digest("hex");
    expect(world().snapshot()).toEqual({
      permissions: {
        enabled: true,
        instructions_fingerprint: `sha1:${sha1}`,
      },
    });
  });

  test("renders_when_approval_or_roots_change (catalog 26 analogue)", () => {
    expect(world().renderFull()).toHaveLength(1);
    expect(world().renderDiff(roundTrip(world().snapshot()))).toEqual([]);

    const never = world({ ...workspaceWrite, approval_policy: "never" });
    const neverText = texts(never.renderDiff(world().snapshot()));
    expect(neverText).toHaveLength(1);
    expect(neverText[0]).toContain(
      "Approval policy: `never`. You can never ask the user to approve anything.",
    );

    const untrusted = world({ ...workspaceWrite, approval_policy: "untrusted" });
    expect(texts(untrusted.renderDiff(never.snapshot()))[0]).toContain(
      "Approval policy: `untrusted`. Only commands known to be safe and read-only run without asking.",
    );
  });

  test("every distinct setting gives a distinct snapshot (catalog 27 analogue)", () => {
    const configs: PermissionsConfig[] = [];
    for (const sandbox of ["read-only", "workspace-write", "danger-full-access"] as const) {
      for (const approval_policy of ["never", "on-request", "on-failure", "untrusted"] as const) {
        // Under danger-full-access the network flag changes nothing (see below).
        for (const network_access of sandbox === "danger-full-access" ? [true] : [false, true]) {
          configs.push({ sandbox, approval_policy, writable_roots: [], network_access });
        }
      }
    }
    configs.push({ ...workspaceWrite, writable_roots: ["/data"] });
    const fingerprints = configs.map((c) => JSON.stringify(world(c).snapshot()));
    expect(new Set(fingerprints).size).toBe(configs.length);
  });

  test("each sandbox and network combination renders its own text; no filesystem sandbox always means network access", () => {
    const rendered = (sandbox: PermissionsConfig["sandbox"], network_access: boolean) =>
      texts(world({ ...workspaceWrite, sandbox, network_access }).renderFull())[0];
    const approval =
      "Approval policy: `on-request`. Commands run inside the sandbox. When one truly needs to run outside it, you may ask the user to approve that specific command.";
    const readOnly =
      "Sandbox mode: `read-only`. Commands can read files but cannot create, change or delete any.";
    const workspace =
      "Sandbox mode: `workspace-write`. Commands can read any file, and can write only inside the working directory and the writable roots listed below.";
    const unsandboxed = `<permissions instructions>
Sandbox mode: \`danger-full-access\`. There is no filesystem sandbox: commands can read and write anywhere the user can.
${approval}
Network access: enabled. Commands may use the network.
</permissions instructions>`;
    const disabled = "Network access: disabled. Sandboxed commands cannot reach the network.";
    const enabled = "Network access: enabled. Sandboxed commands may use the network.";
    const roots = "Writable roots: none besides the working directory.";
    expect({
      readOnlyOff: rendered("read-only", false),
      readOnlyOn: rendered("read-only", true),
      workspaceOff: rendered("workspace-write", false),
      workspaceOn: rendered("workspace-write", true),
      fullOff: rendered("danger-full-access", false),
      fullOn: rendered("danger-full-access", true),
    }).toEqual({
      readOnlyOff: `<permissions instructions>\n${readOnly}\n${approval}\n${disabled}\n</permissions instructions>`,
      readOnlyOn: `<permissions instructions>\n${readOnly}\n${approval}\n${enabled}\n</permissions instructions>`,
      workspaceOff: `<permissions instructions>\n${workspace}\n${approval}\n${roots}\n${disabled}\n</permissions instructions>`,
      workspaceOn: `<permissions instructions>\n${workspace}\n${approval}\n${roots}\n${enabled}\n</permissions instructions>`,
      fullOff: unsandboxed,
      fullOn: unsandboxed,
    });
    expect(hasNetworkAccess({ ...workspaceWrite, sandbox: "danger-full-access" })).toBe(true);
    expect(hasNetworkAccess(workspaceWrite)).toBe(false);
    expect(hasNetworkAccess({ ...workspaceWrite, network_access: true })).toBe(true);
  });

  test("a model switch does not re-send permissions whose text is model-independent (catalog 28, deliberate deviation)", () => {
    const legacy = {
      permissions: { ...(world().snapshot().permissions as object), model_slug: "model-a" },
    };
    // A snapshot from before this rule (with a model slug) still reads as Known and equal.
    expect(world().renderDiff(roundTrip(legacy))).toEqual([]);
    expect(world().renderFull()).toHaveLength(1);
  });

  test("writable_root_changes_are_ignored_when_the_sandbox_is_read_only (catalog 29 analogue)", () => {
    const readOnly: PermissionsConfig = { ...workspaceWrite, sandbox: "read-only" };
    const withRoot = world({ ...readOnly, writable_roots: ["/data"] });
    expect(withRoot.snapshot()).toEqual(world(readOnly).snapshot());
    expect(withRoot.renderDiff(world(readOnly).snapshot())).toEqual([]);
  });

  test("an added writable root changes the snapshot and is listed (catalog 30 analogue)", () => {
    const withRoot = world({ ...workspaceWrite, writable_roots: ["/data", "/cache"] });
    expect(withRoot.snapshot()).not.toEqual(world().snapshot());
    expect(texts(withRoot.renderDiff(world().snapshot()))[0]).toContain(
      "Writable roots:\n- /data\n- /cache\nNetwork access",
    );
  });

  test("legacy_permissions_are_reinjected_to_establish_a_snapshot (catalog 31)", () => {
    const history = [
      developer("<permissions instructions>\nold text\n</permissions instructions>"),
    ];
    expect(texts(world().renderHistoryDiff(undefined, history))).toEqual([WORKSPACE_WRITE_TEXT]);
  });

  test("persisted_permissions_are_restored_only_when_missing_from_history (catalog 32)", () => {
    const previous = roundTrip(world().snapshot());
    expect(texts(world().renderHistoryDiff(previous, []))).toEqual([WORKSPACE_WRITE_TEXT]);
    expect(world().renderHistoryDiff(previous, [developer(WORKSPACE_WRITE_TEXT)])).toEqual([]);
    // The same text in a user message is not the developer fragment.
    expect(world().renderHistoryDiff(previous, [user(WORKSPACE_WRITE_TEXT)])).toHaveLength(1);
  });
});
