/**
 * The edge's side of observability: every request gets an id (the client's `x-request-id` when
 * it is a valid one), answered in the same header, carried to the objects it calls (`Trace`)
 * and into the webhook events it causes, and one `request` log line when it is answered.
 */
import type { Context, MiddlewareHandler } from "hono";
import type { Trace } from "../shared/api/index.ts";
import { Logger, REQUEST_ID_HEADER, requestIdOf } from "../shared/observability/index.ts";
import type { AppEnv } from "./app-env.ts";

/** The edge's log: the console, which Workers Logs reads. */
export const edgeLog = new Logger(console);

/** The first middleware: the request's id and log, its header on the answer, its log line. */
export function requestContext(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = Date.now();
    const requestId = requestIdOf(c.req.header(REQUEST_ID_HEADER));
    c.set("requestId", requestId);
    c.set("log", edgeLog.with({ request_id: requestId }));
    // Set before the handler runs, so every answer carries it, problem documents and streams too.
    c.header(REQUEST_ID_HEADER, requestId);
    await next();
    c.var.log.info("request", {
      method: c.req.method,
      tenant: c.get("tenant"),
      http_status: c.res.status,
      duration_ms: Date.now() - started,
    });
  };
}

/** What a call to an object carries of the request (`Trace`). */
export function traceOf(c: Context<AppEnv>): Trace {
  return { requestId: c.var.requestId };
}
