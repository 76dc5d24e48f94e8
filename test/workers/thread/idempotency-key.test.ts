import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  api,
  DEV_KEY,
  importRollout,
  json,
  newThreadId,
  post,
  readSse,
  threadStub,
  untilRunning,
} from "../helpers/api.ts";
import {
  createThread,
  type Item,
  isContext,
  type Turn,
  text,
  turn,
  until,
  untilTurnStatus,
} from "../helpers/turns.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("Idempotency-Key", () => {
  const keyed = (path: string, key: string, body: unknown) =>
    api("POST", path, body, DEV_KEY, { "idempotency-key": key });
  const userTexts = async (id: string) =>
    (await json<{ data: Item[] }>(await api("GET", `/v1/threads/${id}/history?limit=1000`))).data
      .filter((i) => i.role === "user" && !isContext(i))
      .map(text);

  it("a retried turn answers with the first one's turn and records nothing twice, even after an eviction", async () => {
    const id = newThreadId();
    await createThread(id);
    const body = { input: "only once" };
    const first = await json<Turn>(await keyed(`/v1/threads/${id}/turns`, "k-1", body));
    const again = await json<Turn>(await keyed(`/v1/threads/${id}/turns`, "k-1", body));
    expect(again).toEqual(first);
    await evictDurableObject(threadStub(id));
    const later = await json<Turn>(await keyed(`/v1/threads/${id}/turns`, "k-1", body));
    expect(later).toEqual(first);
    expect(await userTexts(id)).toEqual(["only once"]);
    const thread = await json<{ turn_count: number }>(await api("GET", `/v1/threads/${id}`));
    expect(thread.turn_count).toBe(1);
    // Another key is another request.
    await json<Turn>(await keyed(`/v1/threads/${id}/turns`, "k-2", body));
    expect(await userTexts(id)).toEqual(["only once", "only once"]);
  });

  it("the same key with another body is a 422, and the first turn stands", async () => {
    const id = newThreadId();
    await createThread(id);
    await json<Turn>(await keyed(`/v1/threads/${id}/turns`, "k", { input: "one" }));
    const reused = await keyed(`/v1/threads/${id}/turns`, "k", { input: "two" });
    expect(await json(reused, 422)).toMatchObject({ code: "idempotency_key_reused" });
    const injected = await keyed(`/v1/threads/${id}/inject`, "k", { text: "one" });
    expect(await json(injected, 422)).toMatchObject({ code: "idempotency_key_reused" });
    expect(await userTexts(id)).toEqual(["one"]);
  });

  it("a retry while the first turn runs waits for it and answers with the same turn", async () => {
    const id = newThreadId();
    await createThread(id);
    const body = { input: "/slow 30 take your time" };
    const first = keyed(`/v1/threads/${id}/turns`, "slow", body).then((r) => json<Turn>(r));
    await untilRunning(id);
    const retry = await json<Turn>(await keyed(`/v1/threads/${id}/turns`, "slow", body));
    expect(retry.status).toBe("completed");
    expect(retry).toEqual(await first);
    expect(await userTexts(id)).toEqual(["/slow 30 take your time"]);
  });

  it("a streamed retry replays the first stream's events, with the same ids, less the deltas of completed items", async () => {
    const id = newThreadId();
    await createThread(id);
    const body = { input: "stream me", stream: true };
    const first = await readSse(
      await keyed(`/v1/threads/${id}/turns`, "s", body),
      until("turn.completed"),
    );
    await turn(id, "something else in between");
    const replay = await readSse(
      await keyed(`/v1/threads/${id}/turns`, "s", body),
      until("turn.completed"),
    );
    expect(replay).toEqual(first.filter((f) => f.event !== "item.delta"));
    // Once those events are gone, the retry says so instead of streaming a new turn.
    await runInDurableObject(threadStub(id), (_i, state) =>
      state.storage.sql.exec("UPDATE spindle_events SET at = 0"),
    );
    await runDurableObjectAlarm(threadStub(id));
    const expired = await keyed(`/v1/threads/${id}/turns`, "s", body);
    expect(await json(expired, 410)).toMatchObject({ code: "event_expired" });
    expect(await userTexts(id)).toEqual(["stream me", "something else in between"]);
  });

  it("a queued turn's retry answers with the queued turn, then with it done", async () => {
    const id = newThreadId();
    await createThread(id);
    const slow = turn(id, "/slow 150 first");
    await untilRunning(id);
    const body = { input: "queued once", on_busy: "queue" };
    const queued = await json<Turn>(await keyed(`/v1/threads/${id}/turns`, "q", body), 202);
    const again = await json<Turn>(await keyed(`/v1/threads/${id}/turns`, "q", body), 202);
    expect(again.id).toBe(queued.id);
    await slow;
    await untilTurnStatus(id, queued.id, "completed");
    const done = await json<Turn>(await keyed(`/v1/threads/${id}/turns`, "q", body));
    expect(done).toMatchObject({ id: queued.id, status: "completed" });
    expect(await userTexts(id)).toEqual(["/slow 150 first", "queued once"]);
  });

  it("a request refused before it took effect keeps no key: its retry runs", async () => {
    const id = newThreadId();
    await createThread(id);
    const slow = turn(id, "/slow 150 first");
    await untilRunning(id);
    const body = { input: "after the busy one" };
    const busy = await keyed(`/v1/threads/${id}/turns`, "b", body);
    expect(await json(busy, 409)).toMatchObject({ code: "thread_busy" });
    await slow;
    const ran = await json<Turn>(await keyed(`/v1/threads/${id}/turns`, "b", body));
    expect(ran.status).toBe("completed");
    expect(await userTexts(id)).toEqual(["/slow 150 first", "after the busy one"]);
  });

  it("a retried inject records its messages once; an expired key is a new request", async () => {
    const id = newThreadId();
    await createThread(id);
    const body = { text: "injected" };
    await json(await keyed(`/v1/threads/${id}/inject`, "i", body));
    await json(await keyed(`/v1/threads/${id}/inject`, "i", body));
    expect(await userTexts(id)).toEqual(["injected"]);
    // A day later the key is forgotten (and the alarm drops it).
    await runInDurableObject(threadStub(id), (_i, state) =>
      state.storage.sql.exec("UPDATE spindle_idempotency SET at = at - 86400001"),
    );
    await json(await keyed(`/v1/threads/${id}/inject`, "i", body));
    expect(await userTexts(id)).toEqual(["injected", "injected"]);
    await runInDurableObject(threadStub(id), (_i, state) =>
      state.storage.sql.exec("UPDATE spindle_idempotency SET at = at - 86400001"),
    );
    await runDurableObjectAlarm(threadStub(id));
    const left = await runInDurableObject(threadStub(id), (_i, state) =>
      state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM spindle_idempotency").one(),
    );
    expect(left.n).toBe(0);
  });

  it("retried outputs answer with the resumed turn instead of no_pending_calls", async () => {
    const id = newThreadId();
    await createThread(id, { tools: [{ name: "lookup", description: "", parameters: {} }] });
    const paused = await turn(id, '/call lookup {"q":1}');
    const callId = paused.pending_calls[0]?.call_id;
    const outputs = { items: [{ type: "function_call_output", call_id: callId, output: "42" }] };
    const path = `/v1/threads/${id}/turns/${paused.id}/outputs`;
    const resumed = await json<Turn>(await keyed(path, "o", outputs));
    expect(resumed.status).toBe("completed");
    expect(await json<Turn>(await keyed(path, "o", outputs))).toEqual(resumed);
    // Without the key, the same request is a new one, and there is nothing left to answer.
    expect(await json(await post(path, outputs), 409)).toMatchObject({ code: "no_pending_calls" });
  });

  it("a retried steer adds its input once, and a retried rollback drops one turn, not two", async () => {
    const id = newThreadId();
    await createThread(id);
    const head = await readSse(
      await post(`/v1/threads/${id}/turns`, { input: "/slow 150 steer me", stream: true }),
      until("turn.started"),
    );
    const running = (JSON.parse(head.at(-1)?.data ?? "{}") as { turn_id: string }).turn_id;
    const steer = { input: "also this" };
    const steerPath = `/v1/threads/${id}/turns/${running}/steer`;
    const first = await json<Turn>(await keyed(steerPath, "s", steer));
    const again = await json<Turn>(await keyed(steerPath, "s", steer));
    expect(again.id).toBe(first.id);
    await untilTurnStatus(id, running, "completed");
    expect(await userTexts(id)).toEqual(["/slow 150 steer me", "also this"]);

    await turn(id, "two");
    await turn(id, "three");
    const rollback = { turns: 1 };
    await json(await keyed(`/v1/threads/${id}/rollback`, "r", rollback));
    await json(await keyed(`/v1/threads/${id}/rollback`, "r", rollback));
    expect(await userTexts(id)).toEqual(["/slow 150 steer me", "also this", "two"]);
    const other = await keyed(`/v1/threads/${id}/rollback`, "r", { turns: 2 });
    expect(await json(other, 422)).toMatchObject({ code: "idempotency_key_reused" });
  });

  it("a retried compaction runs once and answers with its turn, even after an eviction", async () => {
    const id = newThreadId();
    await createThread(id);
    await turn(id, "one");
    const compactions = async () =>
      (await (await api("GET", `/v1/threads/${id}/rollout`)).text())
        .split("\n")
        .filter((line) => line.includes('"type":"compacted"')).length;
    const path = `/v1/threads/${id}/compact`;
    const first = await json<Turn>(await keyed(path, "c", undefined));
    expect(first).toMatchObject({ kind: "compaction", status: "completed" });
    expect(await json<Turn>(await keyed(path, "c", undefined))).toEqual(first);
    await evictDurableObject(threadStub(id));
    expect(await json<Turn>(await keyed(path, "c", undefined))).toEqual(first);
    expect(await compactions()).toBe(1);
    const onATurn = await keyed(`/v1/threads/${id}/turns`, "c", { input: "two" });
    expect(await json(onATurn, 422)).toMatchObject({ code: "idempotency_key_reused" });
    // Another key (or none) is another compaction.
    expect((await json<Turn>(await keyed(path, "c2", undefined))).id).not.toBe(first.id);
    expect(await compactions()).toBe(2);
  });

  it("a retried create without an id makes one thread, named after the key, and answers with it", async () => {
    type Thread = { id: string; turn_count: number; model: string };
    const key = `create-${newThreadId()}`;
    const body = { cwd: "/repo", model: "spindle-local-lite" };
    const first = await keyed("/v1/threads", key, body);
    expect(first.status).toBe(201);
    const created = await json<Thread>(first, 201);
    expect(created.id).toMatch(/^thr_[0-9a-f]{40}$/);
    await turn(created.id, "hello");
    const retry = await keyed("/v1/threads", key, body);
    expect(retry.headers.get("location")).toBe(first.headers.get("location"));
    expect(await json<Thread>(retry, 201)).toMatchObject({ id: created.id, turn_count: 1 });
    const reused = await keyed("/v1/threads", key, { ...body, model: "spindle-local" });
    expect(await json(reused, 422)).toMatchObject({ code: "idempotency_key_reused" });
    // Another key is another thread; an explicit id keeps its own rules.
    const other = await json<Thread>(await keyed("/v1/threads", `${key}-2`, body), 201);
    expect(other.id).not.toBe(created.id);
    const named = newThreadId();
    await json(await keyed("/v1/threads", key, { id: named }), 201);
    await json(await keyed("/v1/threads", key, { id: named }), 201);
    expect(await json(await post("/v1/threads", { id: named }), 409)).toMatchObject({
      code: "thread_exists",
    });
    // A day later the key is forgotten: the retry finds a thread it did not make.
    await runInDurableObject(threadStub(created.id), (_i, state) =>
      state.storage.sql.exec("UPDATE spindle_idempotency SET at = at - 86400001"),
    );
    expect(await json(await keyed("/v1/threads", key, body), 409)).toMatchObject({
      code: "thread_exists",
    });
    // Deleted, the thread and its key are gone: the same request makes a new thread.
    expect((await api("DELETE", `/v1/threads/${created.id}`)).status).toBe(204);
    const again = await json<Thread>(await keyed("/v1/threads", key, body), 201);
    expect(again).toMatchObject({ id: created.id, turn_count: 0 });
  });

  it("a retried fork answers with the fork its first attempt made, not a second copy", async () => {
    type Thread = { id: string; turn_count: number; forked_from: string | null };
    const id = newThreadId();
    await createThread(id);
    const one = await turn(id, "one");
    const key = `fork-${id}`;
    const first = await json<Thread>(await keyed(`/v1/threads/${id}/fork`, key, {}), 201);
    expect(first).toMatchObject({ forked_from: id, turn_count: 1 });
    await turn(id, "two");
    await evictDurableObject(threadStub(first.id));
    const retry = await json<Thread>(await keyed(`/v1/threads/${id}/fork`, key, {}), 201);
    expect(retry).toMatchObject({ id: first.id, turn_count: 1 });
    const reused = await keyed(`/v1/threads/${id}/fork`, key, { before_turn: one.id });
    expect(await json(reused, 422)).toMatchObject({ code: "idempotency_key_reused" });
    // A fresh key forks the source as it is now.
    const later = await json<Thread>(await keyed(`/v1/threads/${id}/fork`, `${key}-2`, {}), 201);
    expect(later.turn_count).toBe(2);
  });

  it("a retried import answers with the thread its first attempt made; another body is a 422", async () => {
    type Thread = { id: string; turn_count: number };
    const source = newThreadId();
    await createThread(source);
    await turn(source, "one");
    const exported = await (await api("GET", `/v1/threads/${source}/rollout`)).text();
    const key = { "idempotency-key": `import-${source}` };
    const first = await json<Thread>(await importRollout(undefined, exported, key), 201);
    expect(first).toMatchObject({ id: expect.stringMatching(/^thr_[0-9a-f]{40}$/), turn_count: 1 });
    await turn(first.id, "two");
    await evictDurableObject(threadStub(first.id));
    // The same lines with other line ends are the same upload.
    const crlf = exported.replaceAll("\n", "\r\n");
    const retry = await json<Thread>(await importRollout(undefined, crlf, key), 201);
    expect(retry).toMatchObject({ id: first.id, turn_count: 2 });
    const shorter = exported.split("\n").slice(0, 3).join("\n");
    const reused = await importRollout(undefined, shorter, key);
    expect(await json(reused, 422)).toMatchObject({ code: "idempotency_key_reused" });
    const unreadable = await importRollout(undefined, `${exported}{"not":"a line"}\n`, key);
    expect(await json(unreadable, 422)).toMatchObject({ code: "idempotency_key_reused" });
    // An explicit id, no key: a retry is a 409, as before.
    const named = newThreadId();
    await json(await importRollout(named, exported), 201);
    expect(await json(await importRollout(named, exported), 409)).toMatchObject({
      code: "thread_exists",
    });
    // A key that did not create the thread is no retry of what did.
    const other = await importRollout(named, exported, { "idempotency-key": "not-this-one" });
    expect(await json(other, 409)).toMatchObject({ code: "thread_exists" });
  });

  it("a key that is not 1-255 visible ASCII characters is a 400 naming the header", async () => {
    const id = newThreadId();
    await createThread(id);
    for (const bad of ["", "x".repeat(256), "has space"]) {
      const res = await keyed(`/v1/threads/${id}/turns`, bad, { input: "x" });
      const problem = await json<{ code: string; errors: { path: string }[] }>(res, 400);
      expect(problem.code).toBe("invalid_request");
      expect(problem.errors[0]?.path).toBe("idempotency-key");
    }
    expect(await userTexts(id)).toEqual([]);
  });
});
