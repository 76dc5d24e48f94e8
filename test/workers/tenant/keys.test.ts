/** The `Tenant` object's API keys (`tenant/keys.ts`) over a fresh tenant object's SQLite. */
import { describe, expect, it } from "vitest";
import { keyDigest } from "../../../durable-objects/common/digests.ts";
import { KeyStore } from "../../../durable-objects/tenant/keys.ts";
import { parseApiKey } from "../../../shared/api/index.ts";
import { okValue } from "../helpers/results.ts";
import { DEV_ENV, tenant, withTenantStorage } from "../helpers/tenant-storage.ts";

describe("KeyStore", () => {
  it("verifies a key by its id and digest only, never from the secret alone", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const keys = new KeyStore(sql, clock, DEV_ENV);
      const made = okValue(keys.create(tenant, { name: "ci", scopes: ["threads", "usage"] }));
      const parts = parseApiKey(made.key);
      const other = okValue(keys.create(tenant, { name: null, scopes: ["keys"] }));
      return {
        parts: parts && {
          jurisdiction: parts.jurisdiction,
          tenant: parts.tenant,
          keyId: parts.keyId,
        },
        own: keys.verify(made.id, keyDigest(made.key)),
        swapped: keys.verify(other.id, keyDigest(made.key)),
        unknown: keys.verify("key_nope", keyDigest(made.key)),
        truncated: keys.verify(made.id, keyDigest(made.key).subarray(0, 16)),
        stored: sql<{ digest: ArrayBuffer; body: string }>`SELECT digest, body FROM tenant_keys`
          .toArray()
          .map((row) => row.body.includes(parts?.secret ?? "?")),
      };
    });
    expect(result).toEqual({
      parts: { jurisdiction: "eu", tenant: "acme", keyId: expect.stringMatching(/^key_/) },
      own: ["threads", "usage"],
      swapped: undefined,
      unknown: undefined,
      truncated: undefined,
      stored: [false, false],
    });
  });

  it("writes last_used_at at most once a minute, lists keys by creation and revokes them", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const keys = new KeyStore(sql, clock, DEV_ENV);
      const a = okValue(keys.create(tenant, { name: "a", scopes: ["threads"] }));
      clock.at += 1;
      const b = okValue(keys.create(tenant, { name: "b", scopes: ["threads"] }));
      keys.verify(a.id, keyDigest(a.key));
      const first = keys.list({ limit: 10 })?.data[0]?.last_used_at;
      clock.at += 30_000;
      keys.verify(a.id, keyDigest(a.key));
      const soon = keys.list({ limit: 10 })?.data[0]?.last_used_at;
      clock.at += 31_000;
      keys.verify(a.id, keyDigest(a.key));
      const later = keys.list({ limit: 10 })?.data[0]?.last_used_at;
      const page = keys.list({ limit: 1 });
      const rest = page?.next_cursor
        ? keys.list({ limit: 1, cursor: page.next_cursor })
        : undefined;
      return {
        times: [first, soon, later].map((t) => (t ? Date.parse(t) - Date.UTC(2026, 11, 1, 12) : t)),
        pages: [page?.data.map((k) => k.name), rest?.data.map((k) => k.name), rest?.next_cursor],
        badCursor: keys.list({ limit: 1, cursor: "nonsense" }),
        revoked: [keys.revoke(a.id), keys.revoke(a.id), keys.verify(a.id, keyDigest(a.key))],
        left: keys.list({ limit: 10 })?.data.map((k) => k.id),
        b: b.id,
      };
    });
    expect(result.times).toEqual([1, 1, 61_001]);
    expect(result.pages).toEqual([["a"], ["b"], null]);
    expect(result.badCursor).toBe(undefined);
    expect(result.revoked).toEqual([true, false, undefined]);
    expect(result.left).toEqual([result.b]);
  });
});
