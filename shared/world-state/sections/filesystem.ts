import type { PermissionsConfig } from "../../protocol/index.ts";
import { escapeXml } from "../internal/text.ts";

/**
 * The `<filesystem>` line of `<environment_context>` (Codex's workspace roots and permission
 * profile), in Codex's grammar, from what Spindle knows: the sandbox mode, the writable roots and
 * the working directory (the primary environment's cwd, the one workspace root).
 *
 * - `danger-full-access`: the profile is `disabled`, the file system `unrestricted`.
 * - `read-only`: a `managed` profile whose `restricted` file system reads everything (`:root`).
 * - `workspace-write`: the same, plus a write entry for the working directory and one for each
 *   writable root (as the permissions text says: writes go nowhere else, no temporary
 *   directories).
 *
 * One line, no whitespace; paths are XML-escaped and listed once.
 */
export function renderFilesystem(
  permissions: PermissionsConfig,
  workspaceRoot: string | undefined,
): string {
  const roots =
    workspaceRoot === undefined
      ? ""
      : `<workspace_roots><root>${escapeXml(workspaceRoot)}</root></workspace_roots>`;
  return `<filesystem>${roots}${permissionProfile(permissions, workspaceRoot)}</filesystem>`;
}

function permissionProfile(permissions: PermissionsConfig, workspaceRoot: string | undefined) {
  if (permissions.sandbox === "danger-full-access") {
    return '<permission_profile type="disabled"><file_system type="unrestricted" /></permission_profile>';
  }
  const entries = ['<entry access="read"><special>:root</special></entry>'];
  if (permissions.sandbox === "workspace-write") {
    const writable = new Set<string>();
    if (workspaceRoot !== undefined) writable.add(workspaceRoot);
    for (const root of permissions.writable_roots) writable.add(root);
    for (const path of writable) {
      entries.push(`<entry access="write"><path>${escapeXml(path)}</path></entry>`);
    }
  }
  return `<permission_profile type="managed"><file_system type="restricted">${entries.join("")}</file_system></permission_profile>`;
}
