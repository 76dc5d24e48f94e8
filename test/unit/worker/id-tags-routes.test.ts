import { afterEach, describe, expect, it, vi } from "vitest";
import { IdTags } from "../../../durable-objects/tenant/id-tags.ts";
import type { Env } from "../../../env.ts";
import { hookPath, type Jurisdiction } from "../../../shared/api/index.ts";
import { createApp } from "../../../worker/app.ts";
import { HookCache } from "../../../worker/hook-cache.ts";
import { KeyCache } from "../../../worker/key-cache.ts";
import { apiKeys, FakeThreads, keyA, problemOf, sha256Hex } from "./fake-thread.ts";

/**
 * Design §18 invariant 20 at the edge: a forged tenant key or hook URL is refused before any
 * object is addressed (the `TENANT` namespace here records every name it is asked for), with the
 * 401 or 404 of any other failure; one the service tagged reaches its tenant's object.
 */

const SECRET = "the unit suite's id secret";
const tags = new IdTags(SECRET, false);

/** A `TENANT` namespace whose objects know no key and no hook. */
class FakeTenants {
  readonly names: string[] = [];
  readonly calls: string[] = [];
  readonly namespace = {
    getByName: (name: string) => {
      this.names.push(name);
      const answer = (method: string, code: string) => async () => {
        this.calls.push(method);
        return { ok: false, error: { code, detail: `the fake ${name} has none` } };
      };
      return {
        verifyKey: answer("verifyKey", "unauthorized"),
        hookTarget: answer("hookTarget", "not_found"),
        createHook: answer("createHook", "internal"),
        listHooks: answer("listHooks", "internal"),
      };
    },
    // Production asks for the jurisdiction's namespace: the same objects here.
    jurisdiction: () => this.namespace,
  };
}

function setup(vars: Partial<Env> = {}) {
  const tenants = new FakeTenants();
  const env = {
    ...new FakeThreads().env({ SPINDLE_ENV: "production", SPINDLE_API_KEYS: apiKeys }),
    TENANT: tenants.namespace,
    TENANT_DIRECTORY: tenants.namespace,
    SPINDLE_ID_SECRET: SECRET,
    ...vars,
  } as unknown as Env;
  const app = createApp({ keyCache: new KeyCache(), hookCache: new HookCache() });
  const get = (key: string, path = "/v1/threads") =>
    app.request(path, { headers: { authorization: `Bearer ${key}` } }, env);
  const deliver = (path: string) =>
    app.request(
      path,
      { method: "POST", headers: { "content-type": "application/json" }, body: "{}" },
      env,
    );
  return { app, env, tenants, get, deliver };
}

const SECRET_PART = "S".repeat(43);
const keyOf = (place: string, tenant: string, keyId: string) =>
  `sk_${place}.${tenant}.${keyId}.${SECRET_PART}`;
const hookUrl = (jurisdiction: Jurisdiction, tenant: string, hookId: string, tag: string | null) =>
  hookPath({ jurisdiction, tenant, hookId, tag });

const randomHex = (n: number) =>
  Array.from(crypto.getRandomValues(new Uint8Array(n / 2)), (b) =>
    b.toString(16).padStart(2, "0"),
  ).join("");

afterEach(() => {
  vi.restoreAllMocks();
});

describe("tenant keys", () => {
  it("a forged key is the same 401 as any invalid key, and addresses no object", async () => {
    const { get, tenants } = setup();
    const acmeId = tags.newKeyId(null, "acme");
    const forged = [
      keyOf("g", "nobody", `key_${"a".repeat(16)}${randomHex(32)}`),
      keyOf("eu", "nobody", `key_${"b".repeat(16)}${randomHex(32)}`),
      keyOf("g", "acme", `key_${"c".repeat(16)}${randomHex(32)}`),
      // The tenant's own key id, presented for another tenant or another jurisdiction.
      keyOf("g", "acme2", acmeId),
      keyOf("eu", "acme", acmeId),
      keyOf("fedramp", "acme", acmeId),
      // Made with another deployment's secret.
      keyOf("g", "acme", new IdTags("another secret", false).newKeyId(null, "acme")),
      // Made before tags existed.
      keyOf("g", "acme", "key_a1B2c3D4e5F6g7H8"),
    ];
    for (const key of forged) {
      const res = await get(key);
      expect({ key, status: res.status }).toEqual({ key, status: 401 });
      expect(res.headers.get("www-authenticate")).toBe(
        'Bearer realm="spindle", error="invalid_token"',
      );
      expect(await problemOf(res)).toMatchObject({
        code: "unauthorized",
        detail: "The API key is not valid.",
      });
    }
    expect(tenants.names).toEqual([]);
  });

  it("a key the service tagged reaches its tenant's object, whose answer decides", async () => {
    const { get, tenants } = setup();
    expect((await get(keyOf("g", "acme", tags.newKeyId(null, "acme")))).status).toBe(401);
    expect((await get(keyOf("eu", "acme", tags.newKeyId("eu", "acme")))).status).toBe(401);
    expect(tenants.names).toEqual(["acme", "acme"]);
    expect(tenants.calls).toEqual(["verifyKey", "verifyKey"]);
  });

  it("an untagged key reaches its object only with SPINDLE_ACCEPT_UNTAGGED_IDS=true", async () => {
    const untagged = keyOf("g", "acme", "key_a1B2c3D4e5F6g7H8");
    const wrongTag = keyOf("g", "acme", `key_${"c".repeat(16)}${randomHex(32)}`);
    const off = setup({ SPINDLE_ACCEPT_UNTAGGED_IDS: "false" });
    expect((await off.get(untagged)).status).toBe(401);
    expect(off.tenants.names).toEqual([]);
    const on = setup({ SPINDLE_ACCEPT_UNTAGGED_IDS: "true" });
    expect((await on.get(untagged)).status).toBe(401);
    expect((await on.get(wrongTag)).status).toBe(401);
    expect(on.tenants.names).toEqual(["acme"]);
  });
});

describe("hook URLs", () => {
  it("a forged hook URL is the same 404 as an unknown hook, and addresses no object", async () => {
    const { deliver, tenants } = setup();
    const tag = tags.hookTag(null, "acme", "hook_ci");
    for (const path of [
      hookUrl(null, "nobody", "hook_ci", randomHex(32)),
      hookUrl("eu", "nobody", "hook_ci", randomHex(32)),
      hookUrl(null, "acme", "hook_other", randomHex(32)),
      // The hook's own tag, on another tenant, jurisdiction or hook id.
      hookUrl(null, "acme2", "hook_ci", tag),
      hookUrl("fedramp", "acme", "hook_ci", tag),
      hookUrl(null, "acme", "hook_cd", tag),
      hookUrl(null, "acme", "hook_ci", tag.toUpperCase()),
      hookUrl(null, "acme", "hook_ci", `${tag}0`),
      // Made before tags existed.
      hookUrl(null, "acme", "hook_ci", null),
    ]) {
      const res = await deliver(path);
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
      expect(await problemOf(res)).toMatchObject({ code: "not_found", detail: "No such hook." });
    }
    expect(tenants.names).toEqual([]);
  });

  it("a URL the service tagged reaches its tenant's object, whose answer decides", async () => {
    const { deliver, tenants } = setup();
    const path = hookUrl("eu", "acme", "hook_ci", tags.hookTag("eu", "acme", "hook_ci"));
    expect((await deliver(path)).status).toBe(404);
    expect(tenants.names).toEqual(["acme"]);
    expect(tenants.calls).toEqual(["hookTarget"]);
  });

  it("an untagged URL reaches its object only with SPINDLE_ACCEPT_UNTAGGED_IDS=true", async () => {
    const { deliver, tenants } = setup({ SPINDLE_ACCEPT_UNTAGGED_IDS: "true" });
    expect((await deliver(hookUrl(null, "acme", "hook_ci", null))).status).toBe(404);
    expect((await deliver(hookUrl(null, "acme", "hook_ci", randomHex(32)))).status).toBe(404);
    expect(tenants.names).toEqual(["acme"]);
  });
});

describe("a production deployment without SPINDLE_ID_SECRET", () => {
  it("refuses tenant keys, hook deliveries and new hooks and keys with a 500 naming it, logged once each", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    const admin = "sk-operator";
    const { app, env, get, deliver, tenants } = setup({
      SPINDLE_ID_SECRET: undefined,
      SPINDLE_ADMIN_KEYS: JSON.stringify([sha256Hex(admin)]),
    });
    const post = (path: string, key: string, body: unknown) =>
      app.request(
        path,
        {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        },
        env,
      );
    const answers = [
      await get(keyOf("g", "acme", tags.newKeyId(null, "acme"))),
      await deliver(hookUrl(null, "acme", "hook_ci", tags.hookTag(null, "acme", "hook_ci"))),
      await post("/v1/hooks", keyA, { thread: "t", verify: { scheme: "standard" } }),
      await get(keyA, "/v1/hooks"),
      await post("/v1/admin/tenants/acme/keys", admin, {}),
    ];
    for (const res of answers) {
      expect(await problemOf(res)).toEqual({
        type: "/problems/internal",
        title: "Internal error",
        status: 500,
        detail:
          "The server's id secret is not set (SPINDLE_ID_SECRET): tenant keys and hooks are refused.",
        code: "internal",
      });
    }
    expect(log).toHaveBeenCalledTimes(answers.length);
    expect(tenants.names).toEqual([]);
    // Static keys need no tag.
    expect((await get(keyA, "/v1/threads/t1")).status).toBe(404);
  });
});
