/**
 * Tenant quotas (design §11, §15 invariant 13): each refuses with 429 `quota_exceeded` naming it
 * (`Retry-After` for `tokens_per_day`), before anything is recorded or the provider is called,
 * and never cuts a task that runs.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, type MockInstance, vi } from "vitest";
import { api, importRollout, json, newThreadId, readSse, untilRunning } from "../helpers/api.ts";
import { answerEvents, responsesStream } from "../helpers/openai.ts";
import { ADMIN_KEY, tenantWithKey, threadObjectOf } from "../helpers/tenancy.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

interface Turn {
  id: string;
  status: string;
  pending_calls: { call_id: string }[];
  error: { code: string; message: string } | null;
}

/** Answers the openai provider's requests, counting them. */
function remoteModel(): MockInstance {
  return vi.spyOn(globalThis, "fetch").mockImplementation(async () => {
    const body = responsesStream(answerEvents("Upstream answer"));
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
}

async function expectQuota(res: Response, quota: string, retryAfter: "none" | "until tomorrow") {
  const problem = await json<Record<string, unknown>>(res, 429);
  expect(problem).toMatchObject({ status: 429, code: "quota_exceeded", quota });
  expect(res.headers.get("content-type")).toBe("application/problem+json");
  const header = res.headers.get("retry-after");
  if (retryAfter === "none") {
    expect(header).toBe(null);
  } else {
    const now = Date.now();
    const midnight = Date.UTC(
      new Date(now).getUTCFullYear(),
      new Date(now).getUTCMonth(),
      new Date(now).getUTCDate() + 1,
    );
    const seconds = Number(header);
    expect(Math.abs(seconds - (midnight - now) / 1000)).toBeLessThan(60);
  }
}

const turn = (key: string, id: string, body: Record<string, unknown>) =>
  api("POST", `/v1/threads/${id}/turns`, body, key);

async function newThread(key: string, body: Record<string, unknown> = {}): Promise<string> {
  const id = newThreadId();
  await json(await api("POST", "/v1/threads", { id, ...body }, key), 201);
  return id;
}

describe("max_threads", () => {
  it("refuses a create, a fork and an import past the limit, and a delete makes room", async () => {
    const { tenant, key } = await tenantWithKey({ quotas: { max_threads: 2 } });
    const first = await newThread(key);
    const second = await newThread(key);
    const exported = await (
      await api("GET", `/v1/threads/${first}/rollout`, undefined, key)
    ).text();
    await expectQuota(await api("POST", "/v1/threads", {}, key), "max_threads", "none");
    await expectQuota(
      await api("POST", `/v1/threads/${first}/fork`, {}, key),
      "max_threads",
      "none",
    );
    await expectQuota(await importRollout(undefined, exported, {}, { key }), "max_threads", "none");
    expect((await api("DELETE", `/v1/threads/${second}`, undefined, key)).status).toBe(204);
    await vi.waitFor(
      async () => expect((await api("POST", "/v1/threads", {}, key)).status).toBe(201),
      {
        timeout: 5_000,
        interval: 20,
      },
    );
    // Raised: takes effect at once through this isolate.
    await json(
      await api(
        "PATCH",
        `/v1/admin/tenants/${tenant.id}`,
        { quotas: { max_threads: 3 } },
        ADMIN_KEY,
      ),
    );
    expect((await api("POST", "/v1/threads", {}, key)).status).toBe(201);
  });

  it("a create refused for another reason gives its reservation back", async () => {
    const { key } = await tenantWithKey({ quotas: { max_threads: 1 } });
    const unknownModel = await api("POST", "/v1/threads", { model: "no-such-model" }, key);
    expect(unknownModel.status).toBe(400);
    const broken = await importRollout(undefined, "not json\n", {}, { key });
    expect(broken.status).toBe(400);
    await vi.waitFor(
      async () => expect((await api("POST", "/v1/threads", {}, key)).status).toBe(201),
      {
        timeout: 5_000,
        interval: 20,
      },
    );
  });
});

describe("max_running_turns", () => {
  it("refuses a turn while as many run elsewhere, and admits it once one ended", async () => {
    const { key } = await tenantWithKey({ quotas: { max_running_turns: 1 } });
    const [a, b] = [await newThread(key), await newThread(key)];
    const slow = turn(key, a, { input: "/slow 300 hold the slot" });
    await untilRunning(a, key);
    await expectQuota(await turn(key, b, { input: "me too" }), "max_running_turns", "none");
    await expectQuota(
      await api("POST", `/v1/threads/${b}/compact`, undefined, key),
      "max_running_turns",
      "none",
    );
    // The running thread itself may queue behind its own turn.
    const queued = await json<Turn>(await turn(key, a, { input: "after", on_busy: "queue" }), 202);
    expect((await json<Turn>(await slow)).status).toBe("completed");
    await vi.waitFor(
      async () => {
        const status = (
          await json<Turn>(await api("GET", `/v1/threads/${a}/turns/${queued.id}`, undefined, key))
        ).status;
        expect(status).toBe("completed");
      },
      { timeout: 5_000, interval: 10 },
    );
    const admitted = await vi.waitFor(
      async () => {
        const res = await turn(key, b, { input: "now" });
        expect(res.status).toBe(200);
        return json<Turn>(res);
      },
      { timeout: 5_000, interval: 20 },
    );
    expect(admitted.status).toBe("completed");
    // Turns one after another on one thread never wait for the release.
    for (let i = 0; i < 3; i++)
      expect((await turn(key, b, { input: `again ${i}` })).status).toBe(200);
  });
});

describe("max_running_turns, leased", () => {
  it("a slot an idle thread holds is given back when another thread needs it: no refusal", async () => {
    const { key } = await tenantWithKey({ quotas: { max_running_turns: 1 } });
    const [a, b] = [await newThread(key), await newThread(key)];
    expect((await turn(key, a, { input: "a holds the slot after this" })).status).toBe(200);
    const threadCalls = watchCalls(env.THREAD);
    // At once, on the first try: the tenant asks a, which runs nothing, for its slot.
    expect((await turn(key, b, { input: "b needs it" })).status).toBe(200);
    expect(threadCalls.filter((method) => method === "yieldQuota")).toEqual(["yieldQuota"]);
    // And back: a's lease is gone, so it asks, and b gives the slot back.
    expect((await turn(key, a, { input: "a again" })).status).toBe(200);
    expect(threadCalls.filter((method) => method === "yieldQuota")).toHaveLength(2);
  });

  it("a thread running a task keeps its slot when asked, and releases it when the task ends", async () => {
    const { key } = await tenantWithKey({ quotas: { max_running_turns: 1 } });
    const [a, b] = [await newThread(key), await newThread(key)];
    const calls = watchTenantCalls();
    const slow = turn(key, a, { input: "/slow 300 hold the slot" });
    await untilRunning(a, key);
    await expectQuota(await turn(key, b, { input: "refused" }), "max_running_turns", "none");
    expect((await json<Turn>(await slow)).status).toBe("completed");
    // Asked while running, a lost its lease: its task's end released the slot.
    await vi.waitFor(() => expect(calls).toContain("releaseQuota"), { timeout: 5_000 });
    expect((await turn(key, b, { input: "admitted" })).status).toBe(200);
  });
});

describe("tokens_per_day", () => {
  it("lets the turn that spends the day's tokens finish, then refuses the next before the provider is called", async () => {
    const { tenant, key } = await tenantWithKey({ quotas: { tokens_per_day: 20 } });
    const upstream = remoteModel();
    const id = await newThread(key, { model: "gpt-test" });
    const spent = await json<Turn & { usage: { input_tokens: number } }>(
      await turn(key, id, { input: "spend it" }),
    );
    // Never cut: it ran to its end, past the budget.
    expect(spent.status).toBe("completed");
    expect(spent.usage.input_tokens).toBeGreaterThan(20);
    const calls = upstream.mock.calls.length;
    const before = await (await api("GET", `/v1/threads/${id}/rollout`, undefined, key)).text();
    await expectQuota(
      await turn(key, id, { input: "one more" }),
      "tokens_per_day",
      "until tomorrow",
    );
    await expectQuota(
      await api("POST", `/v1/threads/${id}/compact`, undefined, key),
      "tokens_per_day",
      "until tomorrow",
    );
    // Another thread of the tenant is refused too, once the usage reached the tenant's object
    // (pushed by the thread's alarm within about a second).
    const other = await newThread(key, { model: "gpt-test" });
    await vi.waitFor(
      async () => {
        await runDurableObjectAlarm(await threadObjectOf(tenant.id, id));
        const usage = await json<{ data: unknown[] }>(
          await api("GET", "/v1/usage", undefined, key),
        );
        expect(usage.data).toHaveLength(1);
      },
      { timeout: 5_000, interval: 20 },
    );
    await expectQuota(
      await turn(key, other, { input: "elsewhere" }),
      "tokens_per_day",
      "until tomorrow",
    );
    expect(upstream.mock.calls.length).toBe(calls);
    // Nothing was recorded for the refused requests.
    expect(await (await api("GET", `/v1/threads/${id}/rollout`, undefined, key)).text()).toBe(
      before,
    );
  });

  it("a burst of concurrent turns on many threads overshoots the budget by less than one turn", async () => {
    // About four turns' worth (a first turn of the local model uses about 380 tokens).
    const limit = 1_460;
    const { key } = await tenantWithKey({ quotas: { tokens_per_day: limit } });
    const threads = await Promise.all(Array.from({ length: 20 }, () => newThread(key)));
    const answers = await Promise.all(
      threads.map((id, i) => turn(key, id, { input: `/slow 20 burst ${i}` })),
    );
    const spent: number[] = [];
    for (const res of answers) {
      if (res.status === 429) {
        const problem = await json<Record<string, unknown>>(res, 429);
        expect(problem).toMatchObject({ code: "quota_exceeded", quota: "tokens_per_day" });
        expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
        continue;
      }
      const done = await json<Turn & { usage: { input_tokens: number; output_tokens: number } }>(
        res,
      );
      expect(done.status).toBe("completed");
      spent.push(done.usage.input_tokens + done.usage.output_tokens);
    }
    expect(spent.length).toBeGreaterThan(0);
    const used = spent.reduce((a, b) => a + b, 0);
    // Past the limit by less than the one turn admitted past it spent.
    expect(used).toBeLessThan(limit + Math.max(...spent));
  });

  it("steered input reserves the request it adds: refused while other running turns hold the rest, the turn going on without it", async () => {
    // Room for two turns of the local model (about 4,400 tokens reserved each), not for a
    // steered step on top (its prompt holds the running step's answer, so more than a turn).
    const { key } = await tenantWithKey({ quotas: { tokens_per_day: 10_000 } });
    const [a, b] = [await newThread(key), await newThread(key)];
    const streamed = await turn(key, a, { input: "/slow 200 steer me", stream: true });
    const [started] = await readSse(streamed, (frames) => frames.length > 0);
    const running = (JSON.parse(started?.data ?? "{}") as { turn_id: string }).turn_id;
    const second = turn(key, b, { input: "/slow 200 hold the rest" });
    await untilRunning(b, key);
    const steer = await api(
      "POST",
      `/v1/threads/${a}/turns/${running}/steer`,
      { input: "and this" },
      key,
    );
    const problem = await json<Record<string, unknown>>(steer, 429);
    expect(problem).toMatchObject({ code: "quota_exceeded", quota: "tokens_per_day" });
    expect(Number(steer.headers.get("retry-after"))).toBeGreaterThan(0);
    const done = await vi.waitFor(
      async () => {
        const t = await json<Turn & { items: unknown[] }>(
          await api("GET", `/v1/threads/${a}/turns/${running}`, undefined, key),
        );
        expect(t.status).toBe("completed");
        return t;
      },
      { timeout: 5_000, interval: 20 },
    );
    expect(JSON.stringify(done.items)).not.toContain("and this");
    expect((await json<Turn>(await second)).status).toBe("completed");
  });

  it("refuses the outputs that would resume a paused turn, which stays paused", async () => {
    const { tenant, key } = await tenantWithKey();
    const id = await newThread(key, { tools: [{ name: "lookup", description: "search" }] });
    const paused = await json<Turn>(await turn(key, id, { input: "/call lookup {}" }));
    expect(paused.status).toBe("requires_action");
    await json(
      await api(
        "PATCH",
        `/v1/admin/tenants/${tenant.id}`,
        { quotas: { tokens_per_day: 1 } },
        ADMIN_KEY,
      ),
    );
    const items = [
      { type: "function_call_output", call_id: paused.pending_calls[0]?.call_id, output: "42" },
    ];
    const outputs = await api(
      "POST",
      `/v1/threads/${id}/turns/${paused.id}/outputs`,
      { items },
      key,
    );
    await expectQuota(outputs, "tokens_per_day", "until tomorrow");
    const still = await json<Turn>(
      await api("GET", `/v1/threads/${id}/turns/${paused.id}`, undefined, key),
    );
    expect(still.status).toBe("requires_action");
  });

  it("a queued turn refused when its turn comes ends failed with quota_exceeded", async () => {
    const { key } = await tenantWithKey({ quotas: { tokens_per_day: 10 } });
    const id = await newThread(key);
    const slow = turn(key, id, { input: "/slow 200 spend the budget meanwhile" });
    await untilRunning(id, key);
    const queued = await json<Turn>(await turn(key, id, { input: "later", on_busy: "queue" }), 202);
    expect((await json<Turn>(await slow)).status).toBe("completed");
    const ended = await vi.waitFor(
      async () => {
        const t = await json<Turn>(
          await api("GET", `/v1/threads/${id}/turns/${queued.id}`, undefined, key),
        );
        expect(t.status).toBe("failed");
        return t;
      },
      { timeout: 5_000, interval: 10 },
    );
    expect(ended.error).toEqual({
      code: "quota_exceeded",
      message: expect.stringContaining("tokens"),
    });
  });
});

describe("max_thread_bytes", () => {
  it("a full thread takes no new turn nor inject, but a paused turn still finishes", async () => {
    const { tenant, key } = await tenantWithKey();
    const id = await newThread(key, { tools: [{ name: "lookup", description: "search" }] });
    const paused = await json<Turn>(await turn(key, id, { input: "/call lookup {}" }));
    await json(
      await api(
        "PATCH",
        `/v1/admin/tenants/${tenant.id}`,
        { quotas: { max_thread_bytes: 1000 } },
        ADMIN_KEY,
      ),
    );
    await expectQuota(await turn(key, id, { input: "more" }), "max_thread_bytes", "none");
    await expectQuota(
      await turn(key, id, { input: "more", on_busy: "queue" }),
      "max_thread_bytes",
      "none",
    );
    await expectQuota(
      await api("POST", `/v1/threads/${id}/inject`, { text: "fyi" }, key),
      "max_thread_bytes",
      "none",
    );
    const items = [
      { type: "function_call_output", call_id: paused.pending_calls[0]?.call_id, output: "42" },
    ];
    const done = await json<Turn>(
      await api("POST", `/v1/threads/${id}/turns/${paused.id}/outputs`, { items }, key),
    );
    expect(done.status).toBe("completed");
    // Another thread of the tenant is not full.
    const other = await newThread(key);
    expect((await turn(key, other, { input: "hi" })).status).toBe(200);
  });
});

/** The methods called on the stubs `namespace` hands out from now on, in order. */
function watchCalls<T extends Rpc.DurableObjectBranded | undefined>(
  namespace: DurableObjectNamespace<T>,
): string[] {
  const calls: string[] = [];
  const real = namespace.getByName.bind(namespace);
  vi.spyOn(namespace, "getByName").mockImplementation((name: string) => {
    const stub = real(name);
    return new Proxy(stub, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (typeof prop !== "string" || typeof value !== "function") return value;
        return (...args: unknown[]) => {
          calls.push(prop);
          return (value as (...a: unknown[]) => unknown)(...args);
        };
      },
    });
  });
  return calls;
}

const watchTenantCalls = () => watchCalls(env.TENANT);

describe("what quotas cost a turn", () => {
  it("a tenant without quotas: the turn asks its tenant's object nothing (pushes follow it)", async () => {
    const { tenant, key } = await tenantWithKey();
    const id = await newThread(key);
    // The creation's own work with the tenant (its push, its event's endpoints) is done first:
    // on a loaded machine it could otherwise land while the turn runs.
    await runDurableObjectAlarm(await threadObjectOf(tenant.id, id));
    const calls = watchTenantCalls();
    expect((await turn(key, id, { input: "hi" })).status).toBe(200);
    expect(calls.filter((method) => method !== "sync")).toEqual([]);
  });

  it("a tenant with turn quotas: one call admits the turn, and the thread's next turns within the lease ask nothing", async () => {
    const { key } = await tenantWithKey({
      quotas: { tokens_per_day: 1_000_000, max_running_turns: 5 },
    });
    const directory = watchCalls(env.TENANT_DIRECTORY);
    const id = await newThread(key);
    const calls = watchTenantCalls();
    for (let i = 0; i < 4; i++)
      expect((await turn(key, id, { input: `hi ${i}` })).status).toBe(200);
    expect(calls.filter((method) => method !== "sync")).toEqual(["grantQuota"]);
    // Invariant 14: the key's first use, the create and the turns reach no global object.
    expect(directory).toEqual([]);
  });

  it("a quota change ends the lease: the next turn asks again", async () => {
    const { tenant, key } = await tenantWithKey({ quotas: { max_running_turns: 5 } });
    const id = await newThread(key);
    const calls = watchTenantCalls();
    expect((await turn(key, id, { input: "first" })).status).toBe(200);
    await json(
      await api(
        "PATCH",
        `/v1/admin/tenants/${tenant.id}`,
        { quotas: { max_running_turns: 4 } },
        ADMIN_KEY,
      ),
    );
    expect((await turn(key, id, { input: "second" })).status).toBe(200);
    expect(calls.filter((method) => method === "grantQuota")).toHaveLength(2);
  });
});
