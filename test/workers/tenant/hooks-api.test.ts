/**
 * The hook configuration routes (design §12, scope `hooks`, tenant state in the `Tenant`
 * object): generated secrets shown once, the ones Slack and Stripe issue required, templates and
 * secrets checked, listing, deletion (its URL 404 at once here), rotation (both secrets verify),
 * a hook's URL for a tenant with a jurisdiction, and how a rotation through another isolate
 * reaches this one (`worker/hooks.ts`, `worker/hook-cache.ts`).
 */
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { TenantCaller } from "../../../shared/api/index.ts";
import { RECHECK_AFTER_MS } from "../../../worker/hook-cache.ts";
import { api, json } from "../helpers/api.ts";
import { createHook, expectedHookUrl, signedDelivery } from "../helpers/hooks.ts";
import { ADMIN_KEY, tenantWithKey } from "../helpers/tenancy.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const tag = () => crypto.randomUUID().slice(0, 8);

describe("creating hooks", () => {
  it("a generated secret is in the create's answer only, with the hook's URL", async () => {
    const { key, tenant } = await tenantWithKey();
    const res = await api(
      "POST",
      "/v1/hooks",
      {
        id: "hook_ci",
        name: "CI",
        verify: { scheme: "standard" },
        thread: "ci-{{body.pipeline.id}}",
        events: ["pipeline.failed"],
      },
      key,
    );
    const created = await json<Record<string, unknown>>(res, 201);
    expect(res.headers.get("location")).toBe("/v1/hooks/hook_ci");
    const hook = {
      object: "hook",
      id: "hook_ci",
      name: "CI",
      url: expectedHookUrl(null, tenant.id, "hook_ci"),
      verify: { scheme: "standard" },
      thread: "ci-{{body.pipeline.id}}",
      input: null,
      on_busy: "queue",
      dedup: "delivery_id",
      thread_config: null,
      events: ["pipeline.failed"],
      created_at: expect.any(String),
      secret_rotated_at: null,
    };
    expect(created).toEqual({ ...hook, secret: expect.stringMatching(/^whsec_/) });
    expect(await json(await api("GET", "/v1/hooks/hook_ci", undefined, key))).toEqual(hook);
    expect(await json(await api("GET", "/v1/hooks", undefined, key))).toEqual({
      object: "list",
      data: [hook],
      next_cursor: null,
    });
  });

  it("Slack and Stripe hooks need the secret their sender issued, and show none back", async () => {
    const { key } = await tenantWithKey();
    for (const scheme of ["slack", "stripe"]) {
      const missing = await api("POST", "/v1/hooks", { verify: { scheme }, thread: "x" }, key);
      expect(await json(missing, 400)).toMatchObject({
        code: "invalid_request",
        errors: [{ path: "/verify/secret", message: `Required for scheme "${scheme}"` }],
      });
      const given = await json<Record<string, unknown>>(
        await api("POST", "/v1/hooks", { verify: { scheme, secret: "issued" }, thread: "x" }, key),
        201,
      );
      expect("secret" in given).toBe(false);
    }
  });

  it("refuses a template it cannot read, a Standard Webhooks secret too short, an on_busy it has not", async () => {
    const { key } = await tenantWithKey();
    const bodies = [
      { verify: { scheme: "github" }, thread: "gh-{{secrets.token}}" },
      { verify: { scheme: "github" }, thread: "gh", input: "{{body.a" },
      { verify: { scheme: "standard", secret: `whsec_${btoa("short")}` }, thread: "x" },
      { verify: { scheme: "github" }, thread: "x", on_busy: "steer" },
      { verify: { scheme: "carrier-pigeon" }, thread: "x" },
    ];
    const paths = [];
    for (const body of bodies) {
      const problem = await json<{ errors: { path: string }[] }>(
        await api("POST", "/v1/hooks", body, key),
        400,
      );
      paths.push(problem.errors[0]?.path);
    }
    expect(paths).toEqual(["/thread", "/input", "/verify/secret", "/on_busy", "/verify/scheme"]);
  });

  it("need the hooks scope", async () => {
    const { tenant } = await tenantWithKey();
    const limited = await json<{ key: string }>(
      await api("POST", `/v1/admin/tenants/${tenant.id}/keys`, { scopes: ["threads"] }, ADMIN_KEY),
      201,
    );
    expect((await api("GET", "/v1/hooks", undefined, limited.key)).status).toBe(403);
  });

  it("a tenant with a jurisdiction gets URLs that name it; a delivery reaches its objects there", async () => {
    const { key, tenant } = await tenantWithKey({ jurisdiction: "eu" });
    const hook = await createHook("github", {}, key);
    expect(hook.url).toBe(expectedHookUrl("eu", tenant.id, hook.id));
    // Local workerd cannot place objects: watch which namespace is asked for (residency.test.ts).
    const asked: string[] = [];
    for (const namespace of [env.TENANT, env.THREAD as unknown as DurableObjectNamespace]) {
      vi.spyOn(namespace, "jurisdiction").mockImplementation((jurisdiction) => {
        asked.push(jurisdiction);
        return namespace;
      });
    }
    const accepted = await json<{ thread_id: string }>(
      await signedDelivery(hook, { thread: tag() }),
      202,
    );
    expect(asked.length).toBeGreaterThan(0);
    expect(new Set(asked)).toEqual(new Set(["eu"]));
    vi.restoreAllMocks();
    const thread = await api("GET", `/v1/threads/${accepted.thread_id}`, undefined, key);
    expect(thread.status).toBe(200);
  });
});

describe("deleting and rotating", () => {
  it("a deleted hook's URL answers 404 at once through this isolate, and its log goes", async () => {
    const hook = await createHook("github");
    await json(await signedDelivery(hook, { thread: tag() }), 202);
    expect((await api("DELETE", `/v1/hooks/${hook.id}`)).status).toBe(204);
    expect((await signedDelivery(hook, { thread: tag() })).status).toBe(404);
    expect((await api("GET", `/v1/hooks/${hook.id}`)).status).toBe(404);
    expect((await api("GET", `/v1/hooks/${hook.id}/deliveries`)).status).toBe(404);
    expect((await api("DELETE", `/v1/hooks/${hook.id}`)).status).toBe(404);
  });

  it("after a rotation both the new and the previous secret verify", async () => {
    const hook = await createHook("github");
    const rotated = await json<{ secret: string; secret_rotated_at: string | null }>(
      await api("POST", `/v1/hooks/${hook.id}/rotate-secret`, {}),
    );
    expect(rotated.secret).toMatch(/^[0-9a-f]{64}$/);
    expect(rotated.secret).not.toBe(hook.secret);
    expect(rotated.secret_rotated_at).not.toBe(null);
    expect((await signedDelivery(hook, { thread: tag() })).status).toBe(202);
    expect(
      (await signedDelivery({ ...hook, secret: rotated.secret }, { thread: tag() })).status,
    ).toBe(202);
    const given = await json<Record<string, unknown>>(
      await api("POST", `/v1/hooks/${hook.id}/rotate-secret`, { secret: "chosen" }),
    );
    expect("secret" in given).toBe(false);
    expect((await signedDelivery({ ...hook, secret: "chosen" }, { thread: tag() })).status).toBe(
      202,
    );
  });

  it("a secret rotated through another isolate verifies here once the cached hook is a second old", async () => {
    const hook = await createHook("github");
    expect((await signedDelivery(hook, { thread: tag() })).status).toBe(202);
    // Another isolate's rotation: the tenant's object changes, this isolate's cache does not.
    const tenant = env.TENANT.getByName("local") as unknown as {
      rotateHookSecret(caller: TenantCaller, id: string, secret: string): Promise<unknown>;
    };
    await tenant.rotateHookSecret({ incarnation: null }, hook.id, "elsewhere");
    const withNew = { ...hook, secret: "elsewhere" };
    expect((await signedDelivery(withNew, { thread: tag() })).status).toBe(401);
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + RECHECK_AFTER_MS });
    expect((await signedDelivery(withNew, { thread: tag() })).status).toBe(202);
  });
});
