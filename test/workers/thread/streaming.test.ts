import { afterEach, describe, expect, it, vi } from "vitest";
import { api, json, newThreadId, post, readSse } from "../helpers/api.ts";
import {
  createThread,
  events,
  getWith,
  type Item,
  type Turn,
  text,
  turn,
  until,
} from "../helpers/turns.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

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
