import { type RpcResult, type TenantLimitName, tenantLimits } from "../../shared/api/index.ts";
import { failLimit } from "../common/results.ts";
import type { Sql } from "../common/sql.ts";

/** What each per-tenant limit counts: one row of its store's table per item. */
const COUNTED: Readonly<Record<TenantLimitName, { table: string; what: string }>> = {
  api_keys_per_tenant: { table: "tenant_keys", what: "API keys" },
  hooks_per_tenant: { table: "tenant_hooks", what: "hooks" },
  webhook_endpoints_per_tenant: { table: "tenant_endpoints", what: "webhook endpoints" },
  mcp_servers_per_tenant: { table: "tenant_mcp_servers", what: "MCP servers" },
};

/**
 * `limit_exceeded` when the tenant already holds as many items as `limit` allows; undefined
 * when there is room for one more. A store calls it in the synchronous step of its insert, so
 * concurrent creates are counted one after the other and never pass the limit together.
 */
export function refusedByLimit(sql: Sql, limit: TenantLimitName): RpcResult<never> | undefined {
  const { table, what } = COUNTED[limit];
  const max = tenantLimits[limit];
  const { count } = sql.exec<{ count: number }>(`SELECT COUNT(*) AS count FROM ${table}`).one();
  if (count < max) return undefined;
  return failLimit(
    limit,
    max,
    `The tenant holds ${count} ${what}, as many as it may (${limit}: ${max}); delete one first.`,
  );
}
