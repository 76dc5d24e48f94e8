import { bytesToHex } from "@noble/hashes/utils.js";
import type { IdempotencyKey } from "../shared/api/index.ts";
import type { OperationId } from "./routes.ts";

/**
 * The `Idempotency-Key` of a request, with what identifies the request: the operation, its path
 * parameters and its validated body, hashed (SHA-256, native: a turn body may be 8 MiB). A retry
 * sends the same request, so it gets the same fingerprint; the same key on another one does not.
 * Spread into the RPC request: `{}` without a key.
 */
export async function idempotencyOf(
  header: { "idempotency-key"?: string | undefined },
  operation: OperationId,
  request: { param: unknown; body: unknown },
): Promise<{ idempotency?: IdempotencyKey }> {
  const key = header["idempotency-key"];
  if (key === undefined) return {};
  const text = `${operation}\n${JSON.stringify(request.param)}\n${JSON.stringify(request.body)}`;
  return { idempotency: { key, fingerprint: await sha256Hex(text) } };
}

/**
 * The id of a thread created (or forked) under an `Idempotency-Key` without an `id` in the body:
 * derived from the operation and the key, so a retry reaches the thread its first attempt
 * created, which recognizes the key, instead of creating another one. The tenant needs no part
 * in it: thread ids are scoped to the tenant already.
 */
export async function threadIdForKey(operation: OperationId, key: string): Promise<string> {
  return `thr_${(await sha256Hex(`${operation}\n${key}`)).slice(0, 40)}`;
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return bytesToHex(new Uint8Array(digest));
}
