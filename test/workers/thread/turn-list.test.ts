import { runDurableObjectAlarm } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { previewText } from "../../../shared/api/index.ts";
import { api, GLOBEX_KEY, json, newThreadId, post, threadStub } from "../helpers/api.ts";
import { sqlRows } from "../helpers/rollout.ts";
import { createThread, type Turn, text, turn } from "../helpers/turns.ts";

interface Summary {
  object: string;
  id: string;
  kind: string;
  trigger?: string;
  status: string;
  created_at: string;
  completed_at: string | null;
  usage: unknown;
  input_preview: string | null;
  output_preview: string | null;
  first_seq: number;
  last_seq: number;
  rollback_before: { turns: number; at: string } | null;
}
interface Page {
  object: string;
  data: Summary[];
  next_cursor: string | null;
}

const list = (id: string, query = "") => api("GET", `/v1/threads/${id}/turns${query}`);
const page = async (id: string, query = "") => json<Page>(await list(id, query));

/** Every page of the thread's turns, `limit` at a time. */
async function allPages(id: string, limit: number): Promise<Page[]> {
  const pages: Page[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`;
    const next: Page = await page(id, `?limit=${limit}${query}`);
    pages.push(next);
    cursor = next.next_cursor;
  } while (cursor !== null);
  return pages;
}

/** The thread's exported rollout lines, seq 1 first. */
async function rolloutLines(id: string) {
  return (await (await api("GET", `/v1/threads/${id}/rollout`)).text())
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { timestamp: string; type: string; payload: { type?: string } });
}

const rollback = async (id: string, turns: number) =>
  json(await post(`/v1/threads/${id}/rollback`, { turns }));

afterEach(() => {
  vi.restoreAllMocks();
});

describe("GET /v1/threads/{id}/turns", () => {
  it("lists the turns newest first, a page at a time, with no turn twice and none left out", async () => {
    const id = newThreadId();
    await createThread(id);
    const ids: string[] = [];
    for (const n of [1, 2, 3, 4, 5, 6, 7]) ids.push((await turn(id, `turn ${n}`)).id);
    const newestFirst = ids.toReversed();

    const whole = await page(id);
    expect(whole).toMatchObject({ object: "list", next_cursor: null });
    expect(whole.data.map((t) => t.id)).toEqual(newestFirst);

    const pages = await allPages(id, 3);
    expect(pages.map((p) => p.data.length)).toEqual([3, 3, 1]);
    expect(pages.flatMap((p) => p.data.map((t) => t.id))).toEqual(newestFirst);
    expect(pages.flatMap((p) => p.data)).toEqual(whole.data);
  });

  it("a cursor goes on where its page ended while new turns start", async () => {
    const id = newThreadId();
    await createThread(id);
    const first = (await turn(id, "first")).id;
    const second = (await turn(id, "second")).id;
    const head = await page(id, "?limit=1");
    expect(head.data.map((t) => t.id)).toEqual([second]);
    await turn(id, "third");
    const rest = await page(id, `?limit=1&cursor=${encodeURIComponent(head.next_cursor ?? "")}`);
    expect(rest).toMatchObject({ next_cursor: null });
    expect(rest.data.map((t) => t.id)).toEqual([first]);
  });

  it("describes each turn: times, usage, seq range, and previews of its input and output", async () => {
    const id = newThreadId();
    await createThread(id);
    const long = `${"word ".repeat(30)}\n\n  ${"x".repeat(300)}`;
    const done = await turn(id, long);
    const [summary] = (await page(id)).data;
    const [line] = done.items
      .filter((i) => i.type === "message" && i.role === "assistant")
      .slice(-1);
    expect(summary).toMatchObject({
      object: "turn.summary",
      id: done.id,
      kind: "turn",
      status: "completed",
      output_preview: previewText(text(line)),
      rollback_before: null,
    });
    expect(summary?.trigger).toBeUndefined();
    expect(summary?.input_preview).toBe(`${"word ".repeat(30)}${"x".repeat(49)}…`);
    expect(summary?.input_preview).toHaveLength(200);
    const read = await json<{ usage: unknown }>(
      await api("GET", `/v1/threads/${id}/turns/${done.id}`),
    );
    expect(summary?.usage).toEqual(read.usage);
    expect(summary?.first_seq).toBeLessThan(summary?.last_seq ?? 0);
    const created = Date.parse(summary?.created_at ?? "");
    const completed = Date.parse(summary?.completed_at ?? "");
    expect(completed).toBeGreaterThanOrEqual(created);

    // The seq range is the turn's own lines of the exported rollout.
    const lines = (await (await api("GET", `/v1/threads/${id}/rollout`)).text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { timestamp: string; type: string; payload: { type?: string } });
    const own = lines.slice((summary?.first_seq ?? 0) - 1, summary?.last_seq);
    expect(own[0]?.payload.type).toBe("task_started");
    expect(own.at(-1)?.payload.type).toBe("task_complete");
    expect(own[0]?.timestamp).toBe(summary?.created_at);
    expect(own.at(-1)?.timestamp).toBe(summary?.completed_at);
  });

  it("lists a compaction as one, and a turn waiting on a client tool as not completed", async () => {
    const id = newThreadId();
    await createThread(id, { tools: [{ name: "lookup", description: "find things" }] });
    await turn(id, "hello");
    const compaction = await json<Turn>(await post(`/v1/threads/${id}/compact`));
    const paused = await turn(id, '/call lookup {"q":"x"}');
    expect(paused.status).toBe("requires_action");

    const [waiting, compacted] = (await page(id)).data;
    expect(waiting).toMatchObject({
      id: paused.id,
      kind: "turn",
      status: "requires_action",
      completed_at: null,
      input_preview: '/call lookup {"q":"x"}',
      output_preview: null,
    });
    expect(compacted).toMatchObject({
      id: compaction.id,
      kind: "compaction",
      trigger: "manual",
      status: "completed",
      input_preview: null,
    });
    expect(compacted?.completed_at).not.toBeNull();
  });

  it("lists the same after a restore from R2", async () => {
    const id = newThreadId();
    await createThread(id, { tools: [{ name: "lookup" }] });
    await turn(id, "one");
    await json(await post(`/v1/threads/${id}/compact`));
    await turn(id, "two\nlines");
    await turn(id, "/call lookup {}");
    const before = await allPages(id, 2);
    await runDurableObjectAlarm(threadStub(id));
    await json(await post(`/v1/threads/${id}/restore`));
    // The restored SQLite holds none of the flushed lines: the previews come from R2.
    const [{ first } = { first: null }] = await sqlRows<{ first: number | null }>(
      id,
      "SELECT MIN(seq) AS first FROM spindle_rollout",
    );
    expect(first ?? Number.POSITIVE_INFINITY).toBeGreaterThan(
      before.at(-1)?.data.at(-1)?.last_seq ?? 0,
    );
    expect(await allPages(id, 2)).toEqual(before);
    expect(before.flatMap((p) => p.data.map((t) => t.kind))).toEqual([
      "turn",
      "turn",
      "compaction",
      "turn",
    ]);
  });

  it("marks the turn after a rollback, the same on every page and after a restore", async () => {
    const id = newThreadId();
    await createThread(id);
    const one = (await turn(id, "one")).id;
    const two = (await turn(id, "two")).id;
    await rollback(id, 1);
    const three = (await turn(id, "three")).id;
    const four = (await turn(id, "four")).id;
    // Two rollbacks in a row read as one: their turns summed, the newer one's time.
    await rollback(id, 1);
    await rollback(id, 1);
    const five = (await turn(id, "five")).id;

    const whole = await page(id);
    expect(whole.data.map((t) => t.id)).toEqual([five, four, three, two, one]);
    const lines = await rolloutLines(id);
    const rolledBack = lines.filter(
      (l) => l.type === "event_msg" && l.payload.type === "thread_rolled_back",
    );
    expect(rolledBack).toHaveLength(3);
    expect(whole.data.map((t) => t.rollback_before)).toEqual([
      { turns: 2, at: rolledBack[2]?.timestamp },
      null,
      { turns: 1, at: rolledBack[0]?.timestamp },
      null,
      null,
    ]);

    // A page boundary between a turn and the rollback before it changes nothing.
    for (const limit of [1, 2, 3, 4]) {
      expect(
        (await allPages(id, limit)).flatMap((p) => p.data),
        `limit ${limit}`,
      ).toEqual(whole.data);
    }

    await runDurableObjectAlarm(threadStub(id));
    await json(await post(`/v1/threads/${id}/restore`));
    // The rollback lines are now read from R2 with the turns'.
    const [{ first } = { first: null }] = await sqlRows<{ first: number | null }>(
      id,
      "SELECT MIN(seq) AS first FROM spindle_rollout",
    );
    expect(first ?? Number.POSITIVE_INFINITY).toBeGreaterThan(whole.data[0]?.last_seq ?? 0);
    expect((await allPages(id, 2)).flatMap((p) => p.data)).toEqual(whole.data);
  });

  it("answers 400 with the parameter for a limit out of bounds and for a bad cursor", async () => {
    const id = newThreadId();
    await createThread(id);
    await turn(id, "one");
    const cases: [string, string][] = [
      ["?limit=0", "limit"],
      ["?limit=101", "limit"],
      ["?limit=ten", "limit"],
      ["?cursor=nonsense", "cursor"],
      [`?cursor=${btoa(JSON.stringify({ o: -1 }))}`, "cursor"],
    ];
    for (const [query, at] of cases) {
      const problem = await json<{ code: string; errors: { path: string }[] }>(
        await list(id, query),
        400,
      );
      expect({ query, code: problem.code, at: problem.errors.map((e) => e.path) }).toEqual({
        query,
        code: "invalid_request",
        at: [at],
      });
    }
    expect((await page(id, "?limit=100")).data).toHaveLength(1);
    expect((await page(id, "?limit=1")).data).toHaveLength(1);
  });

  it("answers 404 for an unknown thread and for another tenant's key, and lists a new thread empty", async () => {
    const id = newThreadId();
    await createThread(id);
    expect(await page(id)).toEqual({ object: "list", data: [], next_cursor: null });
    await turn(id, "mine");
    const unknown = await json<{ code: string }>(await list(newThreadId()), 404);
    expect(unknown.code).toBe("not_found");
    const other = await json<{ code: string }>(
      await api("GET", `/v1/threads/${id}/turns`, undefined, GLOBEX_KEY),
      404,
    );
    expect(other.code).toBe("not_found");
  });
});
