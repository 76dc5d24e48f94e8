/**
 * Request validation: zod schemas for the body, the query, path and header parameters, and the
 * body-size limits. Every failure is thrown as an `ApiError` so `app.onError` renders it.
 */
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { JsonNestingError, jsonPointer, parseJsonWithin } from "../shared/protocol/index.ts";
import type * as z from "../shared/zod/index.ts";
import type { AppEnv } from "./app-env.ts";
import { ApiError, issuesToFieldErrors, type RequestPart } from "./errors.ts";

/**
 * Rejects a body over `maxBytes` with 413 `payload_too_large`. A declared `Content-Length` is
 * checked up front; otherwise (chunked, RFC 9112 §6.3) Hono's `bodyLimit` counts the bytes as
 * they stream and stops reading at the limit. A body that breaks off while it is counted is the
 * client's failure: 400 (`brokenBody`).
 */
export function limitBody(maxBytes: number): MiddlewareHandler<AppEnv> {
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw tooLarge(maxBytes);
    },
  });
  return async (c, next) => {
    // `next` runs outside, so that only a failure of reading the body is taken for one.
    let within = false;
    try {
      await limit(c, async () => {
        within = true;
      });
    } catch (err) {
      throw err instanceof ApiError ? err : brokenBody(err);
    }
    if (within) await next();
  };
}

/**
 * A request body that could not be read to its end: the client went away mid-upload, or sent a
 * malformed chunk. Its fault, so 400 `invalid_request`, never a 5xx.
 */
export function brokenBody(cause: unknown): ApiError {
  return new ApiError("invalid_request", "The request body broke off before its end.", { cause });
}

/**
 * `body` copied into a stream for the Thread DO, its bytes counted: past `maxBytes`, or when
 * `body` breaks off, the copy is aborted (the DO's read fails) and `body` released, so an
 * oversized upload is never read to its end. `failure()` tells the caller afterwards why the DO's
 * read failed: `payload_too_large`, a broken body (400), or undefined. The copy is workerd's
 * native `IdentityTransformStream`: its abort reaches a reader across RPC as a failed read,
 * where an errored JS stream would also leave an uncaught rejection in the runtime's RPC pump.
 */
export function limitStream(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
): { stream: ReadableStream<Uint8Array>; failure: () => ApiError | undefined } {
  const pipe = new IdentityTransformStream();
  const writer = pipe.writable.getWriter();
  const reader = body.getReader();
  let failure: ApiError | undefined;
  const stop = async (error: ApiError) => {
    failure = error;
    await writer.abort(error).catch(() => {});
  };
  const copy = async () => {
    let seenBytes = 0;
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (cause) {
        return stop(brokenBody(cause));
      }
      if (chunk.done) return writer.close().catch(() => {});
      seenBytes += chunk.value.byteLength;
      if (seenBytes > maxBytes) {
        await reader.cancel().catch(() => {});
        return stop(tooLarge(maxBytes));
      }
      try {
        await writer.write(chunk.value);
      } catch {
        // The DO stopped reading (it refused a line, or the thread exists): read no further.
        return reader.cancel().catch(() => {});
      }
    }
  };
  void copy();
  return { stream: pipe.readable, failure: () => failure };
}

export function tooLarge(maxBytes: number): ApiError {
  return new ApiError("payload_too_large", `The request body is larger than ${maxBytes} bytes.`);
}

/** The media type of a request, lowercase and without parameters; "" when none is declared. */
export function mediaTypeOf(c: Context<AppEnv>): string {
  return (c.req.header("content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

const JSON_MEDIA_TYPE = /^application\/([\w.-]+\+)?json$/i;

/**
 * The body as JSON. An empty body reads as `{}` (a create with all defaults needs none); a
 * non-empty one must be declared JSON, so a form-encoded `curl -d` gets a clear answer instead of
 * a parse error.
 */
export async function readJsonBody(c: Context<AppEnv>): Promise<unknown> {
  let text: string;
  try {
    // Decoded here rather than by `text()`, which workerd warns about for a non-text type.
    text = new TextDecoder().decode(await c.req.arrayBuffer());
  } catch (cause) {
    throw brokenBody(cause);
  }
  if (text.trim() === "") return {};
  if (!JSON_MEDIA_TYPE.test(mediaTypeOf(c))) {
    throw new ApiError(
      "invalid_request",
      "Send the body as JSON with `Content-Type: application/json`.",
    );
  }
  try {
    return parseJsonWithin(text);
  } catch (cause) {
    if (cause instanceof JsonNestingError) {
      const message = `Nested deeper than ${cause.maxDepth} levels`;
      throw new ApiError(
        "invalid_request",
        `The request body nests deeper than ${cause.maxDepth} levels.`,
        {
          errors: [{ path: jsonPointer(cause.path), message }],
        },
      );
    }
    throw new ApiError("invalid_request", "The request body is not valid JSON.", { cause });
  }
}

const PART_NAMES: Record<RequestPart, string> = {
  body: "request body",
  query: "query",
  param: "path",
  header: "headers",
};

/** `value` parsed with `schema`, or `invalid_request` with one field error per failing field. */
export function parseRequestPart<S extends z.ZodMiniType>(
  schema: S,
  value: unknown,
  part: RequestPart,
): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const errors = issuesToFieldErrors(result.error.issues, part);
  const where = PART_NAMES[part];
  throw new ApiError("invalid_request", `The ${where} is invalid.`, {
    errors,
    cause: result.error,
  });
}
