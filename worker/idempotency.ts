import { bytesToHex } from "@noble/hashes/utils.js";
import type { OperationId } from "./routes.ts";
import type { IdempotencyKey } from "./thread-rpc.ts";

/**
 * The `Idempotency-Key` of a request with what identifies the request: the operation and its
 * validated body, hashed (SHA-256, native: a turn body may be 8 MiB). A retry sends the same
 * body, so it gets the same fingerprint; the same key on another request does not.
 */
export async function idempotencyOf(
  key: string | undefined,
  operation: OperationId,
  body: unknown,
): Promise<IdempotencyKey | undefined> {
  if (key === undefined) return undefined;
  const request = new TextEncoder().encode(`${operation}\n${JSON.stringify(body)}`);
  const digest = await crypto.subtle.digest("SHA-256", request);
  return { key, fingerprint: bytesToHex(new Uint8Array(digest)) };
}
