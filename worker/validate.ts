/**
 * Request validation: zod schemas for the body, the query, path and header parameters, and the
 * body-size limits. Every failure is thrown as an `ApiError` so `app.onError` renders it.
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
/** A rollout uploaded to `POST /v1/threads/import`, unless `createApp` is given another limit. */
export const importBodyMaxBytes = 64 * 1024 * 1024;

/**
 * Rejects a body over `maxBytes` with 413 `payload_too_large`. A declared `Content-Length` is
 * checked up front; otherwise (chunked, RFC 9112 §6.3) Hono's `bodyLimit` counts the bytes as
 * they stream and stops reading at the limit.
 */
export function limitBody(maxBytes: number): MiddlewareHandler<AppEnv> {
  return bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw tooLarge(maxBytes);
    },
  });
}

/**
 * `body` counting the bytes that pass through it: past `maxBytes` it errors (the reader sees
 * `payload_too_large`) and cancels `body`, so an oversized upload is never read to its end.
 * `exceeded()` tells the caller afterwards why its reader failed. The result is a byte stream
 * (`type: "bytes"`), the kind Workers RPC passes on.
 */
export function limitStream(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
): { stream: ReadableStream<Uint8Array>; exceeded: () => boolean } {
  const reader = body.getReader();
  let seenBytes = 0;
  let exceeded = false;
  const stream = new ReadableStream({
    type: "bytes",
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      seenBytes += value.byteLength;
      if (seenBytes > maxBytes) {
        exceeded = true;
        const error = tooLarge(maxBytes);
        controller.error(error);
        await reader.cancel(error).catch(() => {});
        return;
      }
      // A byte stream takes ownership of the chunk's buffer; copy a view into a shared one.
      const whole = value.byteOffset === 0 && value.byteLength === value.buffer.byteLength;
      controller.enqueue(whole ? value : value.slice());
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return { stream, exceeded: () => exceeded };
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
  const text = await c.req.text();
  if (text.trim() === "") return {};
  if (!JSON_MEDIA_TYPE.test(mediaTypeOf(c))) {
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

const PART_NAMES: Record<RequestPart, string> = {
  body: "request body",
  query: "query",
  param: "path",
  header: "headers",
};

/** `value` parsed with `schema`, or `invalid_request` with one field error per failing field. */
export function parseRequestPart<S extends z.ZodType>(
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
