import type { RequireApproval } from "../protocol/index.ts";

/**
 * Which calls of a server pause for approval (design §16, Responses' `require_approval`). How a
 * thread's reference narrows a registration's policy is `stricterApproval` (`shared/api/`).
 */

/** Whether a call of `tool` waits for an `mcp_approval_response`. */
export function needsApproval(policy: RequireApproval, tool: string): boolean {
  if (policy === "always") return true;
  if (policy === "never") return false;
  return !policy.never.tool_names.includes(tool);
}
