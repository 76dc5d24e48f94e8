import type { RequireApproval } from "../protocol/index.ts";

/**
 * Which calls of a server pause for approval (design §16, Responses' `require_approval`), and how
 * a thread's reference narrows the registration: a reference may hide tools and ask for approval,
 * never unhide a tool or waive an approval the registration asks for.
 */

/** Whether a call of `tool` waits for an `mcp_approval_response`. */
export function needsApproval(policy: RequireApproval, tool: string): boolean {
  if (policy === "always") return true;
  if (policy === "never") return false;
  return !policy.never.tool_names.includes(tool);
}

/**
 * The policy under which a call needs approval when either policy asks for it: the tools exempt
 * from approval are those both exempt.
 */
export function stricterApproval(
  registered: RequireApproval,
  requested: RequireApproval | undefined,
): RequireApproval {
  if (requested === undefined || requested === "never") return registered;
  if (registered === "always" || requested === "always") return "always";
  if (registered === "never") return requested;
  const exempt = new Set(registered.never.tool_names);
  return { never: { tool_names: requested.never.tool_names.filter((t) => exempt.has(t)) } };
}

/** The tools a thread may use: the registration's (null: all), narrowed by the reference's. */
export function narrowedTools(
  registered: readonly string[] | null,
  requested: readonly string[] | undefined,
): readonly string[] | null {
  if (requested === undefined) return registered;
  if (registered === null) return [...requested];
  const allowed = new Set(registered);
  return requested.filter((t) => allowed.has(t));
}
