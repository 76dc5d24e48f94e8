import {
  type ApiKeyResource,
  type CreatedApiKey,
  type CreateKeyRequest,
  formatApiKey,
  type ListQuery,
  type ListResource,
  type RpcResult,
  redactApiKey,
  type Scope,
  type TenantResource,
} from "../../shared/api/index.ts";
import type { Clock } from "../../shared/ports/index.ts";
import { tablePage } from "../common/cursor.ts";
import { digestsEqual, keyDigest } from "../common/digests.ts";
import { ok } from "../common/results.ts";
import type { Sql } from "../common/sql.ts";
import { type IdTagsEnv, idTagsOf } from "./id-tags.ts";
import { refusedByLimit } from "./limits.ts";

/** `last_used_at` is written at most this often per key: coarse, so a request writes nothing. */
export const LAST_USED_GRANULARITY_MS = 60_000;

/** A SHA-256 digest's length. */
const SHA256_BYTES = 32;
/** Compared against when a key id is unknown, so an unknown id takes the same time. */
const NO_DIGEST = new Uint8Array(SHA256_BYTES);

/** 32 random bytes, base64url without padding (43 characters). */
function randomSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
}

interface KeyRow extends Record<string, SqlStorageValue> {
  id: string;
  digest: ArrayBuffer;
  body: string;
  created_at: string;
  last_used_at: string | null;
}

/**
 * A tenant's API keys (design §11): digests at rest, the secret shown once, constant-time
 * comparison. A revoked key is deleted: it is gone from the list and fails like a key that never
 * was.
 */
export class KeyStore {
  readonly #sql: Sql;
  readonly #clock: Clock;
  readonly #env: IdTagsEnv;

  /** `env` gives the key ids their tags (`tenant/id-tags.ts`). */
  constructor(sql: Sql, clock: Clock, env: IdTagsEnv) {
    this.#sql = sql;
    this.#clock = clock;
    this.#env = env;
  }

  /** The new key; `limit_exceeded` when the tenant holds `api_keys_per_tenant` keys. */
  create(tenant: TenantResource, req: CreateKeyRequest): RpcResult<CreatedApiKey> {
    const refused = refusedByLimit(this.#sql, "api_keys_per_tenant");
    if (refused) return refused;
    const tags = idTagsOf(this.#env);
    // The worker refuses first, with its problem; this guards any other caller.
    if (!tags) throw new Error("SPINDLE_ID_SECRET is not set: no key can be made");
    const parts = {
      jurisdiction: tenant.jurisdiction,
      tenant: tenant.id,
      keyId: tags.newKeyId(tenant.jurisdiction, tenant.id),
      secret: randomSecret(),
    };
    const key = formatApiKey(parts);
    const resource: ApiKeyResource = {
      object: "api_key",
      id: parts.keyId,
      name: req.name,
      scopes: req.scopes,
      redacted_key: redactApiKey(parts),
      created_at: new Date(this.#clock.nowMs()).toISOString(),
      last_used_at: null,
    };
    const { last_used_at: _, ...body } = resource;
    const digest = keyDigest(key);
    this.#sql`INSERT INTO tenant_keys (id, digest, body, created_at)
      VALUES (${resource.id}, ${digest.buffer as ArrayBuffer}, ${JSON.stringify(body)},
        ${resource.created_at})`;
    return ok({ ...resource, key });
  }

  /**
   * The key's scopes when `digest` is the digest stored under `keyId`. The comparison takes the
   * same time whether the id exists or not, and whatever the digests share.
   */
  verify(keyId: string, digest: Uint8Array): Scope[] | undefined {
    if (digest.length !== SHA256_BYTES) return undefined;
    const row = this.#sql<KeyRow>`SELECT * FROM tenant_keys WHERE id = ${keyId}`.toArray()[0];
    const stored = row ? new Uint8Array(row.digest) : NO_DIGEST;
    const equal = digestsEqual(stored, digest);
    if (!row || !equal) return undefined;
    const now = this.#clock.nowMs();
    const lastUsed = row.last_used_at === null ? 0 : Date.parse(row.last_used_at);
    if (now - lastUsed >= LAST_USED_GRANULARITY_MS) {
      const at = new Date(now).toISOString();
      this.#sql`UPDATE tenant_keys SET last_used_at = ${at} WHERE id = ${keyId}`;
    }
    return resourceOf(row).scopes;
  }

  /** Keys oldest first. `undefined` for a cursor this store did not make. */
  list(query: ListQuery): ListResource<ApiKeyResource> | undefined {
    return tablePage(this.#sql, { table: "tenant_keys", time: "created_at" }, query, resourceOf);
  }

  /** False when the tenant has no such key. */
  revoke(keyId: string): boolean {
    return this.#sql`DELETE FROM tenant_keys WHERE id = ${keyId}`.rowsWritten > 0;
  }

  /** Every key goes (the tenant is deleted). */
  clear(): void {
    this.#sql`DELETE FROM tenant_keys`;
  }
}

function resourceOf(row: KeyRow): ApiKeyResource {
  return {
    ...(JSON.parse(row.body) as Omit<ApiKeyResource, "last_used_at">),
    last_used_at: row.last_used_at,
  };
}
