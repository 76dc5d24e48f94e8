/**
 * Bearer-key authentication and authorization (design §7, §11). A key is one of:
 *
 * - an **admin key**, for the admin API only: the secret `SPINDLE_ADMIN_KEYS`, a JSON array of
 *   the lowercase hex SHA-256 of each admin key (`sk-local-admin` too, in development);
 * - a **static key**: the secret `SPINDLE_API_KEYS`, a JSON object mapping the lowercase hex
 *   SHA-256 of each key to its tenant id, e.g. with the key `test` for tenant `acme`:
 *
 *       {"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08": "acme"}
 *
 *   (`sk-local-dev`, tenant `local`, too, in development). Such a key has every scope;
 * - a **tenant key** made through the API (`sk_{place}.{tenant}.{key id}.{secret}`,
 *   `shared/api/api-keys.ts`): its key id's tag is checked here first (`tenant/id-tags.ts`), so a forged
 *   key addresses no object (design §18 invariant 20); then it is verified by its tenant's
 *   object, which the key itself addresses, and trusted by this isolate for at most 30 s
 *   (`key-cache.ts`), so authentication reaches no global object and a revoked key fails
 *   everywhere within 30 s.
 *
 * A digest comes from `printf %s "$KEY" | sha256sum` (no trailing newline is hashed). Tenant ids
 * are 1-64 of `[A-Za-z0-9_-]`. Every failure is the same 401; a key without the scope a route
 * needs is a 403 `forbidden`.
 */
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js";
import type { MiddlewareHandler } from "hono";
import {
  digestsEqual,
  type IdTags,
  idTagsOf,
  keyDigest,
  tenantStubIn,
} from "../durable-objects/index.ts";
import type { Env } from "../env.ts";
import { parseApiKey, SCOPES, type Scope, TenantIdSchema } from "../shared/api/index.ts";
import * as z from "../shared/zod/index.ts";
import type { AppEnv, Principal } from "./app-env.ts";
import { ApiError } from "./errors.ts";
import { KeyCache } from "./key-cache.ts";

export const DEV_API_KEY = "sk-local-dev";
export const DEV_TENANT = "local";
export const DEV_ADMIN_KEY = "sk-local-admin";

const SHA256_HEX = z.onFirstUse(() =>
  z.string().check(z.regex(/^[0-9a-f]{64}$/, "lowercase hex SHA-256 digests")),
);
const ApiKeysSchema = z.onFirstUse(() => z.record(SHA256_HEX, TenantIdSchema));
const AdminKeysSchema = z.onFirstUse(() => z.array(SHA256_HEX));

/** RFC 6750 §2.1: `Bearer` (scheme case-insensitive per RFC 9110 §11.1) and one token. */
const BEARER_PATTERN = /^Bearer +(\S+) *$/i;

/** Longer presented keys are rejected unhashed; real keys are far shorter. */
const maxApiKeyBytes = 512;

/** What a route needs: nothing, an admin key, or a tenant key with a scope. */
export type Access = "public" | "admin" | Scope;

interface StaticEntry {
  digest: Uint8Array;
  /** The tenant, or null for an admin key. */
  tenant: string | null;
}

/** The static keys of this isolate, parsed once per value of the secrets. */
let parsedKeys: { raw: string; entries: StaticEntry[] } | undefined;
/** The development keys' entries, hashed the first time a development isolate reads a key. */
let devEntries: StaticEntry[] | undefined;
const devKeyEntries = (): StaticEntry[] => {
  devEntries ??= [
    { digest: keyDigest(DEV_API_KEY), tenant: DEV_TENANT },
    { digest: keyDigest(DEV_ADMIN_KEY), tenant: null },
  ];
  return devEntries;
};

/** The isolate's cache of verified tenant keys (each isolate has its own; tests make theirs). */
export const isolateKeyCache = new KeyCache();

const INVALID_KEY = () =>
  new ApiError("unauthorized", "The API key is not valid.", {
    headers: { "WWW-Authenticate": 'Bearer realm="spindle", error="invalid_token"' },
  });

/**
 * Middleware for `/v1/*`: resolves who the key is (`c.var.principal`), or throws `unauthorized`
 * (with `WWW-Authenticate`, RFC 6750 §3).
 */
export function authenticate(cache: KeyCache = isolateKeyCache): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const key = BEARER_PATTERN.exec(c.req.header("authorization") ?? "")?.[1];
    if (key === undefined) {
      throw new ApiError("unauthorized", "Send an API key as `Authorization: Bearer <key>`.", {
        headers: { "WWW-Authenticate": 'Bearer realm="spindle"' },
      });
    }
    const principal = await principalForKey(key, c.env, cache);
    if (principal === undefined) throw INVALID_KEY();
    c.set("principal", principal);
    await next();
  };
}

/** A route's check: an admin route needs an admin key, a tenant route a key with its scope. */
export function authorize(access: Access): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (access !== "public") {
      const principal = c.var.principal;
      if (access === "admin") {
        if (principal.kind !== "admin") {
          throw new ApiError("forbidden", "This route needs an admin key.");
        }
      } else {
        if (principal.kind !== "tenant") {
          throw new ApiError(
            "forbidden",
            "An admin key manages tenants; use a key of the tenant for this route.",
          );
        }
        if (!principal.scopes.includes(access)) {
          throw new ApiError("forbidden", `This route needs a key with the scope \`${access}\`.`);
        }
        c.set("tenant", principal.tenant);
      }
    }
    await next();
  };
}

/** Who a key is, or undefined for a key that is not valid (however it fails). */
export async function principalForKey(
  key: string,
  env: Env,
  cache: KeyCache = isolateKeyCache,
): Promise<Principal | undefined> {
  if (new TextEncoder().encode(key).length > maxApiKeyBytes) return undefined;
  const digest = keyDigest(key);
  const known = staticEntryFor(digest, env);
  if (known !== undefined) {
    return known.tenant === null
      ? { kind: "admin" }
      : { kind: "tenant", tenant: known.tenant, keyId: null, scopes: SCOPES, policy: undefined };
  }
  const parts = parseApiKey(key);
  if (parts === undefined) return undefined;
  if (!requireIdTags(env).keyIdValid(parts.jurisdiction, parts.tenant, parts.keyId)) {
    return undefined;
  }
  // The cache is keyed by text; the digest itself crosses RPC as its bytes.
  const cacheKey = bytesToHex(digest);
  const cached = cache.get(cacheKey);
  if (cached !== undefined) return cached;
  const askedAt = cache.now();
  const verified = await tenantStubIn(env, parts.jurisdiction, parts.tenant).verifyKey({
    keyId: parts.keyId,
    digest,
  });
  if (!verified.ok) return undefined;
  const { tenant, scopes, incarnation } = verified.value;
  // The key names its tenant's jurisdiction; a key that names another addressed another object.
  if (tenant.id !== parts.tenant || tenant.jurisdiction !== parts.jurisdiction) return undefined;
  const principal: Principal = {
    kind: "tenant",
    tenant: tenant.id,
    keyId: parts.keyId,
    scopes,
    policy: {
      jurisdiction: tenant.jurisdiction,
      quotas: tenant.quotas,
      threadDefaults: tenant.thread_defaults,
      incarnation,
    },
  };
  cache.set(cacheKey, principal, askedAt);
  return principal;
}

/**
 * The tags of tenant key ids and hook URLs. Without `SPINDLE_ID_SECRET` (in production) no tag can
 * be checked or made: every tenant key and hook delivery fails closed, as a malformed key secret
 * does.
 */
export function requireIdTags(env: Env): IdTags {
  const tags = idTagsOf(env);
  if (tags === undefined) {
    throw new ApiError(
      "internal",
      "The server's id secret is not set (SPINDLE_ID_SECRET): tenant keys and hooks are refused.",
    );
  }
  return tags;
}

/**
 * The static entry (admin or tenant) whose digest equals `digest`. Compares with every
 * configured digest in constant time and never stops at the first match, so the time taken says
 * nothing about which entry (or how much of one) matched.
 */
function staticEntryFor(digest: Uint8Array, env: Env): StaticEntry | undefined {
  const entries = staticEntries(env);
  if (entries.length === 0) return undefined;
  let found: StaticEntry | undefined;
  for (const entry of entries) {
    const equal = digestsEqual(digest, entry.digest);
    if (equal && found === undefined) found = entry;
  }
  return found;
}

/** The tenant ids the static keys name: no managed tenant may take one. */
export function staticTenants(env: Env): Set<string> {
  return new Set(staticEntries(env).flatMap((e) => (e.tenant === null ? [] : [e.tenant])));
}

function staticEntries(env: Env): StaticEntry[] {
  const raw = `${env.SPINDLE_API_KEYS ?? ""}\n${env.SPINDLE_ADMIN_KEYS ?? ""}`;
  if (parsedKeys?.raw !== raw) {
    parsedKeys = {
      raw,
      entries: [
        ...parseSecret(env.SPINDLE_API_KEYS, "SPINDLE_API_KEYS", (value) =>
          Object.entries(ApiKeysSchema.parse(value)).map(([hex, tenant]) => ({
            digest: hexToBytes(hex),
            tenant,
          })),
        ),
        ...parseSecret(env.SPINDLE_ADMIN_KEYS, "SPINDLE_ADMIN_KEYS", (value) =>
          AdminKeysSchema.parse(value).map((hex) => ({ digest: hexToBytes(hex), tenant: null })),
        ),
      ],
    };
  }
  return env.SPINDLE_ENV === "development"
    ? [...parsedKeys.entries, ...devKeyEntries()]
    : parsedKeys.entries;
}

function parseSecret(
  raw: string | undefined,
  name: string,
  read: (value: unknown) => StaticEntry[],
): StaticEntry[] {
  if (raw === undefined || raw.trim() === "") return [];
  try {
    return read(JSON.parse(raw));
  } catch {
    // Fail closed. No cause is kept: parse errors quote the secret, and a secret holding raw keys
    // by mistake must not reach the logs.
    throw new ApiError(
      "internal",
      name === "SPINDLE_API_KEYS"
        ? "The server's API keys are misconfigured (SPINDLE_API_KEYS: sha256 hex → tenant id)."
        : "The server's admin keys are misconfigured (SPINDLE_ADMIN_KEYS: array of sha256 hex).",
    );
  }
}
