import type { Env } from "../../../env.ts";
import { McpToolRouter, type ServerTools } from "../../../shared/mcp/index.ts";
import { outboundPolicyOf, outboundUrlRefusal } from "../../../shared/outbound/index.ts";
import { systemClock } from "../../common/clock.ts";
import type { TenantSync } from "../tenancy/tenant-sync.ts";

/**
 * The thread instance's MCP servers (design §16): the tenant's registry asked through the sync
 * (the caller is this thread's incarnation, so another tenant's servers never resolve), URLs
 * held to the same outbound policy as webhook endpoints at every connection, and the isolate's
 * `fetch` (read when a request is made, so a test can stand in for the network).
 */
export function threadServerTools(env: Pick<Env, "SPINDLE_ENV">, sync: TenantSync): ServerTools {
  const policy = outboundPolicyOf(env.SPINDLE_ENV);
  return new McpToolRouter({
    clock: systemClock,
    resolve: (refs) => sync.resolveMcpServers(refs),
    fetch: (input, init) => fetch(input, init),
    refusal: (url) => outboundUrlRefusal(url, policy)?.detail,
  });
}
