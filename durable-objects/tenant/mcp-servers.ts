import {
  type CreateMcpServerBody,
  type ListQuery,
  type ListResource,
  type McpServerRecord,
  type McpServerResource,
  mcpHeadersProblem,
  type PatchMcpServerBody,
  type RpcResult,
} from "../../shared/api/index.ts";
import type { Clock } from "../../shared/ports/index.ts";
import { tablePage } from "../common/cursor.ts";
import { fail, ok } from "../common/results.ts";
import type { Sql } from "../common/sql.ts";
import { refusedByLimit } from "./limits.ts";

interface McpServerRow extends Record<string, SqlStorageValue> {
  /** The label. */
  id: string;
  created_at: string;
  body: string;
  headers: string;
}

const NO_SERVER = (label: string) => fail("not_found", `No MCP server "${label}".`);

/**
 * A tenant's registered MCP servers (design §16), in the tenant's object. The headers (the
 * server's credentials) are kept in their own column: every answer is made from the resource
 * alone, and only `records`, which the tenant's threads resolve their references with, reads
 * them (design §18 invariant 16).
 */
export class McpServerStore {
  readonly #sql: Sql;
  readonly #clock: Clock;

  constructor(sql: Sql, clock: Clock) {
    this.#sql = sql;
    this.#clock = clock;
  }

  /**
   * The new server (its URL already checked); `mcp_server_exists` when the label is taken,
   * `limit_exceeded` past `mcp_servers_per_tenant`.
   */
  create(body: CreateMcpServerBody): RpcResult<McpServerResource> {
    if (this.#row(body.label)) {
      return fail("mcp_server_exists", `An MCP server "${body.label}" already exists.`);
    }
    const refused = refusedByLimit(this.#sql, "mcp_servers_per_tenant");
    if (refused) return refused;
    const now = new Date(this.#clock.nowMs()).toISOString();
    const server: McpServerResource = {
      object: "mcp_server",
      label: body.label,
      url: body.url,
      header_names: Object.keys(body.headers).sort(),
      allowed_tools: body.allowed_tools,
      require_approval: body.require_approval,
      timeout_ms: body.timeout_ms,
      created_at: now,
      updated_at: now,
    };
    this.#sql`INSERT INTO tenant_mcp_servers (id, created_at, body, headers)
      VALUES (${server.label}, ${now}, ${JSON.stringify(server)}, ${JSON.stringify(body.headers)})`;
    return ok(server);
  }

  #row(label: string): McpServerRow | undefined {
    return this
      .#sql<McpServerRow>`SELECT * FROM tenant_mcp_servers WHERE id = ${label}`.toArray()[0];
  }

  get(label: string): RpcResult<McpServerResource> {
    const row = this.#row(label);
    return row ? ok(JSON.parse(row.body) as McpServerResource) : NO_SERVER(label);
  }

  /** Servers oldest first; undefined for a cursor this store did not make. */
  list(query: ListQuery): ListResource<McpServerResource> | undefined {
    return tablePage<McpServerRow, McpServerResource>(
      this.#sql,
      { table: "tenant_mcp_servers", time: "created_at" },
      query,
      (row) => JSON.parse(row.body) as McpServerResource,
    );
  }

  /**
   * The server after the patch (`url` already checked). `headers` is merged (null removes a
   * header); a result past the header limits is refused at `/headers` and nothing changes.
   */
  patch(label: string, patch: PatchMcpServerBody): RpcResult<McpServerResource> {
    const row = this.#row(label);
    if (!row) return NO_SERVER(label);
    let headers = JSON.parse(row.headers) as Record<string, string>;
    if (patch.headers !== undefined) {
      headers = { ...headers };
      for (const [name, value] of Object.entries(patch.headers)) {
        if (value === null) delete headers[name];
        else headers[name] = value;
      }
      const problem = mcpHeadersProblem(headers);
      if (problem) {
        return fail("invalid_request", `The headers cannot be stored: ${problem}.`, [
          { path: "/headers", message: problem },
        ]);
      }
    }
    const current = JSON.parse(row.body) as McpServerResource;
    const next: McpServerResource = {
      ...current,
      ...(patch.url === undefined ? {} : { url: patch.url }),
      header_names: Object.keys(headers).sort(),
      ...(patch.allowed_tools === undefined ? {} : { allowed_tools: patch.allowed_tools }),
      ...(patch.require_approval === undefined ? {} : { require_approval: patch.require_approval }),
      ...(patch.timeout_ms === undefined ? {} : { timeout_ms: patch.timeout_ms }),
      updated_at: new Date(this.#clock.nowMs()).toISOString(),
    };
    this.#sql`UPDATE tenant_mcp_servers SET body = ${JSON.stringify(next)},
      headers = ${JSON.stringify(headers)} WHERE id = ${label}`;
    return ok(next);
  }

  /** False when there is no such server. */
  delete(label: string): boolean {
    return this.#sql`DELETE FROM tenant_mcp_servers WHERE id = ${label}`.rowsWritten > 0;
  }

  /** The registrations of these labels, with their headers; a label not registered is absent. */
  records(labels: readonly string[]): Map<string, McpServerRecord> {
    const out = new Map<string, McpServerRecord>();
    for (const label of new Set(labels)) {
      const row = this.#row(label);
      if (!row) continue;
      out.set(label, {
        resource: JSON.parse(row.body) as McpServerResource,
        headers: JSON.parse(row.headers) as Record<string, string>,
      });
    }
    return out;
  }
}
