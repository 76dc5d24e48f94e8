/**
 * UUIDs as RFC 9562 lays them out. v7 is time-ordered: 48 bits of Unix milliseconds, then a
 * 31-bit counter that starts at random each millisecond and counts up within it (so ids made in
 * one isolate sort in the order they were made, many within one request included), then random
 * bits. v5 is the SHA-1 of a namespace and a name.
 */
import { sha1 } from "@noble/hashes/legacy.js";

const HEX = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The millisecond and the counter of the latest v7 id. */
const latest = { ms: Number.NEGATIVE_INFINITY, counter: 0 };

export function uuidv7(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  const now = Date.now();
  if (now > latest.ms) {
    latest.ms = now;
    latest.counter =
      (((bytes[6] ?? 0) & 0x7f) << 24) |
      ((bytes[7] ?? 0) << 16) |
      ((bytes[8] ?? 0) << 8) |
      (bytes[9] ?? 0);
  } else {
    // Within a millisecond, or behind it (the clock went back): count on from the latest id.
    latest.counter = (latest.counter + 1) & 0x7fffffff;
    if (latest.counter === 0) latest.ms += 1;
  }
  const { ms, counter } = latest;
  for (let i = 0; i < 6; i++) bytes[i] = Math.floor(ms / 2 ** (8 * (5 - i))) & 0xff;
  bytes[6] = 0x70 | ((counter >>> 28) & 0x0f);
  bytes[7] = (counter >>> 20) & 0xff;
  bytes[8] = 0x80 | ((counter >>> 14) & 0x3f);
  bytes[9] = (counter >>> 6) & 0xff;
  bytes[10] = ((counter << 2) & 0xff) | ((bytes[10] ?? 0) & 0x03);
  return format(bytes);
}

/** The v5 UUID of `name` (UTF-8) in `namespace` (a UUID). */
export function uuidv5(name: string, namespace: string): string {
  if (!HEX.test(namespace)) throw new TypeError(`not a UUID: ${namespace}`);
  const space = namespace.replaceAll("-", "");
  const nameBytes = new TextEncoder().encode(name);
  const input = new Uint8Array(16 + nameBytes.length);
  for (let i = 0; i < 16; i++) input[i] = Number.parseInt(space.slice(2 * i, 2 * i + 2), 16);
  input.set(nameBytes, 16);
  const bytes = sha1(input).slice(0, 16);
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x50;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  return format(bytes);
}

function format(bytes: Uint8Array): string {
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
