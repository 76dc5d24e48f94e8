import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, json, newThreadId, threadStub } from "../helpers/api.ts";
import type { TestThread } from "../worker.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

async function createThread(id: string, config: Record<string, unknown> = {}) {
  return json(await api("POST", "/v1/threads", { id, ...config }), 201);
}

async function turn(id: string, input: string, overrides?: Record<string, unknown>) {
  return json<{ id: string; status: string; items: unknown[] }>(
    await api("POST", `/v1/threads/${id}/turns`, { input, ...(overrides ? { overrides } : {}) }),
  );
}

async function snapshot(id: string) {
  const prompt = await (await api("GET", `/v1/threads/${id}/prompt`)).text();
  const history = await (await api("GET", `/v1/threads/${id}/history?limit=1000`)).text();
  const thread = await json<Record<string, unknown>>(await api("GET", `/v1/threads/${id}`));
  // The RPC stub's type cannot express ContextManagerState; the value is plain data.
  const internal = (await threadStub(id).inspectForTesting()) as Awaited<
    ReturnType<TestThread["inspectForTesting"]>
  >;
  return { prompt, history, thread, internal };
}

describe("Thread DO lifecycle", () => {
  it("creates a thread with no model-visible context (invariant 1)", async () => {
    const id = newThreadId();
    const thread = await createThread(id, { cwd: "/repo" });
    expect(thread).toMatchObject({ object: "thread", id, status: "idle", turn_count: 0 });
    const prompt = await json<{ input: unknown[] }>(await api("GET", `/v1/threads/${id}/prompt`));
    expect(prompt.input).toEqual([]);
  });

  it("answers 409 thread_exists for a second create with the same id", async () => {
    const id = newThreadId();
    await createThread(id);
    const res = await api("POST", "/v1/threads", { id });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ code: "thread_exists" });
  });

  it("answers 404 for an unknown thread and 400 unknown_model for an unknown model", async () => {
    expect((await api("GET", `/v1/threads/${newThreadId()}`)).status).toBe(404);
    const res = await api("POST", "/v1/threads", { model: "nope" });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: "unknown_model" });
  });

  it("three turns with overrides, eviction, then identical prompt, history and thread", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo", agents_md: { directory: "/repo", text: "Use tabs." } });
    await turn(id, "first");
    await turn(id, "second", { cwd: "/repo/sub", model: "spindle-local-lite" });
    const third = await turn(id, "third", { agents_md: null });
    expect(third.status).toBe("completed");

    const before = await snapshot(id);
    await evictDurableObject(threadStub(id));
    const after = await snapshot(id);
    expect(after.prompt).toBe(before.prompt);
    expect(after.history).toBe(before.history);
    expect(after.thread).toEqual(before.thread);
    expect(after.internal).toEqual(before.internal);
    expect(before.internal?.history.referenceContextItem?.model).toBe("spindle-local-lite");
    expect(before.internal?.history.worldStateBaseline).toBeDefined();
    expect(before.internal?.previousTurnSettings).toEqual({ model: "spindle-local-lite" });
    expect(before.thread).toMatchObject({ turn_count: 3, status: "idle" });
    expect((before.thread.config as { model: string }).model).toBe("spindle-local-lite");

    // The next turn after the cold start adds no context: nothing changed.
    const fourth = await turn(id, "fourth");
    expect(fourth.items.map((i) => (i as { role?: string }).role)).toEqual(["user", "assistant"]);
  });

  it("a failing R2 put loses nothing; the alarm later flushes every line once", async () => {
    const id = newThreadId();
    await createThread(id);
    const put = vi.spyOn(env.ROLLOUT, "put").mockRejectedValue(new Error("r2 down"));
    const t = await turn(id, "hello");
    expect(t.status).toBe("completed");
    await runDurableObjectAlarm(threadStub(id));
    expect(put).toHaveBeenCalled();
    expect((await env.ROLLOUT.list({ prefix: `threads/local/${id}/` })).objects).toEqual([]);
    put.mockRestore();
    await runDurableObjectAlarm(threadStub(id));
    const listed = await env.ROLLOUT.list({ prefix: `threads/local/${id}/` });
    expect(listed.objects.length).toBe(1);
    const stored = await runInDurableObject(threadStub(id), (_i, state) =>
      state.storage.sql.exec("SELECT COUNT(*) AS n FROM spindle_rollout").one(),
    );
    expect(listed.objects[0]?.key).toMatch(
      new RegExp(`segments/000000000001-0*${stored.n}\\.jsonl\\.gz$`),
    );
  });

  it("restore rebuilds the same state from R2 alone", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    await turn(id, "one");
    await turn(id, "two", { cwd: "/other" });
    await runDurableObjectAlarm(threadStub(id));
    const before = await snapshot(id);
    // Empty the DO's SQLite, keep R2.
    await runInDurableObject(threadStub(id), async (_i, state) => {
      await state.storage.deleteAll();
    });
    await evictDurableObject(threadStub(id));
    const restored = await json(await api("POST", `/v1/threads/${id}/restore`));
    expect(restored).toEqual(before.thread);
    const after = await snapshot(id);
    expect(after.prompt).toBe(before.prompt);
    expect(after.history).toBe(before.history);
  });

  it("delete removes the DO state and every R2 object of the thread", async () => {
    const id = newThreadId();
    await createThread(id);
    await turn(id, "one");
    await runDurableObjectAlarm(threadStub(id));
    expect(
      (await env.ROLLOUT.list({ prefix: `threads/local/${id}/` })).objects.length,
    ).toBeGreaterThan(0);
    expect((await api("DELETE", `/v1/threads/${id}`)).status).toBe(204);
    expect((await env.ROLLOUT.list({ prefix: `threads/local/${id}/` })).objects).toEqual([]);
    expect((await api("GET", `/v1/threads/${id}`)).status).toBe(404);
  });
});
