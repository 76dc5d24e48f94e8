/**
 * The benchmark's control: the least a Worker can do per request with a SQLite-backed Durable
 * Object. `POST /rows/{name}` inserts one row in that object and answers its newest row number, so the
 * Spindle numbers can be read against the cost of the platform path itself (edge → DO RPC → SQL
 * write → output gate → response). `/chat/{name}/…` is the chat control of `bench:production`
 * (`chat.ts`); `GET /healthz` the least a request can do, `bench:startup`'s control for Spindle's
 * `/healthz`. Not part of the production worker.
 */
import { DurableObject } from "cloudflare:workers";
import { BareChat, type ChatEnv } from "./chat.ts";

export { BareChat };

interface Env extends ChatEnv {
  ROWS: DurableObjectNamespace<BareRows>;
  CHAT: DurableObjectNamespace<BareChat>;
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
const CHAT_PATH = /^\/chat\/([A-Za-z0-9_-]{1,64})\/(turns|seed|size)$/;

async function chat(request: Request, env: Env, name: string, action: string): Promise<Response> {
  const stub = env.CHAT.getByName(name);
  if (action === "size" && request.method === "GET") {
    return Response.json({ database_size: await stub.databaseSize() });
  }
  if (request.method !== "POST") return new Response("not found", { status: 404 });
  const body = (await request.json()) as {
    input?: string;
    turns?: number;
    user?: string;
    assistant?: string;
  };
  if (action === "turns") return Response.json(await stub.turn(String(body.input)));
  if (action === "seed") {
    return Response.json(
      await stub.seed(Number(body.turns), String(body.user), String(body.assistant)),
    );
  }
  return new Response("not found", { status: 404 });
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const path = new URL(request.url).pathname;
    if (path === "/healthz") return Response.json({ ok: true });
    const chatMatch = CHAT_PATH.exec(path);
    if (chatMatch?.[1] && chatMatch[2]) return chat(request, env, chatMatch[1], chatMatch[2]);
    const name = ROWS_PATH.exec(path)?.[1];
    if (request.method !== "POST" || name === undefined) {
      return new Response("not found", { status: 404 });
    }
    const rows = await env.ROWS.getByName(name).insert(await request.text());
    return Response.json({ rows });
  },
} satisfies ExportedHandler<Env>;
