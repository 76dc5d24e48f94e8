import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  api,
  json,
  newThreadId,
  parseSse,
  post,
  readSse,
  threadStub,
  untilRunning,
} from "../helpers/api.ts";
import { checkThreadRollout } from "../helpers/rollout.ts";
import {
  createThread,
  events,
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

describe("concurrency (on_busy)", () => {
  it("rejects a second turn with 409 thread_busy by default", async () => {
    const id = newThreadId();
    await createThread(id);
    const slow = turn(id, "/slow 150 wait");
    await untilRunning(id);
    const busy = await post(`/v1/threads/${id}/turns`, { input: "me too" });
    expect(busy.status).toBe(409);
    expect(await busy.json()).toMatchObject({ code: "thread_busy" });
    expect((await slow).status).toBe("completed");
  });

  it("steer needs the running turn's id: a wrong one is 409 turn_mismatch; the right one joins the turn", async () => {
    const id = newThreadId();
    await createThread(id);
    const first = await turn(id, "first");
    const res = await post(`/v1/threads/${id}/turns`, { input: "/slow 150 working", stream: true });
    const head = await readSse(res, until("item.delta"));
    const runningId = JSON.parse(head[0]?.data ?? "{}").turn_id as string;

    const wrong = await post(`/v1/threads/${id}/turns/${first.id}/steer`, { input: "x" });
    expect(wrong.status).toBe(409);
    expect(await wrong.json()).toMatchObject({ code: "turn_mismatch" });
    const wrongBusy = await post(`/v1/threads/${id}/turns`, {
      input: "x",
      on_busy: "steer",
      expected_turn_id: first.id,
    });
    expect(wrongBusy.status).toBe(409);
    expect(await wrongBusy.json()).toMatchObject({ code: "turn_mismatch" });

    const steered = await post(`/v1/threads/${id}/turns/${runningId}/steer`, {
      input: "also this",
    });
    expect(steered.status).toBe(200);
    await untilTurnStatus(id, runningId, "completed");
    const done = await json<Turn>(await api("GET", `/v1/threads/${id}/turns/${runningId}`));
    const users = done.items.filter((i) => i.role === "user" && !isContext(i)).map(text);
    expect(users).toEqual(["/slow 150 working", "also this"]);
    expect(text(done.items.at(-1))).toContain('"also this"');
  });

  it("on_busy steer with nothing running starts a turn of its own and leaves the ended turn as it was", async () => {
    const id = newThreadId();
    await createThread(id);
    const first = await turn(id, "first");
    const next = await turn(id, "second", { on_busy: "steer", expected_turn_id: first.id });
    expect(next.id).not.toBe(first.id);
    expect(next.status).toBe("completed");
    const again = await json<Turn>(await api("GET", `/v1/threads/${id}/turns/${first.id}`));
    expect(again).toEqual(first);
  });

  it("interrupt mid-stream ends the turn as interrupted with <turn_aborted> and a turn_aborted line", async () => {
    const id = newThreadId();
    await createThread(id);
    const res = await post(`/v1/threads/${id}/turns`, {
      input: "/slow 40 long answer please",
      stream: true,
    });
    const reader = res.body?.pipeThrough(new TextDecoderStream()).getReader();
    let streamed = "";
    while (!streamed.includes("event: item.delta")) streamed += (await reader?.read())?.value ?? "";
    const turnId = /"turn_id":"([^"]+)"/.exec(streamed)?.[1] ?? "";
    const stopped = await json<Turn>(await post(`/v1/threads/${id}/turns/${turnId}/interrupt`));
    expect(stopped.status).toBe("interrupted");
    for (;;) {
      const chunk = await reader?.read();
      if (!chunk || chunk.done) break;
      streamed += chunk.value;
    }
    const frames = events(parseSse(streamed));
    expect(frames.at(-1)).toBe("turn.interrupted");
    expect(stopped.items.some((i) => i.role === "assistant")).toBe(false);
    expect(text(stopped.items.at(-1))).toMatch(/^<turn_aborted>/);
    const check = await checkThreadRollout(id);
    expect(check.lines.some((l) => l.includes('"type":"turn_aborted"'))).toBe(true);
    expect((await turn(id, "next")).status).toBe("completed");
  });

  it("on_busy interrupt stops the running turn and runs the new one", async () => {
    const id = newThreadId();
    await createThread(id);
    const slow = turn(id, "/slow 40 long");
    await untilRunning(id);
    const next = await turn(id, "instead", { on_busy: "interrupt" });
    expect(next.status).toBe("completed");
    expect((await slow).status).toBe("interrupted");
  });

  it("a queued turn runs after the running one, and survives the instance being reset", async () => {
    const id = newThreadId();
    await createThread(id);
    const slow = turn(id, "/slow 60 first, slowly");
    await untilRunning(id);
    const queued = await json<Turn>(
      await post(`/v1/threads/${id}/turns`, { input: "second", on_busy: "queue" }),
      202,
    );
    expect(queued.status).toBe("in_progress");
    // The instance goes away mid-turn: memory lost, SQLite (and the queue) kept.
    await runInDurableObject(threadStub(id), (_i, state) =>
      state.abort("reset for the test"),
    ).catch(() => undefined);
    await slow.catch(() => undefined);
    const cut = await json<{ status: string }>(await api("GET", `/v1/threads/${id}`));
    expect(cut.status).not.toBe("requires_action");
    await runDurableObjectAlarm(threadStub(id));
    await untilTurnStatus(id, queued.id, "completed");
    const ran = await json<Turn>(await api("GET", `/v1/threads/${id}/turns/${queued.id}`));
    expect(ran.items.some((i) => text(i) === "second")).toBe(true);
  });

  it("a queued turn whose input is larger than a SQLite value waits in parts and runs whole", async () => {
    const id = newThreadId();
    await createThread(id);
    const big = `${'b"\u0002'.repeat(400_000)}end`;
    const slow = turn(id, "/slow 60 first, slowly");
    await untilRunning(id);
    const queued = await json<Turn>(
      await post(`/v1/threads/${id}/turns`, { input: big, on_busy: "queue" }),
      202,
    );
    await runInDurableObject(threadStub(id), (_i, state) =>
      state.abort("reset for the test"),
    ).catch(() => undefined);
    await slow.catch(() => undefined);
    await runDurableObjectAlarm(threadStub(id));
    await untilTurnStatus(id, queued.id, "completed");
    const ran = await json<Turn>(await api("GET", `/v1/threads/${id}/turns/${queued.id}`));
    expect(ran.items.some((i) => text(i) === big)).toBe(true);
  });
});
