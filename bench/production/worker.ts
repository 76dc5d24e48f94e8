/**
 * The worker `bench:production` runs: the production app, with `Thread` replaced by a subclass
 * that adds one read-only method, because `ctx.storage.sql.databaseSize` and the alarm are not
 * reachable from outside the object (the SQL that Miniflare runs from outside refuses
 * `PRAGMA page_count`). `GET /__bench/storage/{object name}` calls it from inside the worker, so
 * the stub is released with the request (a stub held by Miniflare's proxy would keep the object
 * from being evicted); every other request goes to the production app unchanged. Production code
 * carries no benchmark seams.
 */
import { Thread as ProductionThread } from "../../durable-objects/thread/thread.ts";
import type { Env } from "../../env.ts";
import app from "../../worker/index.ts";

export { TenantDirectory } from "../../durable-objects/tenant/directory.ts";
export { Tenant } from "../../durable-objects/tenant/tenant.ts";

const STORAGE_PATH = /^\/__bench\/storage\/([^/]+)$/;

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const name = request.url.includes("/__bench/")
      ? STORAGE_PATH.exec(new URL(request.url).pathname)?.[1]
      : undefined;
    if (name === undefined) return app.fetch(request, env, ctx);
    const stub = env.THREAD.getByName(decodeURIComponent(name)) as unknown as Thread;
    return Response.json(await stub.storageForBench());
  },
} satisfies ExportedHandler<Env>;

export interface TableBytes {
  table: string;
  rows: number;
  /** Sum of every column's stored length (text and blobs in bytes, numbers as written). */
  bytes: number;
}

export interface StorageReport {
  /** The object's id (its SQLite file in local workerd is named by it). */
  id: string;
  databaseSize: number;
  /** When the object's alarm is due (ms since the epoch), or null. */
  alarm: number | null;
  tables: TableBytes[];
}

export class Thread extends ProductionThread {
  async storageForBench(): Promise<StorageReport> {
    const sql = this.ctx.storage.sql;
    const names = sql
      .exec<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' ORDER BY name",
      )
      .toArray()
      .map((row) => row.name);
    const tables = names.map((table) => {
      const columns = sql
        .exec<{ name: string }>(`PRAGMA table_info("${table}")`)
        .toArray()
        .map((c) => `COALESCE(length(CAST("${c.name}" AS BLOB)), 0)`);
      const row = sql
        .exec<{ rows: number; bytes: number | null }>(
          `SELECT COUNT(*) AS rows, SUM(${columns.join(" + ") || "0"}) AS bytes FROM "${table}"`,
        )
        .one();
      return { table, rows: row.rows, bytes: row.bytes ?? 0 };
    });
    const alarm = await this.ctx.storage.getAlarm();
    return { id: this.ctx.id.toString(), databaseSize: sql.databaseSize, alarm, tables };
  }
}
