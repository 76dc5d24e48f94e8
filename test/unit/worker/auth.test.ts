import { describe, expect, it, vi } from "vitest";
import { SCOPES } from "../../../shared/api/index.ts";
import { DEV_ADMIN_KEY, DEV_API_KEY, principalForKey } from "../../../worker/auth.ts";
import {
  apiKeys,
  FakeThreads,
  keyA,
  keyB,
  problemOf,
  setup,
  sha256Hex,
  thread,
} from "./fake-thread.ts";

const unauthorized = (detail: string) => ({
  type: "/problems/unauthorized",
  title: "Authentication is required",
  status: 401,
  detail,
  code: "unauthorized",
});

describe("authenticate", () => {
  it("a request without a key is unauthorized and gets a Bearer challenge", async () => {
    const { request, fake } = setup();
    const res = await request("/v1/threads/t1", { key: "" });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="spindle"');
    expect(await problemOf(res)).toEqual(
      unauthorized("Send an API key as `Authorization: Bearer <key>`."),
    );
    expect(fake.names).toEqual([]);
  });

  it("a key that is not configured is unauthorized and names the token invalid", async () => {
    const { request, fake } = setup();
    const res = await request("/v1/threads/t1", { key: "sk-nobody" });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe(
      'Bearer realm="spindle", error="invalid_token"',
    );
    expect(await problemOf(res)).toEqual(unauthorized("The API key is not valid."));
    expect(fake.names).toEqual([]);
  });

  it("a key sent with another scheme than Bearer is not accepted", async () => {
    const { request } = setup();
    const res = await request("/v1/threads/t1", { headers: { authorization: `Basic ${keyA}` } });
    expect(res.status).toBe(401);
  });

  it("the Bearer scheme name is case-insensitive", async () => {
    const { request, fake } = setup();
    const res = await request("/v1/threads/t1", { headers: { authorization: `bearer ${keyA}` } });
    expect(res.status).toBe(404);
    expect(fake.names).toEqual(["A:t1"]);
  });

  it("a configured key addresses the thread as the DO named {tenant}:{thread}", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await request("/v1/threads/t1", { key: keyA });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(thread("t1"));
    expect(fake.names).toEqual(["A:t1"]);
  });

  it("each configured key resolves to its own tenant", async () => {
    const { request, fake } = setup();
    await request("/v1/threads/t1", { key: keyA });
    await request("/v1/threads/t1", { key: keyB });
    expect(fake.names).toEqual(["A:t1", "B:t1"]);
  });

  it("invariant 9: one tenant's key never reaches another tenant's thread", async () => {
    const { request, json, fake } = setup();
    expect((await json("/v1/threads", { id: "shared" }, { key: keyA })).status).toBe(201);

    const asB = [
      await request("/v1/threads/shared", { key: keyB }),
      await json("/v1/threads/shared/turns", { input: "hi" }, { key: keyB }),
      await request("/v1/threads/shared", { key: keyB, method: "DELETE" }),
    ];
    expect(asB.map((r) => r.status)).toEqual([404, 404, 404]);
    expect(fake.names).toEqual(["A:shared", "B:shared", "B:shared", "B:shared"]);
    expect([...fake.threads.keys()]).toEqual(["A:shared"]);
  });

  it("a thread id holding a colon is rejected before any DO is addressed", async () => {
    const { request, fake } = setup();
    const res = await request("/v1/threads/B:t1", { key: keyA });
    expect(res.status).toBe(400);
    expect(fake.names).toEqual([]);
  });

  it("the development key is rejected when SPINDLE_ENV is production", async () => {
    const { request, fake } = setup({ SPINDLE_ENV: "production" });
    const res = await request("/v1/threads/t1", { key: DEV_API_KEY });
    expect(res.status).toBe(401);
    expect(fake.names).toEqual([]);
  });

  it("the development key is rejected when SPINDLE_ENV is unset", async () => {
    const { request } = setup({ SPINDLE_ENV: undefined });
    expect((await request("/v1/threads/t1", { key: DEV_API_KEY })).status).toBe(401);
  });

  it("the development key reaches the `local` tenant in development", async () => {
    const { request, fake } = setup({ SPINDLE_ENV: "development", SPINDLE_API_KEYS: undefined });
    const res = await request("/v1/threads/t1", { key: DEV_API_KEY });
    expect(res.status).toBe(404);
    expect(fake.names).toEqual(["local:t1"]);
  });

  it("configured keys keep working in development", async () => {
    const { request, fake } = setup({ SPINDLE_ENV: "development" });
    await request("/v1/threads/t1", { key: keyB });
    expect(fake.names).toEqual(["B:t1"]);
  });

  it("a production worker with no keys configured rejects every request", async () => {
    for (const keys of [undefined, "", "{}"]) {
      const { request, fake } = setup({ SPINDLE_API_KEYS: keys });
      const statuses = [
        (await request("/v1/threads/t1", { key: keyA })).status,
        (await request("/v1/threads/t1", { key: DEV_API_KEY })).status,
        (await request("/v1/threads/t1", { key: "" })).status,
      ];
      expect(statuses).toEqual([401, 401, 401]);
      expect(fake.names).toEqual([]);
    }
  });

  it("a malformed SPINDLE_API_KEYS fails closed and keeps its content out of the logs", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const malformed = [
        `not json ${keyA}`,
        JSON.stringify({ [keyA]: "A" }),
        JSON.stringify({ [sha256Hex(keyA).toUpperCase()]: "A" }),
        JSON.stringify({ [sha256Hex(keyA)]: "bad:tenant" }),
        JSON.stringify([sha256Hex(keyA)]),
      ];
      for (const keys of malformed) {
        const { request, fake } = setup({ SPINDLE_API_KEYS: keys });
        const res = await request("/v1/threads/t1", { key: keyA });
        expect(await problemOf(res)).toEqual({
          type: "/problems/internal",
          title: "Internal error",
          status: 500,
          detail:
            "The server's API keys are misconfigured (SPINDLE_API_KEYS: sha256 hex → tenant id).",
          code: "internal",
        });
        expect(fake.names).toEqual([]);
      }
      expect(log).toHaveBeenCalledTimes(malformed.length);
      const logged = JSON.stringify(log.mock.calls.map((args) => args.map(String)));
      expect(logged).not.toContain(keyA);
      expect(logged).not.toContain(sha256Hex(keyA));
    } finally {
      log.mockRestore();
    }
  });

  it("a secret rotated between requests takes effect at once", async () => {
    const { app, fake, env } = setup();
    const rotated = { ...env, SPINDLE_API_KEYS: JSON.stringify({ [sha256Hex(keyB)]: "A" }) };
    const get = (key: string, e: typeof env) =>
      app.request("/v1/threads/t1", { headers: { authorization: `Bearer ${key}` } }, e);
    expect((await get(keyA, env)).status).toBe(404);
    expect((await get(keyA, rotated)).status).toBe(401);
    expect((await get(keyB, rotated)).status).toBe(404);
    expect(fake.names).toEqual(["A:t1", "A:t1"]);
    expect(apiKeys).not.toContain(keyA);
  });

  it("the liveness probe needs no key", async () => {
    const { request } = setup({ SPINDLE_API_KEYS: undefined });
    const res = await request("/healthz", { key: "" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, service: "spindle" });
  });
});

describe("principalForKey", () => {
  it("compares the digest with every configured one, even after a match", async () => {
    // Node lacks the Workers-only `timingSafeEqual`; install a recording one for this test.
    const subtle = crypto.subtle as unknown as {
      timingSafeEqual?: (a: Uint8Array, b: Uint8Array) => boolean;
    };
    const compared: [number, number][] = [];
    subtle.timingSafeEqual = (a: Uint8Array, b: Uint8Array) => {
      compared.push([a.byteLength, b.byteLength]);
      return Buffer.from(a).equals(Buffer.from(b));
    };
    try {
      const keys = { [sha256Hex(keyA)]: "A", [sha256Hex(keyB)]: "B", [sha256Hex("sk-c")]: "C" };
      const env = new FakeThreads().env({
        SPINDLE_ENV: "development",
        SPINDLE_API_KEYS: JSON.stringify(keys),
      });
      const tenantOf = async (key: string) => {
        const principal = await principalForKey(key, env);
        return principal?.kind === "tenant" ? principal.tenant : principal?.kind;
      };
      expect(await tenantOf(keyA)).toBe("A");
      expect(await tenantOf("sk-c")).toBe("C");
      expect(await tenantOf(DEV_API_KEY)).toBe("local");
      expect(await tenantOf("sk-none")).toBe(undefined);
      // Five entries (three configured, the two development keys) compared for each of four keys.
      expect(compared).toEqual(Array.from({ length: 20 }, () => [32, 32]));
    } finally {
      delete subtle.timingSafeEqual;
    }
  });

  it("several keys may name the same tenant, so a key can be rotated", async () => {
    const keys = { [sha256Hex("sk-old")]: "A", [sha256Hex("sk-new")]: "A" };
    const env = new FakeThreads().env({ SPINDLE_API_KEYS: JSON.stringify(keys) });
    const principals = [await principalForKey("sk-old", env), await principalForKey("sk-new", env)];
    expect(principals).toEqual([
      { kind: "tenant", tenant: "A", keyId: null, scopes: SCOPES, policy: undefined },
      { kind: "tenant", tenant: "A", keyId: null, scopes: SCOPES, policy: undefined },
    ]);
  });

  it("an admin key of SPINDLE_ADMIN_KEYS is an admin, and sk-local-admin only in development", async () => {
    const admin = JSON.stringify([sha256Hex("sk-operator")]);
    const production = new FakeThreads().env({ SPINDLE_ADMIN_KEYS: admin });
    const development = new FakeThreads().env({ SPINDLE_ENV: "development" });
    expect(await principalForKey("sk-operator", production)).toEqual({ kind: "admin" });
    expect(await principalForKey(DEV_ADMIN_KEY, production)).toBe(undefined);
    expect(await principalForKey(DEV_ADMIN_KEY, development)).toEqual({ kind: "admin" });
  });
});
