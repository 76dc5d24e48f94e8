import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { CheckpointStore } from "../../../durable-objects/thread/storage/checkpoint-store.ts";
import { sqlOf } from "../../../durable-objects/thread/storage/sql.ts";
import {
  ACME_KEY,
  api,
  DEV_KEY,
  GLOBEX_KEY,
  json,
  newThreadId,
  threadStub,
} from "../helpers/api.ts";
import { createThread, expectSameAfterEviction, prompt, turn } from "../helpers/durability.ts";
import { sqlRows } from "../helpers/rollout.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("restore keeps what is not the rollout's", () => {
  it("event ids go on after the last one, and a retried keyed turn still finds its turn", async () => {
    const id = newThreadId();
    await createThread(id);
    const keyed = (input: string) =>
      api("POST", `/v1/threads/${id}/turns`, { input }, DEV_KEY, { "idempotency-key": "k" });
    const first = await json<{ id: string }>(await keyed("once"));
    await runDurableObjectAlarm(threadStub(id));
    const [{ last } = { last: 0 }] = await sqlRows<{ last: number }>(
      id,
      "SELECT MAX(seq) AS last FROM spindle_events",
    );
    expect(last).toBeGreaterThan(0);
    await json(await api("POST", `/v1/threads/${id}/restore`));
    await evictDurableObject(threadStub(id));
    // A client that saw event `last` can resume after it; the next turn's events follow it.
    expect((await api("GET", `/v1/threads/${id}/events?after=${last}`)).status).toBe(200);
    const next = await turn(id, "next");
    const started = await sqlRows<{ seq: number }>(
      id,
      `SELECT seq FROM spindle_events
       WHERE body ->> '$.type' = 'turn.started' AND body ->> '$.turn_id' = '${next.id}'`,
    );
    expect(started.map((s) => s.seq)).toEqual([last + 1]);
    expect((await json<{ id: string }>(await keyed("once"))).id).toBe(first.id);
  });
});

describe("restore and reload agree", () => {
  const threadText = async (id: string) => (await api("GET", `/v1/threads/${id}`)).text();
  const restore = async (id: string) => json(await api("POST", `/v1/threads/${id}/restore`));

  it("a restored thread reloads the same after an eviction, and a rollback then keeps what R2 held", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    await turn(id, "one");
    await turn(id, "two");
    await runDurableObjectAlarm(threadStub(id));
    await restore(id);
    // SQLite now holds none of the lines R2 has: the restore's checkpoint stands for them.
    await expectSameAfterEviction(id);
    await json(await api("POST", `/v1/threads/${id}/rollback`, { turns: 1 }));
    const history = await (await api("GET", `/v1/threads/${id}/history?limit=100`)).text();
    expect(history).toContain('"one"');
    expect(history).not.toContain('"two"');
  });

  it("a load that finds lines after the checkpoint missing from SQLite replays R2 instead", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    await turn(id, "one");
    await runDurableObjectAlarm(threadStub(id));
    const before = await prompt(id);
    // As after a restore from R2 without a checkpoint: the flushed lines leave SQLite.
    await runInDurableObject(threadStub(id), (_i, state) => {
      new CheckpointStore(sqlOf(state.storage.sql), state.storage).clear();
      state.storage.sql.exec("DELETE FROM spindle_rollout");
    });
    await evictDurableObject(threadStub(id));
    expect(await prompt(id)).toBe(before);
  });

  it("a message injected after a rollback reloads to the state it had live", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo", tools: [{ name: "lookup" }] });
    await turn(id, "/call lookup {}");
    await json(await api("POST", `/v1/threads/${id}/compact`));
    await json(await api("POST", `/v1/threads/${id}/rollback`, { turns: 1 }));
    await json(await api("POST", `/v1/threads/${id}/inject`, { text: "noted" }));
    await expectSameAfterEviction(id);
  });

  it("a paused turn that a rollback ended is still ended after a restore from R2", async () => {
    const id = newThreadId();
    await createThread(id, { tools: [{ name: "lookup" }] });
    const paused = await turn(id, "/call lookup {}");
    expect(paused.status).toBe("requires_action");
    await json(await api("POST", `/v1/threads/${id}/rollback`, { turns: 1 }));
    const ended = await (await api("GET", `/v1/threads/${id}/turns/${paused.id}`)).text();
    expect(JSON.parse(ended)).toMatchObject({ status: "interrupted", pending_calls: [] });
    const thread = await threadText(id);
    expect(JSON.parse(thread)).toMatchObject({ status: "idle" });
    await runDurableObjectAlarm(threadStub(id));
    await restore(id);
    expect(await threadText(id)).toBe(thread);
    expect(await (await api("GET", `/v1/threads/${id}/turns/${paused.id}`)).text()).toBe(ended);
  });
});

describe("tenancy (invariant 9)", () => {
  it("a thread id names a different thread under each tenant, and one tenant cannot reach another's", async () => {
    const id = newThreadId();
    expect((await api("POST", "/v1/threads", { id }, ACME_KEY)).status).toBe(201);
    expect((await api("GET", `/v1/threads/${id}`, undefined, ACME_KEY)).status).toBe(200);
    const globex = await api("GET", `/v1/threads/${id}`, undefined, GLOBEX_KEY);
    expect(globex.status).toBe(404);
    expect((await api("POST", `/v1/threads/${id}/turns`, { input: "hi" }, GLOBEX_KEY)).status).toBe(
      404,
    );
    expect((await api("DELETE", `/v1/threads/${id}`, undefined, GLOBEX_KEY)).status).toBe(404);
    // The same id under globex is globex's own, separate thread.
    expect((await api("POST", "/v1/threads", { id }, GLOBEX_KEY)).status).toBe(201);
    expect((await api("GET", `/v1/threads/${id}`, undefined, ACME_KEY)).status).toBe(200);
  });

  it("documented problem codes: bad body, missing key, wrong key, unknown thread, unknown turn", async () => {
    const id = newThreadId();
    await createThread(id);
    const bad = await api("POST", `/v1/threads/${id}/turns`, { input: 42 });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("content-type")).toBe("application/problem+json");
    expect(await bad.json()).toMatchObject({
      code: "invalid_request",
      errors: [{ path: "/input" }],
    });
    expect(await (await api("GET", `/v1/threads/${id}`, undefined, null)).json()).toMatchObject({
      code: "unauthorized",
    });
    expect(
      await (await api("GET", `/v1/threads/${id}`, undefined, "sk-nope")).json(),
    ).toMatchObject({ code: "unauthorized" });
    expect(await (await api("GET", `/v1/threads/${newThreadId()}`)).json()).toMatchObject({
      code: "not_found",
    });
    expect(await (await api("GET", `/v1/threads/${id}/turns/turn_nope`)).json()).toMatchObject({
      code: "turn_not_found",
    });
  });
});
