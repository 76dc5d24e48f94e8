import { describe, expect, it } from "vitest";
import type { Principal } from "../../../worker/app-env.ts";
import { KEY_CACHE_TTL_MS, KeyCache } from "../../../worker/key-cache.ts";

const principal = (tenant: string, keyId: string): Extract<Principal, { kind: "tenant" }> => ({
  kind: "tenant",
  tenant,
  keyId,
  scopes: ["threads"],
  policy: undefined,
});

describe("KeyCache", () => {
  it("trusts a key for the TTL counted from when its verification was asked, never longer", () => {
    const clock = { now: 10_000 };
    const cache = new KeyCache({ nowMs: () => clock.now });
    const askedAt = clock.now;
    clock.now += 250; // the verification's round trip
    cache.set("d1", principal("acme", "key_1"), askedAt);
    clock.now = askedAt + KEY_CACHE_TTL_MS - 1;
    expect(cache.get("d1")).toEqual(principal("acme", "key_1"));
    clock.now = askedAt + KEY_CACHE_TTL_MS;
    expect(cache.get("d1")).toBe(undefined);
    expect(KEY_CACHE_TTL_MS).toBe(30_000);
  });

  it("forgets one key of a tenant, or all of them", () => {
    const cache = new KeyCache({ nowMs: () => 0 });
    cache.set("a1", principal("acme", "key_1"), 0);
    cache.set("a2", principal("acme", "key_2"), 0);
    cache.set("g1", principal("globex", "key_3"), 0);
    cache.forget("acme", "key_1");
    expect([cache.get("a1"), cache.get("a2")?.keyId, cache.get("g1")?.keyId]).toEqual([
      undefined,
      "key_2",
      "key_3",
    ]);
    cache.forget("acme");
    expect([cache.get("a2"), cache.get("g1")?.keyId]).toEqual([undefined, "key_3"]);
  });

  it("holds at most its bound of entries, dropping the oldest first", () => {
    const cache = new KeyCache({ nowMs: () => 0, maxEntries: 2 });
    cache.set("one", principal("t", "key_1"), 0);
    cache.set("two", principal("t", "key_2"), 0);
    cache.set("three", principal("t", "key_3"), 0);
    expect([cache.get("one"), cache.get("two")?.keyId, cache.get("three")?.keyId]).toEqual([
      undefined,
      "key_2",
      "key_3",
    ]);
  });
});
