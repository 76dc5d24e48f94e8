/**
 * The benchmark's control: the least a Worker can do per request with a SQLite-backed Durable
 * Object. `POST /rows/{name}` inserts one row in that object and answers its newest row number, so the
 * Spindle numbers can be read against the cost of the platform path itself (edge → DO RPC → SQL
 * write → output gate → response). Not part of the production worker.
 */
import { DurableObject } from "cloudflare:workers";

interface Env {
  ROWS: DurableObjectNamespace<BareRows>;
}

export class BareRows extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS rows (seq INTEGER PRIMARY KEY, body TEXT NOT NULL)",
    );
  }

  insert(body: string): number {
    const sql = this.ctx.storage.sql;
    sql.exec("INSERT INTO rows (body) VALUES (?)", body);
    return sql.exec<{ n: number }>("SELECT MAX(seq) AS n FROM rows").one().n;
  }
}

const ROWS_PATH = /^\/rows\/([A-Za-z0-9_-]{1,64})$/;

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const name = ROWS_PATH.exec(new URL(request.url).pathname)?.[1];
    if (request.method !== "POST" || name === undefined) {
      return new Response("not found", { status: 404 });
    }
    const rows = await env.ROWS.getByName(name).insert(await request.text());
    return Response.json({ rows });
  },
} satisfies ExportedHandler<Env>;
