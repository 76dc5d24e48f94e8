import { DurableObject } from "cloudflare:workers";
import type { Env } from "../../env.ts";
import {
  type DirectoryRpc,
  type ListQuery,
  type ListResource,
  type RpcResult,
  type TenantResource,
  tenantRecordOf,
} from "../../shared/api/index.ts";
import * as z from "../../shared/zod/index.ts";
import { badCursor, decodeCursor, pageOf } from "../common/cursor.ts";
import { migrate } from "../common/migrations.ts";
import { fail, ok } from "../common/results.ts";
import { type Sql, sqlOf } from "../common/sql.ts";
import { DIRECTORY_MIGRATIONS } from "./schema.ts";

const DirectoryCursorSchema = z.onFirstUse(() => z.object({ i: z.string() }));

/**
 * The directory of managed tenants (design §11): one object, for the admin API alone. It makes
 * tenant ids unique across jurisdictions (a key names its tenant's jurisdiction, so the same id
 * in two would be two tenants) and lists them. No request of a tenant's key reaches it.
 */
export class TenantDirectory extends DurableObject<Env> implements DirectoryRpc {
  readonly #sql: Sql;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage.sql, DIRECTORY_MIGRATIONS);
    this.#sql = sqlOf(ctx.storage.sql);
  }

  #find(id: string): TenantResource | undefined {
    const row = this.#sql<{
      body: string;
    }>`SELECT body FROM directory_tenants WHERE id = ${id}`.toArray()[0];
    return row === undefined ? undefined : tenantRecordOf(JSON.parse(row.body) as TenantResource);
  }

  async claim(record: TenantResource): Promise<RpcResult<TenantResource>> {
    const existing = this.#find(record.id);
    if (existing) {
      const detail =
        existing.status === "deleting"
          ? `Tenant "${record.id}" is being deleted; its id is free once that is done.`
          : `Tenant "${record.id}" already exists.`;
      return fail("tenant_exists", detail);
    }
    return this.put(record);
  }

  async get(tenant: string): Promise<RpcResult<TenantResource>> {
    const record = this.#find(tenant);
    return record ? ok(record) : fail("not_found", `No tenant "${tenant}".`);
  }

  async put(record: TenantResource): Promise<RpcResult<TenantResource>> {
    this
      .#sql`INSERT INTO directory_tenants (id, body) VALUES (${record.id}, ${JSON.stringify(record)})
      ON CONFLICT (id) DO UPDATE SET body = excluded.body`;
    return ok(record);
  }

  async list(req: ListQuery): Promise<RpcResult<ListResource<TenantResource>>> {
    let after = "";
    if (req.cursor !== undefined) {
      const cursor = decodeCursor(req.cursor, DirectoryCursorSchema);
      if (cursor === undefined) return badCursor();
      after = cursor.i;
    }
    const rows = this.#sql<{ id: string; body: string }>`SELECT id, body FROM directory_tenants
      WHERE id > ${after} ORDER BY id LIMIT ${req.limit + 1}`.toArray();
    return ok(
      pageOf(
        rows,
        req.limit,
        (row) => tenantRecordOf(JSON.parse(row.body) as TenantResource),
        (last) => ({ i: last.id }),
      ),
    );
  }

  async forget(tenant: string): Promise<RpcResult<null>> {
    this.#sql`DELETE FROM directory_tenants WHERE id = ${tenant}`;
    return ok(null);
  }
}
