import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, json, newThreadId, threadStub } from "../helpers/api.ts";
import {
  corruptSegment,
  createThread,
  inspect,
  isContextItem,
  prompt,
  segmentsOf,
  threadWithDamagedSecondSegment,
  turn,
} from "../helpers/durability.ts";
import { checkThreadRollout, sqlRows } from "../helpers/rollout.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("repairs instead of crash loops", () => {
  it("a turn cut off mid-way by an eviction is settled, and the next turn pairs its tool call", async () => {
    const id = newThreadId();
    await createThread(id, { tools: [{ name: "lookup" }] });
    await turn(id, "first");
    // Lines of a turn that started and called a tool, then lost its instance before finishing.
    await runInDurableObject(threadStub(id), (_i, state) => {
      const sql = state.storage.sql;
      const last = sql
        .exec<{ seq: number }>("SELECT MAX(seq) AS seq FROM spindle_rollout")
        .one().seq;
      const lines = [
        {
          timestamp: new Date().toISOString(),
          type: "event_msg",
          payload: { type: "task_started", turn_id: "turn_cut" },
        },
        {
          timestamp: new Date().toISOString(),
          type: "response_item",
          payload: {
            type: "message",
            role: "user",
            content: [{ type: "input_text", text: "do it" }],
          },
        },
        {
          timestamp: new Date().toISOString(),
          type: "response_item",
          payload: {
            type: "function_call",
            id: "fc_cut",
            name: "lookup",
            arguments: "{}",
            call_id: "call_cut",
          },
        },
      ];
      lines.forEach((line, i) => {
        // Raw rows, as a crashed instance left them.
        sql.exec(
          "INSERT INTO spindle_rollout (seq, part, line) VALUES (?, 0, ?)",
          last + 1 + i,
          JSON.stringify(line),
        );
      });
      sql.exec(
        "INSERT INTO spindle_turns (turn_id, ordinal, body) VALUES (?, ?, ?)",
        "turn_cut",
        last + 1,
        JSON.stringify({
          id: "turn_cut",
          ordinal: last + 1,
          status: "in_progress",
          first_seq: last + 1,
          last_seq: last + 3,
          pending_calls: [],
          usage: null,
          error: null,
        }),
      );
    });
    await evictDurableObject(threadStub(id));

    const cut = await json<{ status: string }>(
      await api("GET", `/v1/threads/${id}/turns/turn_cut`),
    );
    expect(cut.status).toBe("interrupted");
    const next = await turn(id, "again");
    expect(next.status).toBe("completed");
    const input = JSON.parse(await prompt(id)).input as {
      type: string;
      call_id?: string;
      output?: string;
    }[];
    const call = input.findIndex((i) => i.type === "function_call");
    expect(input[call + 1]).toMatchObject({
      type: "function_call_output",
      call_id: "call_cut",
      output: "aborted",
    });
    const check = await checkThreadRollout(id);
    expect(check.errors).toEqual([]);
  });

  it("a corrupt world_state line clears the baseline: the next turn re-sends the full context, with a warning", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    await turn(id, "first");
    await runInDurableObject(threadStub(id), (_i, state) => {
      const rows = state.storage.sql
        .exec<{ seq: number; line: string }>(
          'SELECT seq, line FROM spindle_rollout WHERE line LIKE \'%"type":"world_state"%\'',
        )
        .toArray();
      expect(rows).toHaveLength(1);
      const line = JSON.parse(rows[0]?.line ?? "{}");
      line.payload.state = "garbage";
      const corrupt = JSON.stringify(line);
      state.storage.sql.exec(
        "UPDATE spindle_rollout SET line = ? WHERE seq = ?",
        corrupt,
        rows[0]?.seq,
      );
    });
    await evictDurableObject(threadStub(id));

    const thread = await json<{ warnings: { code: string; message: string }[] }>(
      await api("GET", `/v1/threads/${id}`),
    );
    expect(thread.warnings.map((w) => w.message).join("\n")).toMatch(
      /world-state baseline cleared/,
    );
    const second = await turn(id, "second");
    const context = second.items.filter(
      (i) => i.role === "developer" || (i.role === "user" && i.content?.[0]?.text?.startsWith("<")),
    );
    expect(context.map((i) => i.role)).toEqual(["developer", "user"]);
    expect(second.status).toBe("completed");
  });

  it("a restore while R2 cannot be read fails and changes nothing; once R2 answers it succeeds", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    await turn(id, "one");
    await runDurableObjectAlarm(threadStub(id));
    await turn(id, "two");
    const before = await prompt(id);
    const state = await inspect(id);
    vi.spyOn(console, "error").mockImplementation(() => {});
    const get = vi.spyOn(env.ROLLOUT, "get").mockImplementation(async () => {
      throw new Error("r2 down");
    });
    const failed = await api("POST", `/v1/threads/${id}/restore`);
    expect(failed.status).toBe(500);
    expect(await failed.json()).toMatchObject({ code: "internal" });
    expect(get).toHaveBeenCalled();
    // Not rebuilt without the segment R2 did not return: the thread is as it was.
    expect(await prompt(id)).toBe(before);
    expect(await inspect(id)).toEqual(state);
    get.mockRestore();
    const restored = await json<{ warnings: unknown[] }>(
      await api("POST", `/v1/threads/${id}/restore`),
    );
    expect(restored.warnings).toEqual([]);
    expect(await prompt(id)).toBe(before);
  });

  it("a fork of a rollout with a damaged segment carries the warning and re-sends the full context", async () => {
    const id = await threadWithDamagedSecondSegment();
    const forkId = newThreadId();
    const fork = await json<{ warnings: { message: string }[] }>(
      await api("POST", `/v1/threads/${id}/fork`, { id: forkId }),
      201,
    );
    expect(fork.warnings.map((w) => w.message).join("\n")).toMatch(/checksum/);
    const next = await turn(forkId, "three");
    expect(next.items.filter(isContextItem).map((i) => i.role)).toEqual(["developer", "user"]);
  });

  it("a segment that fails its checksum is skipped on restore with a warning, and the next turn re-sends the full context", async () => {
    const id = await threadWithDamagedSecondSegment();
    await runInDurableObject(threadStub(id), async (_i, state) => {
      await state.storage.deleteAll();
    });
    await evictDurableObject(threadStub(id));
    const restored = await json<{ warnings: { message: string }[] }>(
      await api("POST", `/v1/threads/${id}/restore`),
    );
    expect(restored.warnings.map((w) => w.message).join("\n")).toMatch(/checksum/);
    const next = await turn(id, "three");
    expect(next.status).toBe("completed");
    expect(next.items.filter(isContextItem).map((i) => i.role)).toEqual(["developer", "user"]);
  });

  it("an unreadable checkpoint is dropped and the thread is rebuilt from R2 + SQLite, identically", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    for (let i = 0; i < 8; i++) await turn(id, `turn ${i}`);
    await runDurableObjectAlarm(threadStub(id));
    const before = await inspect(id);
    expect(before?.checkpointSeq).toBeGreaterThan(0);
    const beforePrompt = await prompt(id);
    await runInDurableObject(threadStub(id), (_i, state) => {
      state.storage.sql.exec(
        "UPDATE spindle_checkpoint SET data = ?",
        new Uint8Array([1, 2, 3]).buffer,
      );
    });
    await evictDurableObject(threadStub(id));
    expect(await prompt(id)).toBe(beforePrompt);
    const thread = await json<{ warnings: { message: string }[] }>(
      await api("GET", `/v1/threads/${id}`),
    );
    expect(thread.warnings.map((w) => w.message).join("\n")).toMatch(/checkpoint unreadable/);
    expect((await turn(id, "after")).status).toBe("completed");
  });

  it("an unreadable line is skipped with a warning instead of failing every request", async () => {
    const id = newThreadId();
    await createThread(id);
    await turn(id, "first");
    await runInDurableObject(threadStub(id), (_i, state) => {
      const last = state.storage.sql
        .exec<{ seq: number }>("SELECT MAX(seq) AS seq FROM spindle_rollout")
        .one().seq;
      state.storage.sql.exec("UPDATE spindle_rollout SET line = '{not json' WHERE seq = ?", last);
    });
    await evictDurableObject(threadStub(id));
    const thread = await json<{ warnings: { message: string }[] }>(
      await api("GET", `/v1/threads/${id}`),
    );
    expect(thread.warnings.some((w) => /skipped/.test(w.message))).toBe(true);
    expect((await turn(id, "second")).status).toBe("completed");
  });
});

describe("a turn read back from R2", () => {
  it("reads only the segments that hold its lines, not the whole rollout", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    const turns: { id: string; items: unknown[] }[] = [];
    for (let i = 0; i < 10; i++) {
      turns.push(
        await json<{ id: string; items: unknown[] }>(
          await api("POST", `/v1/threads/${id}/turns`, { input: `turn ${i}` }),
        ),
      );
      await runDurableObjectAlarm(threadStub(id));
    }
    const segments = await segmentsOf(id);
    expect(segments.length).toBeGreaterThanOrEqual(10);
    // The first turns' lines are in R2 only now.
    const [{ first: stored } = { first: 0 }] = await sqlRows<{ first: number | null }>(
      id,
      "SELECT min(seq) AS first FROM spindle_rollout",
    );
    // Null: a checkpoint covers every line, and SQLite holds none of them.
    expect(stored ?? Number.POSITIVE_INFINITY).toBeGreaterThan(20);
    await evictDurableObject(threadStub(id));
    const gets = vi.spyOn(env.ROLLOUT, "get");
    const lists = vi.spyOn(env.ROLLOUT, "list");
    const second = turns[1];
    const read = await json<{ items: unknown[] }>(
      await api("GET", `/v1/threads/${id}/turns/${second?.id}`),
    );
    expect(read.items).toEqual(second?.items);
    expect(gets.mock.calls.length).toBeLessThanOrEqual(2);
    expect(lists).not.toHaveBeenCalled();
  });
});

describe("export of a damaged rollout", () => {
  /** The seq range of a segment key (`…/segments/{first}-{last}.jsonl.gz`). */
  const rangeOf = (key: string) =>
    key
      .match(/(\d+)-(\d+)\.jsonl\.gz$/)
      ?.slice(1)
      .map(Number);
  const exportOf = (id: string, query = "") => api("GET", `/v1/threads/${id}/rollout${query}`);

  it("is refused with rollout_incomplete when lines are lost, and allow_incomplete exports the rest", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    for (let i = 0; i < 8; i++) {
      await turn(id, `turn ${i}`);
      await runDurableObjectAlarm(threadStub(id));
    }
    const whole = await (await exportOf(id)).text();
    // A segment whose lines a checkpoint covers, so SQLite no longer holds them.
    const [{ first: stored } = { first: 0 }] = await sqlRows<{ first: number }>(
      id,
      "SELECT min(seq) AS first FROM spindle_rollout",
    );
    const segments = await segmentsOf(id);
    const index = segments.findLastIndex((s) => (rangeOf(s.key)?.[1] ?? Infinity) < stored);
    expect(index).toBeGreaterThan(0);
    const [first = 0, last = 0] = rangeOf(segments[index]?.key ?? "") ?? [];
    await corruptSegment(id, index);

    const refused = await exportOf(id);
    expect(refused.status).toBe(409);
    const problem = await json<{ code: string; detail: string }>(refused, 409);
    expect(problem.code).toBe("rollout_incomplete");
    expect(problem.detail).toContain(`${last - first + 1} of the rollout's`);
    expect(problem.detail).toMatch(/checksum/);
    expect(problem.detail).toContain(`rollout lines ${first}-${last} are missing`);

    const partial = await exportOf(id, "?allow_incomplete=true");
    expect(partial.status).toBe(200);
    expect(partial.headers.get("spindle-missing-lines")).toBe(String(last - first + 1));
    const lines = whole.split("\n");
    const kept = [...lines.slice(0, first - 1), ...lines.slice(last)].join("\n");
    expect(await partial.text()).toBe(kept);
  });

  it("takes the lines of a damaged middle segment from SQLite while it still holds them: the export is whole", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    for (const input of ["one", "two", "three"]) {
      await turn(id, input);
      await runDurableObjectAlarm(threadStub(id));
    }
    const whole = await (await exportOf(id)).text();
    expect(await segmentsOf(id)).toHaveLength(3);
    await corruptSegment(id, 1);
    await evictDurableObject(threadStub(id));
    const res = await exportOf(id);
    expect(res.status).toBe(200);
    expect(res.headers.get("spindle-missing-lines")).toBeNull();
    expect(await res.text()).toBe(whole);
  });
});
