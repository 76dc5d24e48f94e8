import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { type Sql, sqlOf } from "../../../../durable-objects/thread/storage/sql.ts";
import {
  encodeTurnGroup,
  RECENT_TURN_ROWS,
  TURN_GROUP_ROWS,
  type TurnRow,
  TurnRows,
  turnIdHash,
} from "../../../../durable-objects/thread/storage/turn-rows.ts";
import { api, importRollout, json, newThreadId, threadStub } from "../../helpers/api.ts";

const row = (n: number, over: Partial<TurnRow> = {}): TurnRow => ({
  id: `turn_${n}`,
  ordinal: 10 * n,
  kind: "turn",
  status: "completed",
  first_seq: 10 * n,
  last_seq: 10 * n + 9,
  pending_calls: [],
  usage: {
    input_tokens: 100 * n,
    cached_input_tokens: n % 7,
    output_tokens: 20,
    reasoning_output_tokens: 0,
    total_tokens: 100 * n + 20,
  },
  error: null,
  ...over,
});

const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

function withRows<T>(body: (rows: TurnRows, sql: Sql) => T): Promise<T> {
  return runInDurableObject(threadStub(newThreadId()), (_i, state) => {
    const sql = sqlOf(state.storage.sql);
    return body(new TurnRows(sql), sql);
  });
}

const stored = (sql: Sql) => ({
  rows: sql<{ n: number }>`SELECT COUNT(*) AS n FROM spindle_turns`.one().n,
  groups: sql.tables.ifExists(
    "spindle_turn_groups",
    0,
    () => sql<{ n: number }>`SELECT COUNT(*) AS n FROM spindle_turn_groups`.one().n,
  ),
});

describe("TurnRows: older finished turns are stored in groups", () => {
  it("groups the oldest finished rows, keeps the newest as rows, and reads every turn back exactly", async () => {
    const total = RECENT_TURN_ROWS + TURN_GROUP_ROWS + 36;
    const result = await withRows((rows, sql) => {
      for (const n of range(1, total)) rows.put(row(n));
      const before = stored(sql);
      const written = rows.pack();
      const reloaded = new TurnRows(sql);
      return {
        before,
        written,
        after: stored(sql),
        read: range(1, total).map((n) => reloaded.get(`turn_${n}`)),
        last: reloaded.last(),
        missing: reloaded.get("turn_none"),
        again: rows.pack(),
      };
    });
    expect(result.before).toEqual({ rows: total, groups: 0 });
    expect(result.written).toBe(1);
    expect(result.after).toEqual({ rows: total - TURN_GROUP_ROWS, groups: 1 });
    expect(result.read).toEqual(range(1, total).map((n) => row(n)));
    expect(result.last).toEqual(row(total));
    expect(result.missing).toBeUndefined();
    expect(result.again).toBe(0);
  });

  it("writes nothing while fewer rows than a group past the newest are stored", async () => {
    const result = await withRows((rows, sql) => {
      for (const n of range(1, RECENT_TURN_ROWS + TURN_GROUP_ROWS - 1)) rows.put(row(n));
      return { written: rows.pack(), stored: stored(sql) };
    });
    expect(result).toEqual({
      written: 0,
      stored: { rows: RECENT_TURN_ROWS + TURN_GROUP_ROWS - 1, groups: 0 },
    });
  });

  it("leaves an unfinished turn and a long row as rows, and groups the finished ones after them", async () => {
    const paused = row(1, {
      status: "requires_action",
      pending_calls: [{ type: "function_call", name: "f", arguments: "{}", call_id: "c" }],
    });
    const long = row(2, {
      status: "failed",
      error: { code: "provider_error", message: "x".repeat(10_000) },
    });
    const total = 2 + TURN_GROUP_ROWS + RECENT_TURN_ROWS;
    const result = await withRows((rows, sql) => {
      rows.put(paused);
      rows.put(long);
      for (const n of range(3, total)) rows.put(row(n));
      const written = rows.pack();
      return {
        written,
        kept: sql<{ turn_id: string }>`SELECT turn_id FROM spindle_turns ORDER BY ordinal`
          .toArray()
          .map((r) => r.turn_id),
        read: range(1, total).map((n) => rows.get(`turn_${n}`)),
      };
    });
    expect(result.written).toBe(1);
    expect(result.kept).toEqual([
      "turn_1",
      "turn_2",
      ...range(total - RECENT_TURN_ROWS + 1, total).map((n) => `turn_${n}`),
    ]);
    expect(result.read).toEqual([paused, long, ...range(3, total).map((n) => row(n))]);
  });

  it("reads a row written for a grouped turn instead of the group's, also once it is grouped again", async () => {
    const changed = row(5, {
      status: "failed",
      error: { code: "provider_error", message: "late" },
    });
    const result = await withRows((rows) => {
      for (const n of range(1, RECENT_TURN_ROWS + TURN_GROUP_ROWS)) rows.put(row(n));
      rows.pack();
      rows.put(changed);
      const asRow = rows.get("turn_5");
      // Enough newer turns that the changed row is grouped too (it sorts first, by ordinal).
      const next = RECENT_TURN_ROWS + TURN_GROUP_ROWS + 1;
      for (const n of range(next, next + TURN_GROUP_ROWS)) rows.put(row(n));
      return { asRow, written: rows.pack(), grouped: rows.get("turn_5") };
    });
    expect(result).toEqual({ asRow: changed, written: 1, grouped: changed });
  });

  it("lists the newest turns across rows and groups, page by page, each once, never-started ones left out", async () => {
    const paused = row(1, {
      status: "requires_action",
      pending_calls: [{ type: "function_call", name: "f", arguments: "{}", call_id: "c" }],
    });
    const changed = row(7, {
      status: "failed",
      error: { code: "provider_error", message: "late" },
    });
    const unstarted = row(0, { id: "turn_queued", ordinal: 0, status: "interrupted" });
    const total = 1 + RECENT_TURN_ROWS + 2 * TURN_GROUP_ROWS;
    const result = await withRows((rows) => {
      rows.put(unstarted);
      rows.put(paused);
      for (const n of range(2, total)) rows.put(row(n));
      rows.pack();
      // A row for a grouped turn is read instead of the group's copy.
      rows.put(changed);
      const pages: string[][] = [];
      let before: number | undefined;
      for (;;) {
        const page = rows.newest(100, before);
        if (page.length === 0) break;
        pages.push(page.map((r) => r.id));
        before = page.at(-1)?.ordinal;
      }
      return { pages, newest: rows.newest(3), seventh: rows.newest(1, row(8).ordinal) };
    });
    expect(result.pages.map((p) => p.length)).toEqual([100, 100, 100, 100, 100, total - 500]);
    expect(result.pages.flat()).toEqual(
      range(1, total)
        .toReversed()
        .map((n) => `turn_${n}`),
    );
    expect(result.newest).toEqual([row(total), row(total - 1), row(total - 2)]);
    expect(result.seventh).toEqual([changed]);
  });

  it("passes over a group whose hashes match by chance, and finds a turn only by its own hash", async () => {
    const result = await withRows((rows, sql) => {
      for (const n of range(1, RECENT_TURN_ROWS + TURN_GROUP_ROWS)) rows.put(row(n));
      rows.pack();
      // A newer group that lists turn_7's hash but holds another turn.
      const hashes = turnIdHash("turn_7").slice().buffer;
      const data = encodeTurnGroup([row(999)]).slice().buffer;
      sql`INSERT INTO spindle_turn_groups (hashes, data) VALUES (${hashes}, ${data})`;
      return { seven: rows.get("turn_7"), other: rows.get("turn_999") };
    });
    expect(result).toEqual({ seven: row(7), other: undefined });
  });

  it("reads and groups rows the same in a database of the older layout (a rowid table, an ordinal index)", async () => {
    const total = RECENT_TURN_ROWS + TURN_GROUP_ROWS + 3;
    const result = await withRows((rows, sql) => {
      sql`DROP TABLE spindle_turns`;
      sql`CREATE TABLE spindle_turns (turn_id TEXT PRIMARY KEY, ordinal INTEGER NOT NULL, body TEXT NOT NULL)`;
      sql`CREATE INDEX spindle_turns_ordinal ON spindle_turns (ordinal)`;
      for (const n of range(1, total)) rows.put(row(n));
      const last = rows.last();
      const written = rows.pack();
      return {
        last,
        written,
        stored: stored(sql),
        read: range(1, total).map((n) => rows.get(`turn_${n}`)),
      };
    });
    expect(result.last).toEqual(row(total));
    expect(result.written).toBe(1);
    expect(result.stored).toEqual({ rows: total - TURN_GROUP_ROWS, groups: 1 });
    expect(result.read).toEqual(range(1, total).map((n) => row(n)));
  });
});

/** A Codex rollout of `turns` turns, each with its usage. */
function codexRollout(turns: number): string {
  let second = 0;
  const at = () => new Date(Date.UTC(2026, 0, 1) + 1000 * second++).toISOString();
  const line = (type: string, payload: unknown) => ({ timestamp: at(), type, payload });
  const message = (role: string, text: string) => ({
    type: "message",
    role,
    content: [{ type: role === "user" ? "input_text" : "output_text", text }],
  });
  const total = (n: number) => ({
    input_tokens: 100 * n,
    cached_input_tokens: 0,
    output_tokens: 10 * n,
    reasoning_output_tokens: 0,
    total_tokens: 110 * n,
  });
  const lines: object[] = [
    line("session_meta", {
      id: "019c7000-0000-7000-8000-000000000999",
      timestamp: at(),
      cwd: "/repo",
      originator: "codex_cli_rs",
      cli_version: "0.101.0",
      source: "cli",
      model_provider: "openai",
    }),
  ];
  for (const n of range(1, turns)) {
    const turnId = `codex-turn-${n}`;
    lines.push(
      line("event_msg", { type: "task_started", turn_id: turnId }),
      line("response_item", message("user", `question ${n}`)),
      line("event_msg", { type: "user_message", message: `question ${n}`, images: [] }),
      line("response_item", message("assistant", `answer ${n}`)),
      line("event_msg", {
        type: "token_count",
        info: { total_token_usage: total(n), last_token_usage: total(1) },
      }),
      line("event_msg", { type: "task_complete", turn_id: turnId, last_agent_message: "ok" }),
    );
  }
  return lines.map((l) => `${JSON.stringify(l)}\n`).join("");
}

describe("GET …/turns/{turn} of grouped turns", () => {
  it("answers every turn exactly, after an eviction and after a restore from R2", async () => {
    const turns = RECENT_TURN_ROWS + TURN_GROUP_ROWS + 20;
    const id = newThreadId();
    await json(await importRollout(id, codexRollout(turns)), 201);
    const asked = [1, 2, 100, TURN_GROUP_ROWS, TURN_GROUP_ROWS + 1, turns];
    const answers = () =>
      Promise.all(
        asked.map(async (n) =>
          (await api("GET", `/v1/threads/${id}/turns/codex-turn-${n}`)).text(),
        ),
      );
    const layout = () =>
      runInDurableObject(threadStub(id), (_i, state) => stored(sqlOf(state.storage.sql)));
    const imported = await answers();
    const first = JSON.parse(imported[0] ?? "{}");
    expect(first).toMatchObject({
      id: "codex-turn-1",
      status: "completed",
      usage: { input_tokens: 100, output_tokens: 10, total_tokens: 110 },
      items: [
        { role: "user", content: [{ text: "question 1" }] },
        { role: "assistant", content: [{ text: "answer 1" }] },
      ],
    });
    expect(JSON.parse(imported[2] ?? "{}")).toMatchObject({
      usage: { input_tokens: 100, output_tokens: 10, total_tokens: 110 },
      items: [{ content: [{ text: "question 100" }] }, { content: [{ text: "answer 100" }] }],
    });
    expect(await layout()).toEqual({ rows: turns - TURN_GROUP_ROWS, groups: 1 });
    expect((await api("GET", `/v1/threads/${id}/turns/codex-turn-0`)).status).toBe(404);

    await evictDurableObject(threadStub(id));
    expect(await answers()).toEqual(imported);

    await runDurableObjectAlarm(threadStub(id));
    await json(await api("POST", `/v1/threads/${id}/restore`));
    expect(await answers()).toEqual(imported);
    expect(await layout()).toEqual({ rows: turns - TURN_GROUP_ROWS, groups: 1 });
  });
});
