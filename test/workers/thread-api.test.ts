import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  EVENT_WINDOW_BYTES,
  EVENT_WINDOW_CUT_BYTES,
} from "../../durable-objects/thread/storage/event-log.ts";
import { DEFAULT_MAX_OUTPUT_TOKENS } from "../../shared/models/index.ts";
import {
  api,
  DEV_KEY,
  importRollout,
  json,
  newThreadId,
  parseSse,
  post,
  readSse,
  type SseFrame,
  threadStub,
  untilRunning,
} from "./helpers/api.ts";
import { answerEvents, requestJson, responsesStream } from "./helpers/openai.ts";
import { checkThreadRollout, sqlRows } from "./helpers/rollout.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

interface Item {
  type: string;
  role?: string;
  id?: string;
  call_id?: string;
  name?: string;
  output?: unknown;
  content?: { type: string; text?: string }[];
}
interface Turn {
  id: string;
  status: string;
  items: Item[];
  pending_calls: Item[];
  error: { code: string; message: string } | null;
}
interface Prompt {
  instructions: string;
  input: Item[];
}

const text = (item: Item | undefined) => item?.content?.map((p) => p.text ?? "").join("") ?? "";
const isContext = (i: Item) =>
  i.role === "developer" || (i.role === "user" && /^(<|# AGENTS)/.test(text(i)));

async function createThread(id: string, config: Record<string, unknown> = {}) {
  return json(await post("/v1/threads", { id, ...config }), 201);
}
async function turn(id: string, input: string, extra: Record<string, unknown> = {}, status = 200) {
  return json<Turn>(await post(`/v1/threads/${id}/turns`, { input, ...extra }), status);
}
async function prompt(id: string): Promise<Prompt> {
  return json<Prompt>(await api("GET", `/v1/threads/${id}/prompt`));
}
const promptText = async (id: string) => (await api("GET", `/v1/threads/${id}/prompt`)).text();
/** The input array's JSON without its closing bracket: a byte-prefix check on prompts. */
const openInput = (p: Prompt) => JSON.stringify(p.input).slice(0, -1);
const events = (frames: SseFrame[]) => frames.map((f) => f.event);
const until = (type: string) => (frames: SseFrame[]) => frames.some((f) => f.event === type);
const waitFor = async (check: () => Promise<boolean>) => {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("condition not reached");
};
const untilTurnStatus = (id: string, turnId: string, status: string) =>
  waitFor(
    async () =>
      (await json<Turn>(await api("GET", `/v1/threads/${id}/turns/${turnId}`))).status === status,
  );

describe("streaming (SSE)", () => {
  it("streams a turn: turn.started first, context items flagged, deltas, token_count, one terminal event last", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    const res = await post(`/v1/threads/${id}/turns`, { input: "hello", stream: true });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const frames = await readSse(res);
    const types = events(frames);
    expect(types[0]).toBe("turn.started");
    expect(types.at(-1)).toBe("turn.completed");
    expect(types.filter((t) => t?.startsWith("turn.") && t !== "turn.started")).toEqual([
      "turn.completed",
    ]);
    expect(types).toContain("item.delta");
    expect(types).toContain("token_count");
    const ids = frames.map((f) => Number(f.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    const completed = frames
      .filter((f) => f.event === "item.completed")
      .map((f) => JSON.parse(f.data).data as { item: Item; context: boolean });
    expect(completed.map((c) => c.context)).toEqual([true, true, false, false]);
    const last = JSON.parse(frames.at(-1)?.data ?? "{}");
    expect(last.data).toMatchObject({ object: "turn", status: "completed" });
  });

  it("a client that disconnects does not stop the turn; Last-Event-ID replays what it missed", async () => {
    const id = newThreadId();
    await createThread(id);
    const res = await post(`/v1/threads/${id}/turns`, {
      input: "/slow 20 keep going",
      stream: true,
    });
    const seen = await readSse(res, until("item.delta"));
    const lastId = seen.at(-1)?.id;
    expect(lastId).toBeDefined();
    const turnId = JSON.parse(seen[0]?.data ?? "{}").turn_id as string;
    const resumed = await readSse(
      await getWith(`/v1/threads/${id}/events`, { "last-event-id": String(lastId) }),
      until("turn.completed"),
    );
    expect(Number(resumed[0]?.id)).toBe(Number(lastId) + 1);
    expect(events(resumed).at(-1)).toBe("turn.completed");
    const all = [...seen, ...resumed].map((f) => Number(f.id));
    expect(all).toEqual(all.map((_, i) => (all[0] ?? 0) + i));
    const done = await json<Turn>(await api("GET", `/v1/threads/${id}/turns/${turnId}`));
    expect(done.status).toBe("completed");
  });
});

describe("streaming a turn that an automatic compaction precedes", () => {
  it("streams the compaction as its own turn, then the turn itself, and ends after the turn's terminal event", async () => {
    const id = newThreadId();
    // A small window (16,000 tokens): the long message below fits it, and brings the next turn
    // past the compaction threshold (90%).
    await createThread(id, { model: "spindle-local-lite" });
    await turn(id, `${"x".repeat(58_000)} long`);
    const frames = await readSse(
      await post(`/v1/threads/${id}/turns`, { input: "after it", stream: true }),
    );
    const turns = frames
      .filter((f) => f.event === "turn.started" || f.event === "turn.completed")
      .map((f) => {
        const data = (JSON.parse(f.data) as { data: { id: string; kind: string } }).data;
        return `${f.event} ${data.kind}`;
      });
    expect(turns).toEqual([
      "turn.started compaction",
      "turn.completed compaction",
      "turn.started turn",
      "turn.completed turn",
    ]);
    const last = JSON.parse(frames.at(-1)?.data ?? "{}") as { data: Turn };
    expect(frames.at(-1)?.event).toBe("turn.completed");
    expect(text(last.data.items.at(-1))).toContain('"after it"');
  });
});

/** A GET with the dev key and extra headers (e.g. Last-Event-ID). */
const getWith = (path: string, headers: Record<string, string>) =>
  api("GET", path, undefined, DEV_KEY, headers);

describe("event storage", () => {
  it("a turn's events are stored by the time it answers, its finished message's deltas left out: replay from 0 has each, in order", async () => {
    const id = newThreadId();
    await createThread(id);
    const live = await readSse(
      await post(`/v1/threads/${id}/turns`, { input: "hello", stream: true }),
    );
    const done = (JSON.parse(live.at(-1)?.data ?? "{}") as { data: Turn }).data;
    const rows = await runInDurableObject(threadStub(id), (_i, state) =>
      state.storage.sql
        .exec<{ seq: number; body: string }>("SELECT seq, body FROM spindle_events ORDER BY seq")
        .toArray(),
    );
    const stored = rows.map((r) => JSON.parse(r.body) as { type: string; turn_id: string });
    // What was streamed, less the deltas: the completed message holds their text.
    expect(rows.map((r) => r.body)).toEqual(
      live.filter((f) => f.event !== "item.delta").map((f) => f.data),
    );
    expect(stored[0]?.type).toBe("turn.started");
    expect(stored.at(-1)).toMatchObject({ type: "turn.completed", turn_id: done.id });
    const answer = text(done.items.at(-1));
    expect(answer).not.toBe("");
    const deltas = live
      .filter((f) => f.event === "item.delta")
      .map((f) => (JSON.parse(f.data) as { data: { delta: string } }).data.delta);
    expect(deltas.join("")).toBe(answer);
    const replay = await readSse(
      await getWith(`/v1/threads/${id}/events`, { "last-event-id": "0" }),
      until("turn.completed"),
    );
    expect(replay.map((f) => Number(f.id))).toEqual(rows.map((r) => r.seq));
  });

  it("keeps the deltas of the message still streaming for replay, and drops them once it completes", async () => {
    const id = newThreadId();
    await createThread(id);
    const res = await post(`/v1/threads/${id}/turns`, {
      input: "/slow 150 keep going",
      stream: true,
    });
    const seen = await readSse(
      res,
      (frames) => frames.filter((f) => f.event === "item.delta").length >= 2,
    );
    const storedTypes = () =>
      runInDurableObject(threadStub(id), (_i, state) =>
        state.storage.sql
          .exec<{ body: string }>("SELECT body FROM spindle_events ORDER BY seq")
          .toArray()
          .map((r) => (JSON.parse(r.body) as { type: string }).type),
      );
    const streaming = await storedTypes();
    expect(streaming.filter((t) => t === "item.delta").length).toBeGreaterThanOrEqual(2);
    // A reader that reconnects mid-message gets the deltas it missed.
    const firstDelta = seen.find((f) => f.event === "item.delta");
    const resumed = await readSse(
      await getWith(`/v1/threads/${id}/events`, {
        "last-event-id": String(Number(firstDelta?.id) - 1),
      }),
      until("turn.completed"),
    );
    expect(resumed[0]).toEqual(firstDelta);
    await untilTurnStatus(id, JSON.parse(seen[0]?.data ?? "{}").turn_id, "completed");
    expect((await storedTypes()).filter((t) => t === "item.delta")).toEqual([]);
  });

  it("an event larger than a SQLite value (a 3 MB message) is stored in parts and replays whole", async () => {
    const id = newThreadId();
    await createThread(id);
    // Quotes and control characters grow in JSON: the stored text is larger than the input.
    const big = `${'a"\u0001'.repeat(400_000)}end`;
    const done = await turn(id, big);
    expect(done.status).toBe("completed");
    const rows = await runInDurableObject(threadStub(id), (_i, state) =>
      state.storage.sql
        .exec<{ seq: number; bytes: number; parts: number }>(
          `SELECT seq, length(CAST(body AS BLOB)) AS bytes,
             (SELECT COUNT(*) FROM spindle_parts p
               WHERE p.kind = 'event' AND p.key = CAST(e.seq AS TEXT)) AS parts
           FROM spindle_events e ORDER BY seq`,
        )
        .toArray(),
    );
    const partBytes = await sqlRows<{ bytes: number }>(
      id,
      "SELECT length(CAST(body AS BLOB)) AS bytes FROM spindle_parts",
    );
    expect(rows.at(-1)?.parts).toBeGreaterThan(0);
    expect(Math.max(...[...rows, ...partBytes].map((r) => r.bytes))).toBeLessThan(1_800_000);
    // The answer echoes the input in small deltas, so only the newest events are still kept.
    await evictDurableObject(threadStub(id));
    const replay = await readSse(
      await getWith(`/v1/threads/${id}/events`, {
        "last-event-id": String((rows[0]?.seq ?? 1) - 1),
      }),
      until("turn.completed"),
    );
    expect(replay.map((f) => Number(f.id))).toEqual(rows.map((r) => r.seq));
    const completed = JSON.parse(replay.at(-1)?.data ?? "{}") as { data: Turn };
    expect(completed.data.items).toEqual(done.items);
    expect(completed.data.items.some((i) => text(i) === big)).toBe(true);
  }, 60_000);
});

describe("event replay", () => {
  it("a reader far behind gets every stored event in pages, then the live ones, none twice", async () => {
    const id = newThreadId();
    await createThread(id);
    // More events than a replay page (32), then a turn that is still running during the replay.
    for (let i = 0; i < 8; i++) await turn(id, `turn ${i} with an answer long enough for deltas`);
    const slow = turn(id, "/slow 40 still running while the replay pages");
    await untilRunning(id);
    const frames = await readSse(
      await getWith(`/v1/threads/${id}/events`, { "last-event-id": "0" }),
      (seen) =>
        seen.filter((f) => f.event === "turn.completed").length === 9 ||
        seen.some((f) => f.event === "turn.failed"),
    );
    await slow;
    const ids = frames.map((f) => Number(f.id));
    const stored = await runInDurableObject(threadStub(id), (_i, state) =>
      state.storage.sql
        .exec<{ seq: number }>("SELECT seq FROM spindle_events ORDER BY seq")
        .toArray()
        .map((r) => r.seq),
    );
    // The running turn's deltas came live; once its message completed they left storage.
    expect(frames.some((f) => f.event === "item.delta")).toBe(true);
    const kept = ids.filter((_, i) => frames[i]?.event !== "item.delta");
    expect(kept.length).toBeGreaterThan(32);
    expect(kept).toEqual(stored.slice(0, kept.length));
    expect(ids).toEqual([...new Set(ids)].sort((a, b) => a - b));
    expect(frames.at(-1)?.event).toBe("turn.completed");
  });
});

describe("event retention", () => {
  it("events past their retention are dropped (410 event_expired); the newest stays so seqs continue", async () => {
    const id = newThreadId();
    await createThread(id);
    await turn(id, "one");
    const last = await runInDurableObject(threadStub(id), (_i, state) => {
      // Age every stored event past the 15-minute retention.
      state.storage.sql.exec("UPDATE spindle_events SET at = 0");
      return state.storage.sql
        .exec<{ seq: number }>("SELECT MAX(seq) AS seq FROM spindle_events")
        .one().seq;
    });
    await runDurableObjectAlarm(threadStub(id));
    const kept = await runInDurableObject(threadStub(id), (_i, state) =>
      state.storage.sql.exec<{ seq: number }>("SELECT seq FROM spindle_events").toArray(),
    );
    expect(kept).toEqual([{ seq: last }]);
    const expired = await getWith(`/v1/threads/${id}/events`, { "last-event-id": "1" });
    expect(expired.status).toBe(410);
    expect(await expired.json()).toMatchObject({ code: "event_expired" });
    const next = await post(`/v1/threads/${id}/turns`, { input: "two", stream: true });
    const frames = await readSse(next);
    expect(Number(frames[0]?.id)).toBe(last + 1);
  });
});

/** Replaces a thread's stored events with `count` recent ones, seq 1 on, whose text `body` gives. */
const replaceEvents = (id: string, count: number, body: (seq: number) => string) =>
  runInDurableObject(threadStub(id), (_i, state) => {
    const now = Date.now();
    state.storage.sql.exec("DELETE FROM spindle_events");
    for (let seq = 1; seq <= count; seq++) {
      state.storage.sql.exec(
        "INSERT INTO spindle_events (seq, at, body) VALUES (?, ?, ?)",
        seq,
        now,
        body(seq),
      );
    }
  });

describe("event window by bytes", () => {
  /** Stored events: seq and UTF-8 bytes of each, oldest first. */
  const storedEvents = (id: string) =>
    runInDurableObject(threadStub(id), (_i, state) =>
      state.storage.sql
        .exec<{ seq: number; bytes: number }>(
          "SELECT seq, length(CAST(body AS BLOB)) AS bytes FROM spindle_events ORDER BY seq",
        )
        .toArray(),
    );

  it("past 128 KiB, keeps the newest events within 96 KiB once a turn ends; asking from a dropped one is 410 event_expired", async () => {
    const id = newThreadId();
    await createThread(id);
    await turn(id, "one");
    // 100 recent events of 4 KiB before the turn's own: 400 KiB, past the byte budget only.
    const item = {
      type: "message",
      role: "user",
      content: [{ type: "input_text", text: "é".repeat(2_000) }],
    };
    await replaceEvents(id, 100, (seq) =>
      JSON.stringify({
        seq,
        type: "item.completed",
        turn_id: null,
        data: { item, context: false },
      }),
    );
    await evictDurableObject(threadStub(id));
    await turn(id, "two");
    const kept = await storedEvents(id);
    const bytes = kept.reduce((sum, e) => sum + e.bytes, 0);
    expect(bytes).toBeLessThanOrEqual(EVENT_WINDOW_CUT_BYTES);
    // One more (the newest dropped, 4 KiB) would not have fit.
    expect(bytes + 4_000).toBeGreaterThan(EVENT_WINDOW_CUT_BYTES);
    const first = kept[0]?.seq ?? 0;
    expect(first).toBeGreaterThan(1);
    expect(kept.at(-1)?.seq).toBeGreaterThan(100);
    const expired = await getWith(`/v1/threads/${id}/events`, {
      "last-event-id": String(first - 2),
    });
    expect(expired.status).toBe(410);
    expect(await expired.json()).toMatchObject({ code: "event_expired" });
    const replay = await readSse(
      await getWith(`/v1/threads/${id}/events`, { "last-event-id": String(first - 1) }),
      until("turn.completed"),
    );
    expect(replay.map((f) => Number(f.id))).toEqual(kept.map((e) => e.seq));
  });

  it("stays within 128 KiB turn after turn, cutting to 96 KiB when a turn passes it", async () => {
    const id = newThreadId();
    await createThread(id);
    const totals: number[] = [];
    for (let i = 0; i < 12; i++) {
      // The message is stored twice (its item.completed and the Turn that ends the turn).
      await turn(id, `${i} ${"y".repeat(20_000)}`);
      totals.push((await storedEvents(id)).reduce((sum, e) => sum + e.bytes, 0));
    }
    expect(Math.max(...totals)).toBeLessThanOrEqual(EVENT_WINDOW_BYTES);
    const cuts = totals.filter((bytes, i) => i > 0 && bytes < (totals[i - 1] ?? 0));
    expect(cuts.length).toBeGreaterThan(0);
    for (const bytes of cuts) expect(bytes).toBeLessThanOrEqual(EVENT_WINDOW_CUT_BYTES);
  });

  it("keeps the newest event even when it alone is larger than the budget, so seqs continue", async () => {
    const id = newThreadId();
    await createThread(id);
    // The user message and the Turn that ends the turn each carry 300 KB.
    const done = await turn(id, `${"x".repeat(300_000)} big`);
    const kept = await storedEvents(id);
    expect(kept).toHaveLength(1);
    expect(kept[0]?.bytes).toBeGreaterThan(EVENT_WINDOW_BYTES);
    const next = await readSse(
      await post(`/v1/threads/${id}/turns`, { input: "small", stream: true }),
    );
    expect(Number(next[0]?.id)).toBe((kept[0]?.seq ?? 0) + 1);
    expect(done.status).toBe("completed");
  });
});

describe("event window", () => {
  it("keeps the newest 2,000 events once a turn ends, and no fewer", async () => {
    const id = newThreadId();
    await createThread(id);
    await turn(id, "one");
    // 2,050 recent events before the turn's own: the count window, not age, must drop them.
    await replaceEvents(id, 2_050, (seq) => JSON.stringify({ type: "thread.status", seq }));
    await evictDurableObject(threadStub(id));
    await turn(id, "two");
    const range = () =>
      runInDurableObject(threadStub(id), (_i, state) =>
        state.storage.sql
          .exec<{ first: number; last: number; n: number }>(
            "SELECT MIN(seq) AS first, MAX(seq) AS last, COUNT(*) AS n FROM spindle_events",
          )
          .one(),
      );
    const { first, last, n } = await range();
    expect(last).toBeGreaterThan(2_050);
    expect(n).toBe(2_000);
    // The oldest went: all but the newest 2,000 stored (the turns' deltas never stayed).
    expect(first).toBeGreaterThan(51);
  });
});

describe("client-executed tools", () => {
  it("requires_action → outputs → the same turn completes with the output", async () => {
    const id = newThreadId();
    await createThread(id, { tools: [{ name: "lookup", description: "find things" }] });
    const paused = await turn(id, '/call lookup {"q":"x"}');
    expect(paused.status).toBe("requires_action");
    const [call] = paused.pending_calls;
    expect(call).toMatchObject({ type: "function_call", name: "lookup", arguments: '{"q":"x"}' });
    const thread = await json<{ status: string }>(await api("GET", `/v1/threads/${id}`));
    expect(thread.status).toBe("requires_action");

    const unknown = await post(`/v1/threads/${id}/turns/${paused.id}/outputs`, {
      items: [{ type: "function_call_output", call_id: "call_nope", output: "x" }],
    });
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ code: "unknown_call_id" });

    const done = await json<Turn>(
      await post(`/v1/threads/${id}/turns/${paused.id}/outputs`, {
        items: [{ type: "function_call_output", call_id: call?.call_id, output: "42 results" }],
      }),
    );
    expect(done.id).toBe(paused.id);
    expect(done.status).toBe("completed");
    expect(text(done.items.at(-1))).toContain("42 results");

    const again = await post(`/v1/threads/${id}/turns/${paused.id}/outputs`, {
      items: [{ type: "function_call_output", call_id: call?.call_id, output: "x" }],
    });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ code: "no_pending_calls" });
  });

  it("a new turn instead of outputs leaves the call unanswered in history and pairs it with aborted in the prompt", async () => {
    const id = newThreadId();
    await createThread(id, { tools: [{ name: "lookup" }] });
    const paused = await turn(id, "/call lookup {}");
    const callId = paused.pending_calls[0]?.call_id;
    await turn(id, "never mind");
    const history = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${id}/history?limit=1000`),
    );
    expect(history.data.filter((i) => i.type === "function_call_output")).toEqual([]);
    const p = await prompt(id);
    const at = p.input.findIndex((i) => i.type === "function_call" && i.call_id === callId);
    expect(p.input[at + 1]).toMatchObject({
      type: "function_call_output",
      call_id: callId,
      output: "aborted",
    });
    const old = await json<Turn>(await api("GET", `/v1/threads/${id}/turns/${paused.id}`));
    expect(old.status).not.toBe("requires_action");
  });
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

describe("thread operations", () => {
  it("rollback, then a turn with the same overrides emits the diff once and nothing more", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/a" });
    await turn(id, "one");
    const two = await turn(id, "two", { overrides: { cwd: "/b" } });
    expect(two.items.filter(isContext)).toHaveLength(1);
    const rolled = await json<{ object: string }>(
      await post(`/v1/threads/${id}/rollback`, { turns: 1 }),
    );
    expect(rolled.object).toBe("thread");
    const history = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${id}/history?limit=1000`),
    );
    expect(history.data.map(text).some((t) => t === "two")).toBe(false);
    const three = await turn(id, "three", { overrides: { cwd: "/b" } });
    const context = three.items.filter(isContext);
    expect(context).toHaveLength(1);
    expect(text(context[0])).toContain("<cwd>/b</cwd>");
    const four = await turn(id, "four");
    expect(four.items.filter(isContext)).toEqual([]);
  });

  it("fork replays the parent prefix byte-identically and adds only the diff", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    const one = await turn(id, "one");
    const afterOne = await promptText(id);
    const two = await turn(id, "two");
    const full = await promptText(id);

    const forkId = newThreadId();
    const fork = await json<{ id: string; forked_from: string }>(
      await post(`/v1/threads/${id}/fork`, { id: forkId }),
      201,
    );
    expect(fork).toMatchObject({ id: forkId, forked_from: id });
    expect(await promptText(forkId)).toBe(full);

    const early = newThreadId();
    await json(await post(`/v1/threads/${id}/fork`, { id: early, before_turn: two.id }), 201);
    expect(await promptText(early)).toBe(afterOne);
    expect(one.id).not.toBe(two.id);

    const next = await turn(forkId, "in the fork", { overrides: { cwd: "/other" } });
    expect(next.items.filter(isContext)).toHaveLength(1);
    const after = await prompt(forkId);
    expect(JSON.stringify(after.input).startsWith(openInput(JSON.parse(full)))).toBe(true);
  });

  it("compaction replaces history; the next turn re-injects the full context, then prompts are prefix-stable again", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo", agents_md: { directory: "/repo", text: "Be brief." } });
    await turn(id, "one");
    await turn(id, "two");
    const compaction = await json<Turn>(await post(`/v1/threads/${id}/compact`));
    expect(compaction.status).toBe("completed");
    const history = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${id}/history?limit=1000`),
    );
    expect(history.data.every((i) => i.type === "message" && i.role === "user")).toBe(true);
    expect(history.data.map(text)).toContain("two");

    const three = await turn(id, "three");
    expect(three.items.filter(isContext).map((i) => i.role)).toEqual(["developer", "user"]);
    const p3 = await prompt(id);
    await turn(id, "four");
    const p4 = await prompt(id);
    expect(JSON.stringify(p4.input).startsWith(openInput(p3))).toBe(true);
  });

  it("history cursors survive a reload after several rewrites, and a rewrite since makes them stale", async () => {
    const id = newThreadId();
    await createThread(id);
    type Page = { data: Item[]; next_cursor: string | null };
    const page = async (cursor?: string, status = 200) =>
      json<Page>(
        await api(
          "GET",
          `/v1/threads/${id}/history?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
        ),
        status,
      );
    // Two compactions: the engine's history version after a reload counts from the newest one
    // only (as Codex resumes), so it differs from the live one.
    for (const input of ["one", "two"]) await turn(id, input);
    expect((await json<Turn>(await post(`/v1/threads/${id}/compact`))).status).toBe("completed");
    for (const input of ["three", "four"]) await turn(id, input);
    expect((await json<Turn>(await post(`/v1/threads/${id}/compact`))).status).toBe("completed");
    for (const input of ["five", "six"]) await turn(id, input);
    const first = await page();
    const cursor = first.next_cursor ?? "";
    expect(cursor).not.toBe("");
    const second = await page(cursor);
    await evictDurableObject(threadStub(id));
    expect(await page(cursor)).toEqual(second);
    expect((await json<Turn>(await post(`/v1/threads/${id}/compact`))).status).toBe("completed");
    const stale = await json<{ code: string }>(
      await api("GET", `/v1/threads/${id}/history?cursor=${encodeURIComponent(cursor)}`),
      400,
    );
    expect(stale.code).toBe("invalid_request");
  });

  it("inject records user messages without a turn", async () => {
    const id = newThreadId();
    await createThread(id);
    await turn(id, "one");
    await json(await post(`/v1/threads/${id}/inject`, { text: "by the way" }));
    const history = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${id}/history?limit=1000`),
    );
    expect(text(history.data.at(-1))).toBe("by the way");
    const check = await checkThreadRollout(id);
    const last = check.lines.at(-1) ?? "";
    expect(last).toContain('"by the way"');
    expect(check.lines.filter((l) => l.includes('"type":"turn_context"'))).toHaveLength(1);
  });
});

describe("export and import", () => {
  it("export → import → export is byte-identical apart from the session_meta line", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    await turn(id, "one");
    await turn(id, "two", { overrides: { cwd: "/x" } });
    const exported = await (await api("GET", `/v1/threads/${id}/rollout`)).text();
    const copy = newThreadId();
    const imported = await importRollout(copy, exported);
    expect(imported.status).toBe(201);
    const again = await (await api("GET", `/v1/threads/${copy}/rollout`)).text();
    const a = exported.split("\n");
    const b = again.split("\n");
    expect(b.length).toBe(a.length);
    expect(b.slice(1)).toEqual(a.slice(1));
    expect(JSON.parse(b[0] ?? "{}").payload.id).toBe(copy);
    expect(await promptText(copy)).toBe(await promptText(id));
  });

  it("a malformed line is a 400 naming its line; nothing is created", async () => {
    const copy = newThreadId();
    const res = await importRollout(copy, `${sessionMeta()}\n{"not":"a line"}\n`);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      code: "invalid_request",
      errors: [{ path: "/line/2" }],
    });
    expect((await api("GET", `/v1/threads/${copy}`)).status).toBe(404);
  });

  it("imports a hand-written Codex rollout with a compaction and a rollback and resumes from it", async () => {
    const lines = [
      sessionMeta(),
      ...codexTurn("t1", "first question", "first answer"),
      line("compacted", {
        message: "summary of the start",
        replacement_history: [userItem("first question"), userItem("summary of the start")],
      }),
      ...codexTurn("t2", "second question", "second answer"),
      line("event_msg", { type: "thread_rolled_back", num_turns: 1 }),
      line("something_new", { from: "a newer codex" }),
    ];
    const copy = newThreadId();
    const res = await importRollout(copy, `${lines.join("\n")}\n`);
    expect(res.status).toBe(201);
    const thread = (await res.json()) as {
      config: { model: string; permissions: { sandbox: string }; environments: { cwd: string }[] };
    };
    expect(thread.config.model).toBe("spindle-local");
    expect(thread.config.permissions.sandbox).toBe("read-only");
    expect(thread.config.environments[0]?.cwd).toBe("/repo");
    const history = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${copy}/history?limit=1000`),
    );
    expect(history.data.map(text)).toEqual(["first question", "summary of the start"]);
    const next = await turn(copy, "third question");
    expect(next.status).toBe("completed");
    // The compaction cleared the reference: the first turn after import sends the full context.
    expect(next.items.filter(isContext).map((i) => i.role)).toEqual(["developer", "user"]);
    const exported = await (await api("GET", `/v1/threads/${copy}/rollout`)).text();
    expect(exported).toContain('"type":"something_new"');
  });
});

describe("the openai provider", () => {
  it("a 429 then success: the turn completes, usage (with cached tokens) is recorded", async () => {
    const id = newThreadId();
    await createThread(id, { model: "gpt-test" });
    const bodies: Record<string, unknown>[] = [];
    const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      if (!url.startsWith("https://openai.test/")) throw new Error(`unexpected fetch ${url}`);
      bodies.push(await requestJson(init));
      if (bodies.length === 1)
        return new Response("{}", { status: 429, headers: { "retry-after": "0" } });
      return new Response(responsesStream(answerEvents("Hello from upstream")), {
        headers: { "content-type": "text/event-stream" },
      });
    });
    const done = await turn(id, "hi");
    expect(spy).toHaveBeenCalledTimes(2);
    expect(done.status).toBe("completed");
    expect(text(done.items.at(-1))).toBe("Hello from upstream");
    expect(bodies[1]).toMatchObject({
      model: "gpt-test",
      store: false,
      stream: true,
      prompt_cache_key: id,
    });
    const thread = await json<{
      token_usage: { last_token_usage: { cached_input_tokens: number } };
    }>(await api("GET", `/v1/threads/${id}`));
    expect(thread.token_usage.last_token_usage.cached_input_tokens).toBe(20);
  });

  it("a reasoning model's request carries reasoning {effort, summary}, encrypted reasoning and text {verbosity}; a turn override changes the effort", async () => {
    const id = newThreadId();
    await createThread(id, { model: "gpt-think", cwd: "/repo" });
    const bodies: Record<string, unknown>[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (_input, init) => {
      bodies.push(await requestJson(init));
      return new Response(responsesStream(answerEvents(`answer ${bodies.length}`)), {
        headers: { "content-type": "text/event-stream" },
      });
    });
    await turn(id, "hi");
    await turn(id, "think harder", { overrides: { reasoning: { effort: "xhigh" } } });
    const [first, second] = bodies;
    const instructions = first?.instructions;
    expect(typeof instructions).toBe("string");
    expect({ ...first, input: undefined }).toEqual({
      model: "gpt-5.4",
      instructions,
      input: undefined,
      tools: [],
      tool_choice: "auto",
      parallel_tool_calls: true,
      reasoning: { effort: "medium", summary: "auto" },
      store: false,
      stream: true,
      include: ["reasoning.encrypted_content"],
      prompt_cache_key: id,
      text: { verbosity: "low" },
      // The catalog entry's output limit (the configured default).
      max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
    });
    expect(second?.reasoning).toEqual({ effort: "xhigh", summary: "auto" });
    expect((await prompt(id)) as unknown).toMatchObject({
      reasoning: { effort: "xhigh", summary: "auto" },
      text: { verbosity: "low" },
    });
  });

  it("GET …/prompt is byte for byte the input of the next request, which only adds the new user message", async () => {
    const id = newThreadId();
    await createThread(id, {
      model: "gpt-think",
      cwd: "/repo",
      agents_md: { directory: "/repo", text: "Be brief." },
      tools: [{ name: "lookup", parameters: { type: "object" } }],
    });
    const bodies: { input: unknown[]; [key: string]: unknown }[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (_input, init) => {
      bodies.push(await requestJson(init));
      return new Response(responsesStream(answerEvents(`answer ${bodies.length}`)), {
        headers: { "content-type": "text/event-stream" },
      });
    });
    await turn(id, "first");
    const previewText = await promptText(id);
    const preview = JSON.parse(previewText) as { input: Item[]; [key: string]: unknown };
    // No bookkeeping: no item carries an id or the turn-id passthrough.
    expect(previewText).not.toContain('"id"');
    expect(previewText).not.toContain("internal_chat_message_metadata_passthrough");
    await turn(id, "second");
    const sent = bodies[1];
    if (!sent) throw new Error("no second request");
    const n = preview.input.length;
    expect(JSON.stringify(sent.input.slice(0, n))).toBe(JSON.stringify(preview.input));
    expect(sent.input.slice(n)).toEqual([
      { type: "message", role: "user", content: [{ type: "input_text", text: "second" }] },
    ]);
    // The other channels as previewed; the provider adds model, tool_choice, store, stream,
    // include, prompt_cache_key, and `strict: false` on a tool that does not set it.
    expect(sent.instructions).toBe(preview.instructions);
    expect(sent.parallel_tool_calls).toBe(preview.parallel_tool_calls);
    expect(sent.reasoning).toEqual(preview.reasoning);
    expect(sent.text).toEqual(preview.text);
    expect(preview.tools).toEqual([
      {
        type: "function",
        name: "lookup",
        description: "",
        parameters: { type: "object" },
      },
    ]);
    expect(sent.tools).toEqual([
      {
        type: "function",
        name: "lookup",
        description: "",
        parameters: { type: "object" },
        strict: false,
      },
    ]);
  });

  it("a stream cut mid-item fails the turn with provider_error and leaves no partial item", async () => {
    const id = newThreadId();
    await createThread(id, { model: "gpt-test" });
    vi.spyOn(globalThis, "fetch").mockImplementation(async () => {
      const encoder = new TextEncoder();
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(
            encoder.encode(responsesStream([{ type: "response.output_text.delta", delta: "Hel" }])),
          );
          controller.error(new Error("connection reset"));
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const failed = await turn(id, "hi");
    expect(failed.status).toBe("failed");
    expect(failed.error?.code).toBe("provider_error");
    expect(failed.items.some((i) => i.role === "assistant")).toBe(false);
    vi.restoreAllMocks();
    vi.spyOn(globalThis, "fetch").mockImplementation(
      async () =>
        new Response(responsesStream(answerEvents("recovered")), {
          headers: { "content-type": "text/event-stream" },
        }),
    );
    const next = await turn(id, "again");
    expect(next.status).toBe("completed");
  });
});

function line(type: string, payload: object): string {
  return JSON.stringify({ timestamp: "2026-01-01T00:00:00.000Z", type, payload });
}
function userItem(text: string) {
  return { type: "message", role: "user", content: [{ type: "input_text", text }] };
}
/** One Codex turn's lines, as Codex writes them (turn_context before the user message). */
function codexTurn(turnId: string, question: string, answer: string): string[] {
  return [
    line("event_msg", { type: "task_started", turn_id: turnId }),
    line("turn_context", {
      turn_id: turnId,
      cwd: "/repo",
      approval_policy: "never",
      sandbox_policy: { mode: "read-only" },
      model: "spindle-local",
      summary: "auto",
    }),
    line("response_item", userItem(question)),
    line("event_msg", { type: "user_message", message: question }),
    line("response_item", {
      type: "message",
      role: "assistant",
      content: [{ type: "output_text", text: answer }],
    }),
    line("event_msg", { type: "task_complete", turn_id: turnId, last_agent_message: answer }),
  ];
}
function sessionMeta(): string {
  return line("session_meta", {
    id: "codex-session",
    timestamp: "2026-01-01T00:00:00.000Z",
    cwd: "/repo",
    originator: "codex_cli_rs",
    cli_version: "0.150.0",
  });
}
