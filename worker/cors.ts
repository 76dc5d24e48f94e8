/**
 * CORS for browser clients (the Fetch standard's CORS protocol), off unless `SPINDLE_CORS_ORIGINS`
 * lists origins. A request from a listed origin gets the CORS headers, and its preflight (`OPTIONS`
 * with `Origin` and `Access-Control-Request-Method`) is answered 204 here, before any key is asked
 * for: a browser sends no credentials with it. A request from any other origin gets none of them,
 * so the browser keeps the answer from the page. Keys travel in `Authorization`, never in cookies,
 * so credentials mode is not allowed.
 *
 * Hono's `cors` writes the headers; it is wrapped because on its own it answers every `OPTIONS` as
 * a preflight and sends `Access-Control-Expose-Headers` and `-Allow-Methods` to any origin.
 */
import type { MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import { REQUEST_ID_HEADER } from "../shared/observability/index.ts";
import type { AppEnv } from "./app-env.ts";
import { edgeLog } from "./observability.ts";

/** The methods the API's routes use. */
const METHODS = ["GET", "POST", "PATCH", "DELETE"];
/** The request headers the API reads beyond the CORS-safelisted ones. */
const REQUEST_HEADERS = [
  "Authorization",
  "Content-Type",
  "Idempotency-Key",
  "Last-Event-ID",
  REQUEST_ID_HEADER,
];
/** The response headers the API sends that a page may read (beyond the safelisted ones). */
export const EXPOSED_HEADERS = [
  REQUEST_ID_HEADER,
  "Location",
  "Retry-After",
  "WWW-Authenticate",
  "Allow",
  "Accept-Post",
  "Content-Disposition",
  "Spindle-Missing-Lines",
];
/** How long a browser may keep a preflight's answer (Chromium keeps at most 2 hours). */
const PREFLIGHT_MAX_AGE_S = 600;

export function corsForBrowsers(): MiddlewareHandler<AppEnv> {
  const answer = cors({
    origin: (origin) => origin,
    allowMethods: METHODS,
    allowHeaders: REQUEST_HEADERS,
    exposeHeaders: EXPOSED_HEADERS,
    maxAge: PREFLIGHT_MAX_AGE_S,
  });
  return async (c, next) => {
    const allowed = allowedOrigins(c.env.SPINDLE_CORS_ORIGINS);
    if (allowed.size === 0) return next();
    const origin = c.req.header("origin");
    const preflight =
      c.req.method === "OPTIONS" && c.req.header("access-control-request-method") !== undefined;
    if (origin !== undefined && allowed.has(origin) && (preflight || c.req.method !== "OPTIONS")) {
      return answer(c, next);
    }
    await next();
    // The answer depends on the origin: a cache must not give it to an allowed one.
    c.header("Vary", "Origin", { append: true });
  };
}

let parsed: { raw: string | undefined; origins: ReadonlySet<string> } | undefined;

/**
 * The origins `SPINDLE_CORS_ORIGINS` allows: comma-separated, each `scheme://host[:port]` as a
 * browser sends it in `Origin` (a trailing `/` and upper case are forgiven). An entry that is not
 * an origin (a path, `*`, no scheme) allows nothing, and is logged once.
 */
export function allowedOrigins(raw: string | undefined): ReadonlySet<string> {
  if (parsed !== undefined && parsed.raw === raw) return parsed.origins;
  const origins = new Set<string>();
  for (const entry of (raw ?? "").split(",")) {
    const text = entry.trim();
    if (text === "") continue;
    const origin = originOf(text);
    if (origin === undefined) {
      edgeLog.warn("cors.origin_ignored", { reason: `SPINDLE_CORS_ORIGINS entry "${text}"` });
    } else {
      origins.add(origin);
    }
  }
  parsed = { raw, origins };
  return origins;
}

function originOf(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  const exact = url.origin !== "null" && url.origin === text.toLowerCase().replace(/\/$/, "");
  return exact ? url.origin : undefined;
}
