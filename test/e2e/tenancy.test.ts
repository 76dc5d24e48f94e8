import { describe, expect, it } from "vitest";
import { call, text } from "./local-worker.ts";
import { persistedWorker } from "./persisted-worker.ts";

/**
 * The tenancy path over a real socket (design §11): an operator's admin key creates a tenant and
 * a key; the key creates a thread with metadata, runs a turn, finds the thread by its metadata and
 * reads its usage; a revoked key stops working; and all of it survives a restart of the runtime.
 */

const ADMIN_KEY = "sk-local-admin";

const { base, restart } = persistedWorker("spindle-e2e-tenancy-");

async function as<T>(key: string, method: string, path: string, body?: unknown, status = 200) {
  return JSON.parse(await text(await call(base(), method, path, body, key), status)) as T;
}

/** Polls until `read` stops throwing; the index and the ledger follow a thread within moments. */
async function eventually<T>(read: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await read();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

interface Usage {
  input_tokens: number;
  output_tokens: number;
  requests: number;
  turns: number;
}

describe("admin → tenant → key → thread → listing → usage, over a loopback socket", () => {
  it("works end to end, and the revoked key and the restart behave", async () => {
    const tenant = `e2e_${crypto.randomUUID().slice(0, 8)}`;
    const created = await as<{ id: string; quotas: Record<string, number | null> }>(
      ADMIN_KEY,
      "POST",
      "/v1/admin/tenants",
      { id: tenant, name: "End to end", quotas: { max_threads: 10 } },
      201,
    );
    expect(created).toMatchObject({
      id: tenant,
      quotas: { max_threads: 10, tokens_per_day: null },
    });
    const key = await as<{ id: string; key: string }>(
      ADMIN_KEY,
      "POST",
      `/v1/admin/tenants/${tenant}/keys`,
      { name: "e2e" },
      201,
    );
    expect(key.key.startsWith(`sk_g.${tenant}.`)).toBe(true);

    const thread = await as<{ id: string }>(
      key.key,
      "POST",
      "/v1/threads",
      { metadata: { customer: "c-42" } },
      201,
    );
    const turn = await as<{
      status: string;
      usage: { input_tokens: number; output_tokens: number };
    }>(key.key, "POST", `/v1/threads/${thread.id}/turns`, { input: "hello over the socket" });
    expect(turn.status).toBe("completed");

    const found = await eventually(async () => {
      const list = await as<{ data: { id: string }[] }>(
        key.key,
        "GET",
        "/v1/threads?metadata[customer]=c-42",
      );
      expect(list.data.map((t) => t.id)).toEqual([thread.id]);
      return list;
    });
    expect(found.data).toHaveLength(1);

    const usage = await eventually(async () => {
      const page = await as<{ data: (Usage & { bucket: string })[] }>(
        key.key,
        "GET",
        "/v1/usage?group_by=thread",
      );
      expect(page.data.map((b) => b.bucket)).toEqual([thread.id]);
      return page.data[0] as Usage;
    });
    expect(usage).toMatchObject({
      input_tokens: turn.usage.input_tokens,
      output_tokens: turn.usage.output_tokens,
      requests: 1,
      turns: 1,
    });

    // The admin key reaches no thread; the tenant key no admin route.
    expect((await call(base(), "GET", "/v1/threads", undefined, ADMIN_KEY)).status).toBe(403);
    expect((await call(base(), "GET", "/v1/admin/tenants", undefined, key.key)).status).toBe(403);

    // A second key, revoked: the isolate that revoked it refuses it at once.
    const second = await as<{ id: string; key: string }>(key.key, "POST", "/v1/keys", {}, 201);
    expect((await call(base(), "GET", "/v1/threads", undefined, second.key)).status).toBe(200);
    expect((await call(base(), "DELETE", `/v1/keys/${second.id}`, undefined, key.key)).status).toBe(
      204,
    );
    const refused = await call(base(), "GET", "/v1/threads", undefined, second.key);
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({
      code: "unauthorized",
      detail: "The API key is not valid.",
    });

    // A restart keeps the tenant, its key, the index and the ledger.
    await restart();
    const after = await as<{ data: { id: string }[] }>(key.key, "GET", "/v1/threads");
    expect(after.data.map((t) => t.id)).toEqual([thread.id]);
    const usageAfter = await as<{ data: Usage[] }>(key.key, "GET", "/v1/usage");
    expect(usageAfter.data.map((b) => b.requests)).toEqual([1]);
    expect((await call(base(), "GET", "/v1/threads", undefined, second.key)).status).toBe(401);
  });

  it("turn quotas: two threads share one running slot by leases, before and after a restart", async () => {
    const tenant = `e2e_${crypto.randomUUID().slice(0, 8)}`;
    await as(
      ADMIN_KEY,
      "POST",
      "/v1/admin/tenants",
      { id: tenant, quotas: { max_running_turns: 1, tokens_per_day: 1_000_000 } },
      201,
    );
    const { key } = await as<{ key: string }>(
      ADMIN_KEY,
      "POST",
      `/v1/admin/tenants/${tenant}/keys`,
      {},
      201,
    );
    const threads = [
      await as<{ id: string }>(key, "POST", "/v1/threads", {}, 201),
      await as<{ id: string }>(key, "POST", "/v1/threads", {}, 201),
    ];
    // Each turn finds the slot held by the other thread's lease, which hands it back at once.
    const alternate = async (round: string) => {
      for (let i = 0; i < 2; i++) {
        for (const thread of threads) {
          const turn = await as<{ status: string }>(key, "POST", `/v1/threads/${thread.id}/turns`, {
            input: `${round} ${i}`,
          });
          expect(turn.status).toBe("completed");
        }
      }
    };
    await alternate("before");
    // The tenant's object reads the hold still out; the thread that held it has forgotten it.
    await restart();
    await alternate("after");
  });
});
