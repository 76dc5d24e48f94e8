import type { FragmentRole } from "../../context/index.ts";
import { type Fragment, fragment, MARKERS, matchesMarkers } from "../../context/index.ts";
import type { JsonValue, PermissionsConfig } from "../../protocol/index.ts";
import { isJsonObject } from "../internal/json.ts";
import { fingerprint } from "../internal/text.ts";
import { SECTION_IDS } from "../section-ids.ts";
import type { PreviousSectionState, WorldStateSection } from "../world-state.ts";

export type PermissionsSnapshot = {
  enabled: true;
  /** `sha1:` of the rendered body, so any wording change re-renders. */
  instructions_fingerprint: string;
};

/**
 * `<permissions instructions>` (developer, reference §3.6): rendered unless the previous state is
 * Known and equal to the current snapshot. Unlike Codex, whose permission text comes from the
 * model's catalog (so its snapshot carries the model slug), Spindle's text does not depend on the
 * model: a model switch does not re-send it. Its fragment in history counts both as a legacy fragment (no snapshot:
 * Unknown, re-injected) and as the retained fragment (dropped from history: injected again).
 */
export function permissionsSection(
  permissions: PermissionsConfig,
): WorldStateSection<PermissionsSnapshot> {
  const body = renderPermissionsBody(permissions);
  const current: PermissionsSnapshot = {
    enabled: true,
    instructions_fingerprint: fingerprint(body),
  };
  return {
    id: SECTION_IDS.permissions,
    snapshot: () => ({ ...current }),
    readSnapshot: readPermissionsSnapshot,
    render(previous: PreviousSectionState<PermissionsSnapshot>): Fragment[] {
      if (previous.kind === "known" && sameSnapshot(previous.snapshot, current)) return [];
      return [fragment("developer", MARKERS.permissions.start, MARKERS.permissions.end, body)];
    },
    matchesLegacyFragment: isPermissionsFragment,
    matchesRetainedFragment: isPermissionsFragment,
  };
}

function isPermissionsFragment(role: FragmentRole, text: string): boolean {
  return (
    role === "developer" && matchesMarkers(MARKERS.permissions.start, MARKERS.permissions.end, text)
  );
}

function sameSnapshot(a: PermissionsSnapshot, b: PermissionsSnapshot): boolean {
  return a.instructions_fingerprint === b.instructions_fingerprint;
}

function readPermissionsSnapshot(stored: JsonValue): PermissionsSnapshot | undefined {
  if (!isJsonObject(stored) || stored.enabled !== true) return undefined;
  const { instructions_fingerprint } = stored;
  if (typeof instructions_fingerprint !== "string") return undefined;
  return { enabled: true, instructions_fingerprint };
}

const SANDBOX_TEXT: Record<PermissionsConfig["sandbox"], string> = {
  "read-only": "Commands can read files but cannot create, change or delete any.",
  "workspace-write":
    "Commands can read any file, and can write only inside the working directory and the writable roots listed below.",
  "danger-full-access":
    "There is no filesystem sandbox: commands can read and write anywhere the user can.",
};

const APPROVAL_TEXT: Record<PermissionsConfig["approval_policy"], string> = {
  never:
    "You can never ask the user to approve anything. When the sandbox blocks a command, find another way, or tell the user what they would need to run themselves.",
  "on-request":
    "Commands run inside the sandbox. When one truly needs to run outside it, you may ask the user to approve that specific command.",
  "on-failure":
    "Commands run inside the sandbox first. If one fails because of the sandbox, the user is asked whether to retry it without the sandbox.",
  untrusted:
    "Only commands known to be safe and read-only run without asking. Every other command waits for the user's approval.",
};

/** Our wording; model-visible. Writable roots only mean something under `workspace-write`. */
function renderPermissionsBody(permissions: PermissionsConfig): string {
  const lines = [
    `Sandbox mode: \`${permissions.sandbox}\`. ${SANDBOX_TEXT[permissions.sandbox]}`,
    `Approval policy: \`${permissions.approval_policy}\`. ${APPROVAL_TEXT[permissions.approval_policy]}`,
  ];
  if (permissions.sandbox === "workspace-write") {
    if (permissions.writable_roots.length === 0) {
      lines.push("Writable roots: none besides the working directory.");
    } else {
      lines.push("Writable roots:", ...permissions.writable_roots.map((root) => `- ${root}`));
    }
  }
  lines.push(NETWORK_TEXT[networkText(permissions)]);
  return `\n${lines.join("\n")}\n`;
}

const NETWORK_TEXT = {
  unsandboxed: "Network access: enabled. Commands may use the network.",
  enabled: "Network access: enabled. Sandboxed commands may use the network.",
  disabled: "Network access: disabled. Sandboxed commands cannot reach the network.",
} as const;

function networkText(permissions: PermissionsConfig): keyof typeof NETWORK_TEXT {
  if (permissions.sandbox === "danger-full-access") return "unsandboxed";
  return hasNetworkAccess(permissions) ? "enabled" : "disabled";
}

/**
 * Whether commands may use the network. Without a filesystem sandbox there is no network
 * sandbox either, as in Codex: `danger-full-access` has network access whatever `network_access`
 * says.
 */
export function hasNetworkAccess(permissions: PermissionsConfig): boolean {
  return permissions.sandbox === "danger-full-access" || permissions.network_access;
}
