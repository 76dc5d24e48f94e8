import type { Jurisdiction } from "./tenancy.ts";

/**
 * The format of a tenant's API key (design §11):
 *
 *     sk_{place}.{tenant}.{key id}.{secret}
 *
 * `place` is the tenant's jurisdiction (`eu`, `fedramp`) or `g` (none), so the worker can address
 * the tenant's object from the key alone, without a global lookup. The separator `.` is outside
 * the id alphabet `[A-Za-z0-9_-]`, so the parts split one way only. The key id is public (it names
 * the stored digest) and ends in a tag only this deployment can make, checked before the tenant's
 * object is addressed (`durable-objects/tenant/id-tags.ts`); the secret is 32 random bytes, base64url.
 * Only the SHA-256 of the whole key is stored.
 */
const KEY_PATTERN =
  /^sk_(g|eu|fedramp)\.([A-Za-z0-9_-]{1,64})\.(key_[A-Za-z0-9]{1,60})\.([A-Za-z0-9_-]{32,128})$/;

export interface ApiKeyParts {
  jurisdiction: Jurisdiction;
  tenant: string;
  keyId: string;
  secret: string;
}

const placeOf = (jurisdiction: Jurisdiction) => jurisdiction ?? "g";

export function formatApiKey(parts: ApiKeyParts): string {
  return `sk_${placeOf(parts.jurisdiction)}.${parts.tenant}.${parts.keyId}.${parts.secret}`;
}

/** The parts of a key in the tenant format, or undefined for any other string. */
export function parseApiKey(key: string): ApiKeyParts | undefined {
  const match = KEY_PATTERN.exec(key);
  if (!match) return undefined;
  const [, place, tenant, keyId, secret] = match as unknown as [
    string,
    string,
    string,
    string,
    string,
  ];
  return {
    jurisdiction: place === "g" ? null : (place as "eu" | "fedramp"),
    tenant,
    keyId,
    secret,
  };
}

/** The key with its secret cut to the last four characters: shown in lists, safe to log. */
export function redactApiKey(parts: ApiKeyParts): string {
  return `sk_${placeOf(parts.jurisdiction)}.${parts.tenant}.${parts.keyId}.…${parts.secret.slice(-4)}`;
}
