import { hmac } from "@noble/hashes/hmac.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, concatBytes, hexToBytes } from "@noble/hashes/utils.js";

/**
 * The signature schemes of inbound hooks (design §12), and the signing of outbound events.
 *
 * - `standard` (Standard Webhooks): `webhook-signature: v1,<base64 HMAC-SHA256>` over
 *   `{webhook-id}.{webhook-timestamp}.{body}`, key the base64 after `whsec_`, a timestamp within
 *   5 minutes of the clock either way. Synchronous (noble's HMAC), as the outbox signs in a loop;
 *   the tests check it against the `standardwebhooks` package.
 * - `github`: `X-Hub-Signature-256: sha256=<hex>` over the body, key the secret's UTF-8 bytes.
 * - `slack`: `X-Slack-Signature: v0=<hex>` over `v0:{X-Slack-Request-Timestamp}:{body}`.
 * - `stripe`: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=…]` over `{t}.{body}`, key the whole
 *   `whsec_…` string.
 *
 * The last three are HMAC-SHA256 in Web Crypto: `crypto.subtle.verify` compares inside the
 * runtime in constant time. A header that carries several signatures (a sender rotating its
 * secret) verifies when any one matches; a hook that rotated its own secret tries the previous
 * one too.
 */
export const HOOK_SCHEMES = ["standard", "github", "slack", "stripe"] as const;
export type HookScheme = (typeof HOOK_SCHEMES)[number];

/** How far a signed timestamp may be from now, either way (Slack, Stripe, Standard Webhooks). */
export const SIGNATURE_TOLERANCE_S = 5 * 60;

/** A delivery as its signature covers it: the exact body bytes and the request's headers. */
export interface SignedDelivery {
  body: Uint8Array;
  /** A header by its lowercase name. */
  header: (name: string) => string | undefined;
  nowMs: number;
}

const encoder = new TextEncoder();

/** Whether `delivery` carries a valid, fresh signature of `scheme` under one of `secrets`. */
export async function verifySignature(
  scheme: HookScheme,
  secrets: readonly string[],
  delivery: SignedDelivery,
): Promise<boolean> {
  for (const secret of secrets) {
    if (await verifyOne(scheme, secret, delivery)) return true;
  }
  return false;
}

async function verifyOne(
  scheme: HookScheme,
  secret: string,
  delivery: SignedDelivery,
): Promise<boolean> {
  const { body, header, nowMs } = delivery;
  switch (scheme) {
    case "standard":
      return verifyStandard(secret, delivery);
    case "github": {
      const signature = /^sha256=([0-9a-fA-F]{64})$/.exec(header("x-hub-signature-256") ?? "");
      return signature?.[1] !== undefined && hmacVerify(secret, signature[1], body);
    }
    case "slack": {
      const timestamp = header("x-slack-request-timestamp") ?? "";
      const signature = /^v0=([0-9a-fA-F]{64})$/.exec(header("x-slack-signature") ?? "");
      if (!fresh(timestamp, nowMs) || signature?.[1] === undefined) return false;
      return hmacVerify(
        secret,
        signature[1],
        concatBytes(encoder.encode(`v0:${timestamp}:`), body),
      );
    }
    case "stripe": {
      const { timestamp, signatures } = parseStripeHeader(header("stripe-signature") ?? "");
      if (timestamp === undefined || !fresh(timestamp, nowMs)) return false;
      const signed = concatBytes(encoder.encode(`${timestamp}.`), body);
      for (const signature of signatures) {
        if (await hmacVerify(secret, signature, signed)) return true;
      }
      return false;
    }
  }
}

function verifyStandard(secret: string, { body, header }: SignedDelivery): boolean {
  const id = header("webhook-id");
  const timestamp = header("webhook-timestamp");
  const signatures = header("webhook-signature");
  if (!id || !timestamp || !signatures) return false;
  const seconds = Number.parseInt(timestamp, 10);
  if (!(Math.abs(Math.floor(Date.now() / 1000) - seconds) <= SIGNATURE_TOLERANCE_S)) return false;
  let expected: string;
  try {
    // Signed as text: a body that is not UTF-8 cannot verify, and no sender sends one.
    const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(body);
    expected = standardSignature(standardKey(secret), id, seconds, text);
  } catch {
    // A body that is not UTF-8, or a secret that is no base64.
    return false;
  }
  return signatures.split(" ").some((versioned) => {
    const [version, signature] = versioned.split(",");
    return version === "v1" && constantTimeEqual(signature ?? "", expected.slice("v1,".length));
  });
}

/** The key of a Standard Webhooks secret: the base64 after `whsec_` (or the whole string). */
function standardKey(secret: string): Uint8Array {
  const encoded = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  const key = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
  if (key.length === 0) throw new Error("A Standard Webhooks secret cannot be empty.");
  return key;
}

/** `v1,<base64 HMAC-SHA256>` of `{id}.{seconds}.{payload}` under `key`. */
function standardSignature(key: Uint8Array, id: string, seconds: number, payload: string): string {
  const mac = hmac(sha256, key, encoder.encode(`${id}.${seconds}.${payload}`));
  return `v1,${btoa(String.fromCharCode(...mac))}`;
}

/** Whether two strings are equal, in a time that does not tell where they differ. */
function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return difference === 0;
}

/** `t=` and every `v1=` of a `Stripe-Signature` header (other schemes, such as `v0`, ignored). */
export function parseStripeHeader(value: string): { timestamp?: string; signatures: string[] } {
  let timestamp: string | undefined;
  const signatures: string[] = [];
  for (const part of value.split(",")) {
    const [key, item] = part.trim().split("=", 2);
    if (key === "t" && item !== undefined && /^\d{1,12}$/.test(item)) timestamp = item;
    if (key === "v1" && item !== undefined && /^[0-9a-fA-F]{64}$/.test(item)) signatures.push(item);
  }
  return timestamp === undefined ? { signatures } : { timestamp, signatures };
}

/** A unix-seconds timestamp within the tolerance of now, either way. */
function fresh(timestamp: string, nowMs: number): boolean {
  if (!/^\d{1,12}$/.test(timestamp)) return false;
  return Math.abs(nowMs / 1000 - Number(timestamp)) <= SIGNATURE_TOLERANCE_S;
}

async function hmacKey(secret: string, usage: "sign" | "verify"): Promise<CryptoKey> {
  return crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    [usage],
  );
}

/** HMAC-SHA256 of `data` under the UTF-8 bytes of `secret` equals the hex `signature`. */
async function hmacVerify(secret: string, signature: string, data: Uint8Array): Promise<boolean> {
  const key = await hmacKey(secret, "verify");
  return crypto.subtle.verify("HMAC", key, hexToBytes(signature), data);
}

/** Lowercase hex HMAC-SHA256 of `data` under the UTF-8 bytes of `secret` (to sign by hand). */
export async function hmacSha256Hex(secret: string, data: Uint8Array | string): Promise<string> {
  const bytes = typeof data === "string" ? encoder.encode(data) : data;
  const mac = await crypto.subtle.sign("HMAC", await hmacKey(secret, "sign"), bytes);
  return bytesToHex(new Uint8Array(mac));
}

/**
 * The `webhook-signature` header of an outbound event: one `v1,` signature per secret (the
 * current one first; a secret rotated less than a day ago still signs), space-separated.
 */
export function signStandard(
  secrets: readonly string[],
  id: string,
  timestamp: Date,
  payload: string,
): string {
  const seconds = Math.floor(timestamp.getTime() / 1000);
  return secrets
    .map((secret) => standardSignature(standardKey(secret), id, seconds, payload))
    .join(" ");
}

/** 32 random bytes as a Standard Webhooks secret: `whsec_` and base64. */
export function newStandardSecret(): string {
  return `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;
}

/** A new secret for a hook of `scheme`: only schemes whose sender takes a secret generate one. */
export function newHookSecret(scheme: HookScheme): string | undefined {
  switch (scheme) {
    case "standard":
      return newStandardSecret();
    case "github":
      return bytesToHex(crypto.getRandomValues(new Uint8Array(32)));
    // Slack and Stripe issue the signing secret; the hook is given theirs.
    case "slack":
    case "stripe":
      return undefined;
  }
}

/** Why `secret` cannot be a secret of `scheme`, or undefined when it can. */
export function secretProblem(scheme: HookScheme, secret: string): string | undefined {
  if (scheme !== "standard") return undefined;
  const encoded = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  let bytes: number;
  try {
    bytes = atob(encoded).length;
  } catch {
    return "a Standard Webhooks secret is `whsec_` followed by base64";
  }
  if (bytes < 24 || bytes > 64) return "a Standard Webhooks secret holds 24 to 64 bytes";
  return undefined;
}
