/**
 * Request validation: zod schemas for the body, the query and path parameters, and the body-size
 * limits. Every failure is thrown as an `ApiError` so `app.onError` renders it.
 */
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { z } from "zod";
import type { AppEnv } from "./app-env.ts";
import { ApiError, issuesToFieldErrors, type RequestPart } from "./errors.ts";

/** A turn's body may carry inline images. */
export const turnBodyMaxBytes = 8 * 1024 * 1024;
/** Every other JSON body. */
export const jsonBodyMaxBytes = 1024 * 1024;

/**
 * Rejects a body over `maxBytes` with 413 `payload_too_large`. A declared `Content-Length` is
 * checked up front; otherwise (chunked, RFC 9112 §6.3) Hono's `bodyLimit` counts the bytes as
 * they stream and stops reading at the limit.
 */
export function limitBody(maxBytes: number): MiddlewareHandler<AppEnv> {
  return bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new ApiError("payload_too_large", `The request body is larger than ${maxBytes} bytes.`);
    },
  });
}

type Validated<Target extends "json" | "query" | "param", S extends z.ZodType> = {
  in: { [K in Target]: z.input<S> };
  out: { [K in Target]: z.output<S> };
};

/** Parses the JSON body with `schema`; the result is `c.req.valid("json")`. */
export function validBody<S extends z.ZodType<object>>(
  schema: S,
): MiddlewareHandler<AppEnv, string, Validated<"json", S>> {
  return async (c, next) => {
    c.req.addValidatedData("json", parseWith(schema, await readJsonBody(c), "body"));
    await next();
  };
}

/** Parses the query string (first value of each name) with `schema`: `c.req.valid("query")`. */
export function validQuery<S extends z.ZodType<object>>(
  schema: S,
): MiddlewareHandler<AppEnv, string, Validated<"query", S>> {
  return async (c, next) => {
    c.req.addValidatedData("query", parseWith(schema, c.req.query(), "query"));
    await next();
  };
}

/** Parses the path parameters with `schema`: `c.req.valid("param")`. */
export function validParams<S extends z.ZodType<object>>(
  schema: S,
): MiddlewareHandler<AppEnv, string, Validated<"param", S>> {
  return async (c, next) => {
    c.req.addValidatedData("param", parseWith(schema, c.req.param(), "param"));
    await next();
  };
}

const JSON_MEDIA_TYPE = /^application\/([\w.-]+\+)?json$/i;

/**
 * The body as JSON. An empty body reads as `{}` (a create with all defaults needs none); a
 * non-empty one must be declared JSON, so a form-encoded `curl -d` gets a clear answer instead of
 * a parse error.
 */
async function readJsonBody(c: Context<AppEnv>): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === "") return {};
  const mediaType = (c.req.header("content-type") ?? "").split(";")[0]?.trim() ?? "";
  if (!JSON_MEDIA_TYPE.test(mediaType)) {
    throw new ApiError(
      "invalid_request",
      "Send the body as JSON with `Content-Type: application/json`.",
    );
  }
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new ApiError("invalid_request", "The request body is not valid JSON.", { cause });
  }
}

function parseWith<S extends z.ZodType<object>>(
  schema: S,
  value: unknown,
  part: RequestPart,
): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const errors = issuesToFieldErrors(result.error.issues, part);
  const where = part === "body" ? "request body" : part === "query" ? "query" : "path";
  throw new ApiError("invalid_request", `The ${where} is invalid.`, {
    errors,
    cause: result.error,
  });
}
