/**
 * The tenant's index and ledger are repaired, never left wrong (design §11): a push that failed,
 * or whose answer was lost, or that an instance never made, is made again by the thread's alarm,
 * its next write or its next load, and the tenant takes each ledger entry once.
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, DEV_KEY, json, newThreadId } from "../helpers/api.ts";
import { tenantWithKey, threadObjectOf } from "../helpers/tenancy.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

type Outage = "fails" | "answer lost";

/**
 * Makes every thread's push to its tenant fail (`fails`: nothing reaches the tenant) or lose its
 * answer (`answer lost`: the tenant applies it, the thread sees an error). Other calls go through.
 */
function pushOutage(kind: Outage) {
  const real = env.TENANT.getByName.bind(env.TENANT);
  return vi.spyOn(env.TENANT, "getByName").mockImplementation((name: string) => {
    const stub = real(name);
    return new Proxy(stub, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (prop !== "sync") return value;
        return async (...args: unknown[]) => {
          if (kind === "answer lost")
            await (value as (...a: unknown[]) => Promise<unknown>)(...args);
          throw new Error(`push ${kind}`);
        };
      },
    });
  });
}

interface Listed {
  data: { id: string; turn_count: number }[];
}
const listed = async (key: string) =>
  (await json<Listed>(await api("GET", "/v1/threads", undefined, key))).data.map((t) => t.id);

async function untilListed(key: string, id: string, present = true): Promise<void> {
  await vi.waitFor(async () => expect((await listed(key)).includes(id)).toBe(present), {
    timeout: 5_000,
    interval: 20,
  });
}

const threadObject = (tenant: string, id: string) => threadObjectOf(tenant, id);

describe("the index after a failed push", () => {
  it("a create whose push failed is indexed by the thread's alarm, after the instance went away", async () => {
    const { tenant, key } = await tenantWithKey();
    const id = newThreadId();
    const outage = pushOutage("fails");
    await json(await api("POST", "/v1/threads", { id }, key), 201);
    await evictDurableObject(await threadObject(tenant.id, id));
    expect(await listed(key)).toEqual([]);
    outage.mockRestore();
    expect(await runDurableObjectAlarm(await threadObject(tenant.id, id))).toBe(true);
    await untilListed(key, id);
  });

  it("…or by the thread's next write, with no alarm left", async () => {
    const { tenant, key } = await tenantWithKey();
    const id = newThreadId();
    const outage = pushOutage("fails");
    await json(await api("POST", "/v1/threads", { id }, key), 201);
    await runInDurableObject(await threadObject(tenant.id, id), async (_i, state) => {
      await state.storage.deleteAlarm();
    });
    await evictDurableObject(await threadObject(tenant.id, id));
    outage.mockRestore();
    expect(await listed(key)).toEqual([]);
    await json(await api("POST", `/v1/threads/${id}/turns`, { input: "hello" }, key));
    await vi.waitFor(
      async () => {
        const list = await json<Listed>(await api("GET", "/v1/threads", undefined, key));
        expect(list.data.map((t) => [t.id, t.turn_count])).toEqual([[id, 1]]);
      },
      { timeout: 5_000, interval: 20 },
    );
  });

  it("a delete whose push failed leaves the index by the alarm", async () => {
    const { tenant, key } = await tenantWithKey();
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id }, key), 201);
    await untilListed(key, id);
    const outage = pushOutage("fails");
    expect((await api("DELETE", `/v1/threads/${id}`, undefined, key)).status).toBe(204);
    expect(await listed(key)).toEqual([id]);
    outage.mockRestore();
    expect(await runDurableObjectAlarm(await threadObject(tenant.id, id))).toBe(true);
    await untilListed(key, id, false);
  });

  it("a thread the index lost (created before the index, or a crash) is indexed again on its next load", async () => {
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id }), 201);
    await untilListed(DEV_KEY, id);
    // Forget it on both sides, as if it predated the index.
    await runInDurableObject(env.TENANT.getByName("local"), (_i, state) => {
      state.storage.sql.exec("DELETE FROM tenant_threads WHERE thread_id = ?", id);
    });
    await runInDurableObject(await threadObject("local", id), (_i, state) => {
      state.storage.sql.exec("DELETE FROM spindle_sync WHERE key = 'pushed'");
    });
    await evictDurableObject(await threadObject("local", id));
    expect(await listed(DEV_KEY)).not.toContain(id);
    await json(await api("GET", `/v1/threads/${id}`));
    await untilListed(DEV_KEY, id);
  });
});

describe("the ledger after a failed push", () => {
  it("entries outlive a failed push and are counted once when a push's answer was lost", async () => {
    const { tenant, key } = await tenantWithKey();
    const id = newThreadId();
    await json(await api("POST", "/v1/threads", { id }, key), 201);
    const outage = pushOutage("answer lost");
    const turn = await json<{ usage: Record<string, number> }>(
      await api("POST", `/v1/threads/${id}/turns`, { input: "hello" }, key),
    );
    // The tenant applied the push; the thread keeps the entry, as the answer never came.
    await runDurableObjectAlarm(await threadObject(tenant.id, id));
    const pending = await runInDurableObject(await threadObject(tenant.id, id), (_i, state) =>
      state.storage.sql.exec("SELECT COUNT(*) AS n FROM spindle_usage").one(),
    );
    expect(pending.n).toBe(1);
    outage.mockRestore();
    await runDurableObjectAlarm(await threadObject(tenant.id, id));
    const left = await runInDurableObject(await threadObject(tenant.id, id), (_i, state) =>
      state.storage.sql.exec("SELECT COUNT(*) AS n FROM spindle_usage").one(),
    );
    expect(left.n).toBe(0);
    const usage = await json<{ data: Record<string, unknown>[] }>(
      await api("GET", "/v1/usage?group_by=thread", undefined, key),
    );
    expect(usage.data).toEqual([
      {
        object: "usage_bucket",
        bucket: id,
        input_tokens: turn.usage.input_tokens,
        cached_input_tokens: turn.usage.cached_input_tokens,
        output_tokens: turn.usage.output_tokens,
        reasoning_tokens: turn.usage.reasoning_output_tokens,
        requests: 1,
        turns: 1,
        cache_hit_ratio: (turn.usage.cached_input_tokens ?? 0) / (turn.usage.input_tokens ?? 1),
      },
    ]);
  });
});
