import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, json, newThreadId, threadStub } from "../helpers/api.ts";
import { createThread, expectSameAfterEviction, inspect, turn } from "../helpers/durability.ts";
import { checkThreadRollout } from "../helpers/rollout.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("flush scheduling", () => {
  it("every turn brings the alarm within a second or so, even when a later one (event expiry) is set", async () => {
    const id = newThreadId();
    await createThread(id);
    await turn(id, "one");
    // The alarm flushes, then leaves the 15-minute event-expiry alarm behind.
    await runDurableObjectAlarm(threadStub(id));
    const later = await runInDurableObject(threadStub(id), (_i, state) => state.storage.getAlarm());
    expect(later).toBeGreaterThan(Date.now() + 60_000);
    await turn(id, "two");
    const due = await runInDurableObject(threadStub(id), (_i, state) => state.storage.getAlarm());
    expect(due).toBeLessThanOrEqual(Date.now() + 5_000);
    await runDurableObjectAlarm(threadStub(id));
    const state = await inspect(id);
    expect(state?.flushedThrough).toBe(state?.lastSeq);
  });
});

describe("an alarm while a turn runs", () => {
  it("flushes and checkpoints the lines so far, keeps an alarm due, and the thread reloads exactly", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    for (let i = 0; i < 5; i++) await turn(id, `turn ${i}`);
    const slow = turn(id, "/slow 150 take your time");
    await vi.waitFor(async () =>
      expect(await json(await api("GET", `/v1/threads/${id}`))).toMatchObject({
        status: "running",
      }),
    );
    // The running task's alarm, run early: it flushes what the turn has written so far.
    expect(await runDurableObjectAlarm(threadStub(id))).toBe(true);
    const mid = await inspect(id);
    expect(mid?.flushedThrough).toBe(mid?.lastSeq);
    expect(mid?.checkpointSeq).toBe(mid?.lastSeq);
    const due = await runInDurableObject(threadStub(id), (_i, state) => state.storage.getAlarm());
    expect(due).toBeLessThanOrEqual(Date.now() + 31_000);
    expect((await slow).status).toBe("completed");
    await runDurableObjectAlarm(threadStub(id));
    const { lines, errors } = await checkThreadRollout(id);
    expect(errors).toEqual([]);
    expect(lines.at(-1)).toContain('"task_complete"');
    await expectSameAfterEviction(id);
    expect((await turn(id, "after")).status).toBe("completed");
  });
});

describe("flush scheduling after a lost instance", () => {
  /** A thread whose instance went away in the middle of a long turn. */
  async function cutShort(): Promise<string> {
    const id = newThreadId();
    await createThread(id);
    await runDurableObjectAlarm(threadStub(id));
    const slow = api("POST", `/v1/threads/${id}/turns`, { input: "/slow 40 take your time" });
    await vi.waitFor(async () =>
      expect(await json(await api("GET", `/v1/threads/${id}`))).toMatchObject({
        status: "running",
      }),
    );
    await runInDurableObject(threadStub(id), (_i, state) =>
      state.abort("reset for the test"),
    ).catch(() => undefined);
    await slow.catch(() => undefined);
    return id;
  }

  it("the alarm a running turn keeps pending wakes the object, which settles the turn and flushes it", async () => {
    const id = await cutShort();
    // No request reaches the thread: only its alarm.
    expect(await runDurableObjectAlarm(threadStub(id))).toBe(true);
    const state = await inspect(id);
    expect(state?.flushedThrough).toBe(state?.lastSeq);
    const { lines } = await checkThreadRollout(id);
    expect(lines.at(-1)).toContain('"turn_aborted"');
  });

  it("a request that reloads the thread and settles the turn leaves an alarm that flushes it", async () => {
    const id = await cutShort();
    expect(JSON.parse(await (await api("GET", `/v1/threads/${id}`)).text())).toMatchObject({
      status: "idle",
    });
    expect(await runDurableObjectAlarm(threadStub(id))).toBe(true);
    const state = await inspect(id);
    expect(state?.flushedThrough).toBe(state?.lastSeq);
  });
});

describe("a flush in flight", () => {
  /** Holds every R2 put until `release` is called. */
  function holdPuts() {
    const put = env.ROLLOUT.put.bind(env.ROLLOUT);
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const spy = vi.spyOn(env.ROLLOUT, "put").mockImplementation(async (...args) => {
      await held;
      return put(...args);
    });
    return { spy, release };
  }

  it("goes on across a reload of the thread, and the next flush continues after it", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    await turn(id, "one");
    const puts = holdPuts();
    const alarm = runDurableObjectAlarm(threadStub(id));
    await vi.waitFor(() => expect(puts.spy).toHaveBeenCalled());
    // A rollback reloads the thread while its segment is being put.
    await json(await api("POST", `/v1/threads/${id}/rollback`, { turns: 1 }));
    puts.release();
    await alarm;
    await runDurableObjectAlarm(threadStub(id));
    const state = await inspect(id);
    expect(state?.flushedThrough).toBe(state?.lastSeq);
    const check = await checkThreadRollout(id);
    expect(check.errors).toEqual([]);
    expect(check.lines).toHaveLength(state?.lastSeq ?? -1);
    await expectSameAfterEviction(id);
  });

  it("ends before a delete removes the thread's R2 objects, so none is left behind", async () => {
    const id = newThreadId();
    await createThread(id);
    await turn(id, "one");
    const puts = holdPuts();
    const alarm = runDurableObjectAlarm(threadStub(id));
    await vi.waitFor(() => expect(puts.spy).toHaveBeenCalled());
    const deleted = api("DELETE", `/v1/threads/${id}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
    puts.release();
    expect((await deleted).status).toBe(204);
    await alarm;
    const left = await env.ROLLOUT.list({ prefix: `threads/local/${id}/` });
    expect(left.objects.map((o) => o.key)).toEqual([]);
  });
});
