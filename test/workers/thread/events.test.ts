import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  EVENT_WINDOW_BYTES,
  EVENT_WINDOW_CUT_BYTES,
} from "../../../durable-objects/thread/storage/event-log.ts";
import { newThreadId, post, readSse, threadStub, untilRunning } from "../helpers/api.ts";
import { sqlRows } from "../helpers/rollout.ts";
import {
  createThread,
  getWith,
  type Turn,
  text,
  turn,
  until,
  untilTurnStatus,
} from "../helpers/turns.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

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
