import { sha256 } from "@noble/hashes/sha2.js";
import { utf8ToBytes } from "@noble/hashes/utils.js";

/** The SHA-256 of a key as presented (32 bytes): the only form in which keys are stored. */
export function keyDigest(key: string): Uint8Array {
  // Synchronous: `crypto.subtle.digest` costs a promise round trip per request for 32 bytes.
  return sha256(utf8ToBytes(key));
}

/**
 * Constant-time equality of two digests of the same length (`timingSafeEqual` throws on
 * different lengths, and a digest's length says nothing).
 */
export function digestsEqual(a: Uint8Array, b: Uint8Array): boolean {
  // `timingSafeEqual` is a Workers extension; Node (unit tests) lacks it, hence the XOR fold.
  const subtle: Partial<Pick<SubtleCrypto, "timingSafeEqual">> = crypto.subtle;
  if (a.length === b.length && typeof subtle.timingSafeEqual === "function") {
    return subtle.timingSafeEqual(a, b);
  }
  let diff = a.length ^ b.length;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}
