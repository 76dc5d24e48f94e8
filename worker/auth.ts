/**
 * Bearer-key authentication: the key names the tenant (design §7).
 *
 * Keys are configured in the secret `SPINDLE_API_KEYS`, a JSON object that maps the lowercase hex
 * SHA-256 digest of each key to its tenant id, so the secret never holds a usable key. With the
 * key `test` for tenant `acme`:
 *
 *     {"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08": "acme"}
 *
 * A digest comes from `printf %s "$KEY" | sha256sum` (no trailing newline is hashed). Set it with
 * `wrangler secret put SPINDLE_API_KEYS`. Tenant ids are 1-64 of `[A-Za-z0-9_-]`; several keys
 * may share a tenant (rotation). The key `sk-local-dev` (tenant `local`) works only when
 * `SPINDLE_ENV` is `development` (`npm start` sets it); a worker with no keys configured anywhere
 * else rejects every request.
 */
import { sha256 } from "@noble/hashes/sha2.js";
import { hexToBytes, utf8ToBytes } from "@noble/hashes/utils.js";
import type { MiddlewareHandler } from "hono";
import { z } from "zod";
import type { Env } from "../env.ts";
import { TenantIdSchema } from "../shared/api/index.ts";
import type { AppEnv } from "./app-env.ts";
import { ApiError } from "./errors.ts";

export const DEV_API_KEY = "sk-local-dev";
export const DEV_TENANT = "local";

const SHA256_HEX_PATTERN = /^[0-9a-f]{64}$/;
const ApiKeysSchema = z.record(
  z.string().regex(SHA256_HEX_PATTERN, "keys are lowercase hex SHA-256 digests"),
  TenantIdSchema,
);

/** RFC 6750 §2.1: `Bearer` (scheme case-insensitive per RFC 9110 §11.1) and one token. */
const BEARER_PATTERN = /^Bearer +(\S+) *$/i;

/** Longer presented keys are rejected unhashed; real keys are far shorter. */
const maxApiKeyBytes = 512;

interface KeyEntry {
  digest: Uint8Array;
  tenant: string;
}

// Parsed per isolate, keyed by the secret's value, so a rotated secret is picked up at once.
let configuredKeys: { raw: string; entries: KeyEntry[] } | undefined;
let devKeyDigest: Uint8Array | undefined;

/**
 * Middleware for `/v1/*`: resolves the tenant from `Authorization: Bearer <key>` and sets
 * `c.var.tenant`, or throws `unauthorized` (with `WWW-Authenticate`, RFC 6750 §3).
 */
export function authenticate(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const key = BEARER_PATTERN.exec(c.req.header("authorization") ?? "")?.[1];
    if (key === undefined) {
      throw new ApiError("unauthorized", "Send an API key as `Authorization: Bearer <key>`.", {
        headers: { "WWW-Authenticate": 'Bearer realm="spindle"' },
      });
    }
    const tenant = tenantForKey(key, c.env);
    if (tenant === undefined) {
      throw new ApiError("unauthorized", "The API key is not valid.", {
        headers: { "WWW-Authenticate": 'Bearer realm="spindle", error="invalid_token"' },
      });
    }
    c.set("tenant", tenant);
    await next();
  };
}

/**
 * The tenant a key belongs to, or undefined. Compares the key's digest with every configured
 * digest in constant time and never stops at the first match, so the time taken says nothing
 * about which entry (or how much of one) matched.
 */
export function tenantForKey(key: string, env: Env): string | undefined {
  const entries = [...keyEntries(env.SPINDLE_API_KEYS)];
  if (env.SPINDLE_ENV === "development") {
    devKeyDigest ??= sha256(utf8ToBytes(DEV_API_KEY));
    entries.push({ digest: devKeyDigest, tenant: DEV_TENANT });
  }
  const bytes = utf8ToBytes(key);
  if (entries.length === 0 || bytes.length > maxApiKeyBytes) return undefined;
  // Synchronous: `crypto.subtle.digest` costs a promise round trip per request for 32 bytes.
  const digest = sha256(bytes);
  let tenant: string | undefined;
  for (const entry of entries) {
    const equal = digestsEqual(digest, entry.digest);
    if (equal && tenant === undefined) tenant = entry.tenant;
  }
  return tenant;
}

function keyEntries(raw: string | undefined): KeyEntry[] {
  if (raw === undefined || raw.trim() === "") return [];
  if (configuredKeys?.raw === raw) return configuredKeys.entries;
  let parsed: Record<string, string>;
  try {
    parsed = ApiKeysSchema.parse(JSON.parse(raw));
  } catch {
    // Fail closed. No cause is kept: parse errors quote the secret, and a secret holding raw keys
    // by mistake must not reach the logs.
    throw new ApiError(
      "internal",
      "The server's API keys are misconfigured (SPINDLE_API_KEYS: sha256 hex → tenant id).",
    );
  }
  const entries = Object.entries(parsed).map(([hex, tenant]) => ({
    digest: hexToBytes(hex),
    tenant,
  }));
  configuredKeys = { raw, entries };
  return entries;
}

/** Both inputs are 32-byte digests, so lengths never differ (timingSafeEqual throws if they do). */
function digestsEqual(a: Uint8Array, b: Uint8Array): boolean {
  // `timingSafeEqual` is a Workers extension; Node (unit tests) lacks it, hence the XOR fold.
  const subtle: Partial<Pick<SubtleCrypto, "timingSafeEqual">> = crypto.subtle;
  if (typeof subtle.timingSafeEqual === "function") return subtle.timingSafeEqual(a, b);
  let diff = a.length ^ b.length;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}
