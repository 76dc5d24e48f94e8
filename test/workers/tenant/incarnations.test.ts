/**
 * Tenant incarnations (design §18 invariant 19) and per-hook dedup (invariant 11) under attack:
 * a deleted tenant's hooks stop at once; a tenant id created again shares no key, hook, dedup
 * record, thread or event sequence with the one before, even in an isolate whose caches still
 * hold the old tenant; and one signed delivery is one turn whatever the hook's templates read.
 * Two apps with their own caches and clocks stand for two isolates over the same objects.
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { TenantRpc, WebhookEvent } from "../../../shared/api/index.ts";
import { createApp } from "../../../worker/app.ts";
import { HookCache, RECHECK_AFTER_MS } from "../../../worker/hook-cache.ts";
import { KeyCache } from "../../../worker/key-cache.ts";
import { bodyOf, type Scheme, signedHeaders } from "../helpers/hooks.ts";
import { ADMIN_KEY, incarnationOf, newTenantId, tenantWithKey } from "../helpers/tenancy.ts";
import { createEndpoint, deliveriesOf, queueMessage } from "../helpers/webhooks.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

/** An isolate: its own app, key cache and hook cache, with a clock the test moves. */
function isolate() {
  const clock = { now: Date.now() };
  const app = createApp({
    keyCache: new KeyCache({ nowMs: () => clock.now }),
    hookCache: new HookCache({ nowMs: () => clock.now }),
  });
  const ctx = {
    waitUntil: () => {},
    passThroughOnException: () => {},
    props: {},
  } as unknown as ExecutionContext;
  const send = (url: string, init: RequestInit) => app.fetch(new Request(url, init), env, ctx);
  const request = (method: string, path: string, key: string, body?: unknown) =>
    send(`http://spindle.test${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const deliver = (url: string, body: string, headers: Record<string, string>) =>
    send(url, { method: "POST", headers, body });
  return { clock, request, deliver };
}

type Isolate = ReturnType<typeof isolate>;

interface Hook {
  id: string;
  url: string;
  secret: string;
  verify: { scheme: Scheme };
}

async function ok<T>(res: Response, status: number): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return JSON.parse(text) as T;
}

/** A tenant with a key (through isolate `a`) and a standard hook whose thread reads the body. */
async function tenantWithHook(a: Isolate, id = newTenantId()) {
  await ok(await a.request("POST", "/v1/admin/tenants", ADMIN_KEY, { id }), 201);
  const { key } = await ok<{ key: string }>(
    await a.request("POST", `/v1/admin/tenants/${id}/keys`, ADMIN_KEY, {}),
    201,
  );
  const hook = await ok<Hook>(
    await a.request("POST", "/v1/hooks", key, {
      id: "inbound",
      verify: { scheme: "standard" },
      thread: "t-{{body.thread}}",
    }),
    201,
  );
  return { id, key, hook };
}

/** A signed Standard Webhooks delivery of `fields` with the sender id `deliveryId`. */
function signed(hook: Hook, fields: Record<string, unknown>, deliveryId: string) {
  const body = bodyOf("standard", fields, deliveryId);
  return { body, headers: signedHeaders("standard", hook.secret, body, { id: deliveryId }) };
}

/** Runs the tenant's deletion to its end, each alarm run in a new instance of its object. */
async function finishDeletion(a: Isolate, id: string): Promise<void> {
  const object = env.TENANT.getByName(id);
  await vi.waitFor(
    async () => {
      await evictDurableObject(object);
      await runDurableObjectAlarm(object);
      expect((await a.request("GET", `/v1/admin/tenants/${id}`, ADMIN_KEY)).status).toBe(404);
    },
    { timeout: 10_000, interval: 50 },
  );
}

async function threadIds(a: Isolate, key: string): Promise<string[]> {
  const page = await ok<{ data: { id: string }[] }>(
    await a.request("GET", "/v1/threads", key),
    200,
  );
  return page.data.map((t) => t.id);
}

describe("a deleted tenant", () => {
  it("stops taking its hooks' deliveries at once, in every isolate", async () => {
    const a = isolate();
    const b = isolate();
    const { id, hook } = await tenantWithHook(a);
    // Both isolates read the hook (and cache it) with a first delivery.
    for (const [i, iso] of [a, b].entries()) {
      const first = signed(hook, { thread: "x" }, `first-${i}`);
      await ok(await iso.deliver(hook.url, first.body, first.headers), 202);
    }
    await ok(await a.request("DELETE", `/v1/admin/tenants/${id}`, ADMIN_KEY), 202);
    for (const [i, iso] of [a, b].entries()) {
      const late = signed(hook, { thread: "x" }, `late-${i}`);
      expect((await iso.deliver(hook.url, late.body, late.headers)).status).toBe(404);
    }
  });
});

describe("a tenant id created again", () => {
  it("takes nothing of the one before: old hook secrets, old keys, dedup records, threads, sequences", async () => {
    const a = isolate();
    const b = isolate();
    const { id, key: oldKey, hook: oldHook } = await tenantWithHook(a);
    const old = signed(oldHook, { thread: "same" }, "dlv-reused");
    await ok(await b.deliver(oldHook.url, old.body, old.headers), 202);
    expect(await threadIds(b, oldKey)).toEqual(["t-same"]);

    await ok(await a.request("DELETE", `/v1/admin/tenants/${id}`, ADMIN_KEY), 202);
    await finishDeletion(a, id);
    // The same id again, with a hook of the same id and a new secret.
    const again = await tenantWithHook(a, id);
    expect(again.hook.secret).not.toBe(oldHook.secret);

    // Isolate b still holds the old key and the old hook (secret) in its caches.
    const replay = signed(oldHook, { thread: "injected" }, "dlv-new");
    expect((await b.deliver(oldHook.url, replay.body, replay.headers)).status).toBe(404);
    expect((await b.request("GET", "/v1/threads", oldKey)).status).toBe(401);
    expect(
      (
        await b.request("POST", "/v1/hooks", oldKey, {
          thread: "x",
          verify: { scheme: "standard" },
        })
      ).status,
    ).toBe(401);
    expect((await b.request("POST", "/v1/keys", oldKey, {})).status).toBe(401);
    // A thread the old key creates within its 30 s lives in the old incarnation: the new tenant
    // never sees it.
    await b.request("POST", "/v1/threads", oldKey, { id: "stale" });
    expect(await threadIds(a, again.key)).toEqual([]);
    expect((await a.request("GET", "/v1/threads/stale", again.key)).status).toBe(404);

    // The new hook's own secret works in b as soon as the entry it holds may be read again.
    b.clock.now += RECHECK_AFTER_MS;
    const fresh = signed(again.hook, { thread: "same" }, "dlv-reused");
    const accepted = await ok<{ status: string; thread_id: string; turn_id: string }>(
      await b.deliver(again.hook.url, fresh.body, fresh.headers),
      202,
    );
    // The old tenant's delivery id is not a duplicate here, and the thread starts afresh.
    expect(accepted).toMatchObject({ status: "accepted", thread_id: "t-same" });
    const thread = await ok<{ turn_count: number }>(
      await a.request("GET", "/v1/threads/t-same", again.key),
      200,
    );
    expect(thread.turn_count).toBeLessThanOrEqual(1);
    const events = await a.request("GET", "/v1/threads/t-same/events?after=0", again.key);
    expect(events.status).toBe(200);
    const reader = events.body?.getReader();
    const { value } = (await reader?.read()) ?? {};
    await reader?.cancel();
    const firstId = /^id: (\d+)$/m.exec(new TextDecoder().decode(value))?.[1];
    expect(Number(firstId)).toBe(1);
    expect(await threadIds(a, again.key)).toEqual(["t-same"]);
  });

  it("never reaches an object of the incarnation before it", async () => {
    const a = isolate();
    const { id, key } = await tenantWithHook(a);
    await ok(await a.request("POST", "/v1/threads", key, { id: "kept" }), 201);
    const names = new Set<string>();
    const getByName = env.THREAD.getByName.bind(env.THREAD);
    vi.spyOn(env.THREAD, "getByName").mockImplementation((name: string) => {
      names.add(name);
      return getByName(name);
    });
    await ok(await a.request("DELETE", `/v1/admin/tenants/${id}`, ADMIN_KEY), 202);
    await finishDeletion(a, id);
    const oldNames = new Set(names);
    names.clear();
    const again = await tenantWithHook(a, id);
    await ok(await a.request("POST", "/v1/threads", again.key, { id: "kept" }), 201);
    const [newName] = [...names].filter((n) => n.endsWith(":kept"));
    expect(newName).toBeDefined();
    expect([...oldNames].filter((n) => n.endsWith(":kept"))).not.toContain(newName);
    // Each thread object is named `{tenant}.{incarnation}:{thread}`.
    expect(newName).toMatch(new RegExp(`^${id}\\.[A-Za-z0-9]+:kept$`));
    const incarnation = await runInDurableObject(env.TENANT.getByName(id), (_, state) =>
      state.storage.sql
        .exec<{ value: string }>("SELECT value FROM tenant_meta WHERE key = 'incarnation'")
        .one(),
    );
    expect(newName).toBe(`${id}.${JSON.parse(incarnation.value)}:kept`);
  });
});

describe("one delivery is one turn whatever the template", () => {
  it("a thread template reading a header cannot split a signed delivery into many", async () => {
    const a = isolate();
    const { key } = await tenantWithHook(a);
    const hook = await ok<Hook>(
      await a.request("POST", "/v1/hooks", key, {
        verify: { scheme: "standard" },
        thread: "conv-{{headers.x-conversation}}",
      }),
      201,
    );
    const { body, headers } = signed(hook, { text: "hi" }, "dlv-split");
    const answers = [];
    for (const conversation of ["a", "b", "c", "d", "e"]) {
      const res = await a.deliver(hook.url, body, { ...headers, "x-conversation": conversation });
      answers.push({ code: res.status, ...((await res.json()) as { thread_id: string }) });
    }
    expect(answers.map((x) => x.code)).toEqual([202, 200, 200, 200, 200]);
    expect(new Set(answers.map((x) => x.thread_id))).toEqual(new Set(["conv-a"]));
    expect(await threadIds(a, key)).toEqual(["conv-a"]);
  });

  it("a GitHub body replayed with new delivery ids, or relabelled, starts nothing more", async () => {
    const a = isolate();
    const { key } = await tenantWithHook(a);
    const hook = await ok<Hook>(
      await a.request("POST", "/v1/hooks", key, {
        verify: { scheme: "github" },
        thread: "gh-{{body.issue.number}}",
        events: ["issue_comment"],
      }),
      201,
    );
    const body = bodyOf("github", { issue: { number: 7 } }, "c-1");
    const statuses = [];
    for (const delivery of ["g-1", "g-2", "g-3"]) {
      const res = await a.deliver(
        hook.url,
        body,
        signedHeaders("github", hook.secret, body, { id: delivery }),
      );
      statuses.push(res.status);
    }
    expect(statuses).toEqual([202, 200, 200]);
    // A ping (ignored) relabelled as the event the hook takes is refused: its body says ping.
    const ping = JSON.stringify({ zen: "Keep it logically awesome.", hook_id: 1 });
    const relabelled = await a.deliver(
      hook.url,
      ping,
      signedHeaders("github", hook.secret, ping, { id: "g-ping", event: "issue_comment" }),
    );
    expect(relabelled.status).toBe(400);
    const asPing = await a.deliver(
      hook.url,
      ping,
      signedHeaders("github", hook.secret, ping, { id: "g-ping2", event: "ping" }),
    );
    expect(await ok(asPing, 202)).toMatchObject({ status: "ignored" });
    expect(await threadIds(a, key)).toEqual(["gh-7"]);
  });
});

describe("events of another incarnation", () => {
  it("are taken by no endpoint of the tenant id created again", async () => {
    const { tenant, key } = await tenantWithKey();
    const endpoint = await createEndpoint(key, { events: ["turn.completed"] });
    const object = env.TENANT.get(env.TENANT.idFromName(tenant.id)) as unknown as TenantRpc;
    const current = await incarnationOf(tenant.id);
    const event = (webhookId: string, incarnation: string | null): WebhookEvent => {
      const { handoff: _, ...message } = queueMessage(tenant.id, endpoint.id, webhookId);
      return { ...message, incarnation };
    };
    await object.enqueueWebhooks([event("msg_old", "an0ther1ncarn"), event("msg_now", current)]);
    const listed = (await deliveriesOf(key, endpoint.id)).map((d) => d.id);
    expect(listed).toContain("msg_now");
    expect(listed).not.toContain("msg_old");
  });
});
