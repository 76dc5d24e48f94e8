import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { createHash } from "node:crypto";
import { gunzipSync, gzipSync } from "node:zlib";
import { afterEach, describe, expect, it, vi } from "vitest";
import { CheckpointStore } from "../../durable-objects/thread/storage/checkpoint-store.ts";
import { sqlOf } from "../../durable-objects/thread/storage/sql.ts";
import {
  ACME_KEY,
  api,
  DEV_KEY,
  GLOBEX_KEY,
  importRollout,
  json,
  newThreadId,
  threadStub,
} from "./helpers/api.ts";
import { checkThreadRollout, sqlRows } from "./helpers/rollout.ts";
import type { TestThread } from "./worker.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

type Inspect = Awaited<ReturnType<TestThread["inspectForTesting"]>>;
const inspect = async (id: string) => (await threadStub(id).inspectForTesting()) as Inspect;

async function createThread(id: string, config: Record<string, unknown> = {}) {
  return json(await api("POST", "/v1/threads", { id, ...config }), 201);
}

async function turn(id: string, input: string, overrides?: Record<string, unknown>) {
  return json<{
    id: string;
    status: string;
    items: { type: string; role?: string; content?: { text?: string }[] }[];
  }>(await api("POST", `/v1/threads/${id}/turns`, { input, ...(overrides ? { overrides } : {}) }));
}

const prompt = async (id: string) => (await api("GET", `/v1/threads/${id}/prompt`)).text();

type TurnItem = { role?: string; content?: { text?: string }[] };
/** The developer message and the `<…>` user fragments a turn records as context. */
const isContextItem = (i: TurnItem) =>
  i.role === "developer" || (i.role === "user" && i.content?.[0]?.text?.startsWith("<") === true);

/** A thread with two turns, each flushed to its own R2 segment, the second one then damaged. */
async function threadWithDamagedSecondSegment(): Promise<string> {
  const id = newThreadId();
  await createThread(id, { cwd: "/repo" });
  for (const input of ["one", "two"]) {
    await turn(id, input);
    await runDurableObjectAlarm(threadStub(id));
  }
  expect(await segmentsOf(id)).toHaveLength(2);
  await corruptSegment(id, 1);
  return id;
}

const segmentsOf = async (id: string) =>
  (await env.ROLLOUT.list({ prefix: `threads/local/${id}/segments/`, include: ["customMetadata"] }))
    .objects;

/** Rewrites the thread's `index`-th R2 segment (from 0) with other bytes under the same metadata. */
async function corruptSegment(id: string, index: number): Promise<void> {
  const second = (await segmentsOf(id))[index];
  if (!second) throw new Error(`no segment ${index}`);
  // Same key and metadata, different bytes: the checksum no longer matches.
  const garbage = new Response(
    new Blob([
      '{"timestamp":"t","type":"event_msg","payload":{"type":"user_message","message":"forged"}}\n',
    ])
      .stream()
      .pipeThrough(new CompressionStream("gzip")),
  );
  await env.ROLLOUT.put(second.key, await garbage.arrayBuffer(), {
    customMetadata: second.customMetadata ?? {},
  });
}

/**
 * Evicts the thread (after `meanwhile`, e.g. a change to its storage) and checks that the next
 * prompt and the engine state it reloads are identical to what they were.
 */
async function expectSameAfterEviction(id: string, meanwhile?: () => Promise<unknown>) {
  const before = await prompt(id);
  const state = await inspect(id);
  await meanwhile?.();
  await evictDurableObject(threadStub(id));
  expect(await prompt(id)).toBe(before);
  expect(await inspect(id)).toEqual(state);
}

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

describe("checkpoints and cold starts", () => {
  it("takes a checkpoint, drops flushed lines from SQLite, and a cold start from it is identical", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    for (let i = 0; i < 8; i++) {
      await turn(id, `turn ${i}`, i % 3 === 2 ? { cwd: `/repo/${i}` } : undefined);
    }
    await runDurableObjectAlarm(threadStub(id));
    const before = await inspect(id);
    expect(before?.checkpointSeq).toBeGreaterThan(0);
    const oldest = await sqlRows<{ seq: number }>(
      id,
      "SELECT MIN(seq) AS seq FROM spindle_rollout",
    );
    expect(oldest[0]?.seq ?? before?.checkpointSeq).toBeGreaterThan(1);
    const beforePrompt = await prompt(id);

    await evictDurableObject(threadStub(id));
    expect(await prompt(id)).toBe(beforePrompt);
    expect(await inspect(id)).toEqual(before);

    const check = await checkThreadRollout(id);
    expect(check.errors).toEqual([]);
    expect(check.lines.length).toBe(before?.lastSeq);
  });

  it("a compaction within a turn leaves it one user turn; eviction and a restore from R2 keep the turn, the count and the prompt", async () => {
    const id = newThreadId();
    await createThread(id, {
      model: "spindle-local-lite",
      cwd: "/repo",
      tools: [{ name: "lookup" }],
      auto_compact_fraction: 0.3,
    });
    const paused = await turn(id, "/call lookup {}");
    const call = (paused as { pending_calls?: { call_id: string }[] }).pending_calls?.[0];
    const done = await json<{ id: string; kind: string; status: string }>(
      await api("POST", `/v1/threads/${id}/turns/${paused.id}/outputs`, {
        items: [
          { type: "function_call_output", call_id: call?.call_id, output: "result ".repeat(3500) },
        ],
      }),
    );
    expect([done.id, done.kind, done.status]).toEqual([paused.id, "turn", "completed"]);
    const { lines } = await checkThreadRollout(id);
    expect(lines.filter((l) => l.includes('"type":"compacted"'))).toHaveLength(1);
    const threadOf = async () =>
      json<{ turn_count: number }>(await api("GET", `/v1/threads/${id}`));
    const turnOf = async () =>
      json<{ kind: string; status: string }>(
        await api("GET", `/v1/threads/${id}/turns/${paused.id}`),
      );
    expect((await threadOf()).turn_count).toBe(1);
    const beforePrompt = await prompt(id);

    await evictDurableObject(threadStub(id));
    expect(await prompt(id)).toBe(beforePrompt);
    await runDurableObjectAlarm(threadStub(id));
    await json(await api("POST", `/v1/threads/${id}/restore`));
    expect(await prompt(id)).toBe(beforePrompt);
    expect((await threadOf()).turn_count).toBe(1);
    expect(await turnOf()).toMatchObject({ kind: "turn", status: "completed" });
  });

  it("the rollout checker finds every line once, in order, in R2 after a failed then retried flush", async () => {
    const id = newThreadId();
    await createThread(id);
    const put = vi.spyOn(env.ROLLOUT, "put").mockRejectedValue(new Error("r2 down"));
    await turn(id, "one");
    await turn(id, "two");
    await runDurableObjectAlarm(threadStub(id));
    expect(put).toHaveBeenCalled();
    put.mockRestore();
    await turn(id, "three");
    await runDurableObjectAlarm(threadStub(id));
    const check = await checkThreadRollout(id);
    expect(check.errors).toEqual([]);
    const state = await inspect(id);
    expect(state?.flushedThrough).toBe(state?.lastSeq);
    expect(check.lines.length).toBe(state?.lastSeq);
  });
});

describe("row size", () => {
  it("a configuration and a paused turn's row larger than a SQLite row are stored in parts and read back", async () => {
    const id = newThreadId();
    await createThread(id, { tools: [{ name: "lookup" }] });
    // Each above a row part (500,000 characters), together within the model's window.
    const instructions = "i".repeat(1_500_000);
    const query = "q".repeat(1_500_000);
    const paused = await json<{ id: string; status: string }>(
      await api("POST", `/v1/threads/${id}/turns`, {
        input: `/call lookup {"q":"${query}"}`,
        overrides: { developer_instructions: instructions },
      }),
    );
    expect(paused.status).toBe("requires_action");
    const values = await sqlRows<{ bytes: number }>(
      id,
      `SELECT length(CAST(value AS BLOB)) AS bytes FROM spindle_meta
       UNION ALL SELECT length(CAST(body AS BLOB)) FROM spindle_turns
       UNION ALL SELECT length(CAST(body AS BLOB)) FROM spindle_parts`,
    );
    expect(Math.max(...values.map((v) => v.bytes))).toBeLessThan(1_800_000);
    const kinds = await sqlRows<{ kind: string }>(id, "SELECT DISTINCT kind FROM spindle_parts");
    expect(kinds.map((k) => k.kind)).toEqual(expect.arrayContaining(["meta", "turn"]));

    await evictDurableObject(threadStub(id));
    const thread = await json<{ config: { developer_instructions?: string } }>(
      await api("GET", `/v1/threads/${id}`),
    );
    expect(thread.config.developer_instructions).toBe(instructions);
    const turnRes = await json<{ pending_calls: { call_id: string; arguments: string }[] }>(
      await api("GET", `/v1/threads/${id}/turns/${paused.id}`),
    );
    const call = turnRes.pending_calls[0];
    expect(JSON.parse(call?.arguments ?? "{}")).toEqual({ q: query });
    const done = await json<{ status: string }>(
      await api("POST", `/v1/threads/${id}/turns/${paused.id}/outputs`, {
        items: [{ type: "function_call_output", call_id: call?.call_id, output: "found" }],
      }),
    );
    expect(done.status).toBe("completed");
    // The resumed turn's row fits again: its parts are gone.
    const turnParts = await sqlRows<{ n: number }>(
      id,
      "SELECT COUNT(*) AS n FROM spindle_parts WHERE kind = 'turn'",
    );
    expect(turnParts[0]?.n).toBe(0);
  }, 30_000);

  it("a line larger than a SQLite row is stored in parts under the 2 MB limit and reads back whole", async () => {
    const id = newThreadId();
    await createThread(id);
    // 3 MiB of text with multi-byte characters and surrogate pairs at every offset parity.
    const big = "é😀x".repeat(262_144 + 7);
    const done = await turn(id, big);
    expect(done.status).toBe("completed");
    const parts = await sqlRows<{ seq: number; bytes: number }>(
      id,
      "SELECT seq, length(CAST(line AS BLOB)) AS bytes FROM spindle_rollout",
    );
    expect(Math.max(...parts.map((p) => p.bytes))).toBeLessThan(1_800_000);
    expect(new Set(parts.map((p) => p.seq)).size).toBeLessThan(parts.length);
    const before = await prompt(id);
    await evictDurableObject(threadStub(id));
    const after = await prompt(id);
    expect(after).toBe(before);
    expect(after).toContain(big);
    expect((await checkThreadRollout(id)).errors).toEqual([]);
  });
});

describe("checkpoint item groups", () => {
  const groups = (id: string) =>
    sqlRows<{ grp: number; first: number; count: number }>(
      id,
      "SELECT grp, first, count FROM spindle_checkpoint_items WHERE part = 0 ORDER BY grp",
    );
  const groupData = async (id: string) =>
    (
      await sqlRows<{ data: string }>(
        id,
        "SELECT hex(data) AS data FROM spindle_checkpoint_items WHERE grp = 0 AND part = 0",
      )
    )[0]?.data;
  // The suite's groups close at 8 items (SPINDLE_CHECKPOINT_GROUP_ITEMS), 2-3 turns.
  const big = (i: number) => `question ${i}`;
  /**
   * Re-encodes the closed first group (same items, other gzip bytes, its checksum updated to
   * match): a rewrite would undo it.
   */
  const reencodeFirstGroup = (id: string) =>
    runInDurableObject(threadStub(id), (_i, state) => {
      const sql = state.storage.sql;
      const row = sql
        .exec<{ data: ArrayBuffer }>(
          "SELECT data FROM spindle_checkpoint_items WHERE grp = 0 AND part = 0",
        )
        .one();
      const again = gzipSync(gunzipSync(new Uint8Array(row.data)), { level: 1 });
      sql.exec("UPDATE spindle_checkpoint_items SET data = ? WHERE grp = 0 AND part = 0", again);
      const run = sql
        .exec<{ data: ArrayBuffer }>("SELECT data FROM spindle_checkpoint_runs WHERE grp = 0")
        .one();
      const record = JSON.parse(gunzipSync(new Uint8Array(run.data)).toString());
      record.sha256 = createHash("sha256").update(again).digest("hex");
      sql.exec(
        "UPDATE spindle_checkpoint_runs SET data = ? WHERE grp = 0",
        gzipSync(JSON.stringify(record)),
      );
    });
  /** Runs alarms until a checkpoint newer than `after` is taken; returns its seq. */
  async function checkpointAfter(id: string, after = 0): Promise<number> {
    for (let i = 0; i < 10; i++) {
      await runDurableObjectAlarm(threadStub(id));
      const seq = (await inspect(id))?.checkpointSeq ?? 0;
      if (seq > after) return seq;
    }
    throw new Error(`no checkpoint after seq ${after} in 10 alarms`);
  }

  it("a new checkpoint rewrites only the open group and new ones; a cold start reads them all back", async () => {
    const id = newThreadId();
    await createThread(id);
    for (let i = 0; i < 6; i++) await turn(id, big(i));
    const seq = await checkpointAfter(id);
    const first = await groups(id);
    expect(first.length).toBeGreaterThanOrEqual(2);
    expect(first[0]?.count).toBe(8);
    await reencodeFirstGroup(id);
    const marked = await groupData(id);
    for (let i = 6; i < 12; i++) await turn(id, big(i));
    await checkpointAfter(id, seq);
    const second = await groups(id);
    expect(second.length).toBeGreaterThan(first.length);
    second.forEach((g, i) => {
      expect(g.grp).toBe(i);
      expect(g.first).toBe(i === 0 ? 0 : (second[i - 1]?.first ?? 0) + (second[i - 1]?.count ?? 0));
    });
    expect(await groupData(id)).toBe(marked);
    await expectSameAfterEviction(id);
  });

  it("a cold start reads no history for a read, an alarm or a turn, a page reads its runs, and a checkpoint after it keeps the groups", async () => {
    const id = newThreadId();
    await createThread(id);
    for (let i = 0; i < 6; i++) await turn(id, big(i));
    const seq = await checkpointAfter(id);
    // The first group is loaded as a stored run (only the last is parsed on load).
    expect((await groups(id)).length).toBeGreaterThanOrEqual(2);
    await reencodeFirstGroup(id);
    const marked = await groupData(id);
    const page = await json(await api("GET", `/v1/threads/${id}/history?limit=3`));
    const last = await json(await api("GET", `/v1/threads/${id}/history?limit=100`));
    await evictDurableObject(threadStub(id));
    expect((await api("GET", `/v1/threads/${id}`)).status).toBe(200);
    await runDurableObjectAlarm(threadStub(id));
    const loaded = await threadStub(id).storedRunsForTesting();
    expect(loaded?.runs).toBeGreaterThan(0);
    expect(loaded?.unread).toBe(loaded?.runs);
    // A page reads the runs it falls in: the first 3 items are in the first run only.
    expect(await json(await api("GET", `/v1/threads/${id}/history?limit=3`))).toEqual(page);
    expect((await threadStub(id).storedRunsForTesting())?.unread).toBe((loaded?.runs ?? 0) - 1);
    expect(await json(await api("GET", `/v1/threads/${id}/history?limit=100`))).toEqual(last);
    // Turns read no run (their prompts pass the runs on unread), nor does the checkpoint after.
    await evictDurableObject(threadStub(id));
    for (let i = 6; i < 12; i++) await turn(id, big(i));
    expect(await threadStub(id).storedRunsForTesting()).toEqual(loaded);
    await checkpointAfter(id, seq);
    expect(await groupData(id)).toBe(marked);
    await expectSameAfterEviction(id);
  });

  it("a rollback after a cold start reads the stored groups and keeps those it leaves whole", async () => {
    const id = newThreadId();
    await createThread(id);
    for (let i = 0; i < 12; i++) await turn(id, big(i));
    const seq = await checkpointAfter(id);
    await reencodeFirstGroup(id);
    const marked = await groupData(id);
    await evictDurableObject(threadStub(id));
    await json(await api("POST", `/v1/threads/${id}/rollback`, { turns: 1 }));
    for (let i = 0; i < 8; i++) await turn(id, `after ${i}`);
    await checkpointAfter(id, seq);
    expect(await groupData(id)).toBe(marked);
    await expectSameAfterEviction(id);
  });

  it("after a compaction rewrites history, every group is written again and loads back", async () => {
    const id = newThreadId();
    await createThread(id);
    for (let i = 0; i < 6; i++) await turn(id, big(i));
    const seq = await checkpointAfter(id);
    const first = await groupData(id);
    const compaction = await json<{ status: string }>(
      await api("POST", `/v1/threads/${id}/compact`),
    );
    expect(compaction.status).toBe("completed");
    for (let i = 0; i < 8; i++) await turn(id, `after ${i}`);
    await checkpointAfter(id, seq);
    expect(await groupData(id)).not.toBe(first);
    await expectSameAfterEviction(id);
  });

  it("item groups stored without run summaries, as before them, still load and answer alike", async () => {
    const id = newThreadId();
    await createThread(id);
    for (let i = 0; i < 12; i++) await turn(id, big(i));
    await checkpointAfter(id);
    await expectSameAfterEviction(id, () =>
      runInDurableObject(threadStub(id), (_i, durable) => {
        durable.storage.sql.exec("DELETE FROM spindle_checkpoint_runs");
      }),
    );
    await turn(id, "after");
    const thread = await json<{ warnings: unknown[] }>(await api("GET", `/v1/threads/${id}`));
    expect(thread.warnings).toEqual([]);
  });

  it("a checkpoint stored whole, as before item groups, still loads (no rebuild, no warning)", async () => {
    const id = newThreadId();
    await createThread(id);
    for (let i = 0; i < 6; i++) await turn(id, big(i));
    await checkpointAfter(id);
    await expectSameAfterEviction(id, () =>
      runInDurableObject(threadStub(id), (_i, durable) => {
        const sql = durable.storage.sql;
        const blob = (table: string) =>
          sql
            .exec<{ data: ArrayBuffer }>(`SELECT data FROM ${table} ORDER BY rowid`)
            .toArray()
            .map((r) => JSON.parse(gunzipSync(new Uint8Array(r.data)).toString()));
        // One row each here: the header and every group are far below the row limit.
        const [header] = blob("spindle_checkpoint");
        const groups = blob("spindle_checkpoint_items") as { items: unknown[]; bytes: number[] }[];
        const { itemCount: _n, ...rest } = header;
        const whole = {
          ...rest,
          items: groups.flatMap((g) => g.items),
          itemBytes: groups.flatMap((g) => g.bytes),
        };
        sql.exec("DELETE FROM spindle_checkpoint_items");
        sql.exec("DELETE FROM spindle_checkpoint_runs");
        sql.exec("UPDATE spindle_checkpoint SET data = ?", gzipSync(JSON.stringify(whole)));
      }),
    );
    const thread = await json<{ warnings: unknown[] }>(await api("GET", `/v1/threads/${id}`));
    expect(thread.warnings).toEqual([]);
  });

  it.each([
    ["a missing group", "DELETE FROM spindle_checkpoint_items WHERE grp = 1"],
    [
      "a group holding fewer items than recorded",
      "UPDATE spindle_checkpoint_items SET count = count + 1 WHERE grp = 0",
    ],
    [
      "a group whose bytes fail their checksum",
      "UPDATE spindle_checkpoint_items SET data = zeroblob(16) WHERE grp = 0 AND part = 0",
    ],
  ])(
    "%s makes the checkpoint unreadable: the thread is rebuilt from the rollout",
    async (_case, damage) => {
      const id = newThreadId();
      await createThread(id);
      for (let i = 0; i < 6; i++) await turn(id, big(i));
      await checkpointAfter(id);
      expect((await groups(id)).length).toBeGreaterThan(1);
      const before = await prompt(id);
      await runInDurableObject(threadStub(id), (_i, state) => {
        state.storage.sql.exec(damage);
      });
      await evictDurableObject(threadStub(id));
      expect(await prompt(id)).toBe(before);
      const thread = await json<{ warnings: { message: string }[] }>(
        await api("GET", `/v1/threads/${id}`),
      );
      expect(thread.warnings.map((w) => w.message).join("\n")).toMatch(/checkpoint unreadable/);
    },
  );
});

describe("updated_at", () => {
  /** A clock that moves on every read (workerd's stands still between I/O). */
  function movingClock(from = Date.now()) {
    let now = from;
    vi.spyOn(Date, "now").mockImplementation(() => (now += 7));
  }
  const thread = async (id: string) => (await api("GET", `/v1/threads/${id}`)).text();
  /** The thread once rebuilt from R2 (everything flushed first). */
  const restoredFromR2 = async (id: string) => {
    await runDurableObjectAlarm(threadStub(id));
    await json(await api("POST", `/v1/threads/${id}/restore`));
    return thread(id);
  };

  it("is the newest rollout line's timestamp, which a restore from R2 reads back", async () => {
    const id = newThreadId();
    await createThread(id);
    // A timestamp read after the last line was written would differ from it.
    movingClock();
    for (const input of ["one", "two"]) await turn(id, input);
    vi.restoreAllMocks();
    await runDurableObjectAlarm(threadStub(id));
    const { lines } = await checkThreadRollout(id);
    const newest = JSON.parse(lines.at(-1) ?? "{}") as { timestamp?: string };
    const thread = await json<{ updated_at: string }>(await api("GET", `/v1/threads/${id}`));
    expect(thread.updated_at).toBe(newest.timestamp);
  });

  it("of an imported thread is its own session_meta's time, before and after a restore", async () => {
    const source = newThreadId();
    await createThread(source);
    await turn(source, "one");
    const exported = await (await api("GET", `/v1/threads/${source}/rollout`)).text();
    // The copy is made later than every line it copies.
    movingClock(Date.now() + 60_000);
    const id = newThreadId();
    expect((await importRollout(id, exported)).status).toBe(201);
    const imported = await thread(id);
    expect(await restoredFromR2(id)).toBe(imported);
  });

  it("is the newest line's timestamp after a turn cut short by a lost instance is settled", async () => {
    const id = newThreadId();
    await createThread(id);
    movingClock();
    const slow = api("POST", `/v1/threads/${id}/turns`, { input: "/slow 40 take your time" });
    await vi.waitFor(async () =>
      expect(JSON.parse(await thread(id))).toMatchObject({ status: "running" }),
    );
    await runInDurableObject(threadStub(id), (_i, state) =>
      state.abort("reset for the test"),
    ).catch(() => undefined);
    await slow.catch(() => undefined);
    // The reload settles the cut turn with a turn_aborted line.
    const settled = await thread(id);
    expect(await restoredFromR2(id)).toBe(settled);
  });

  it("is the newest line's timestamp after a creation, an inject, a rollback and an interrupted paused turn", async () => {
    const id = newThreadId();
    movingClock();
    await createThread(id, { tools: [{ name: "lookup" }] });
    const created = await thread(id);
    expect(await restoredFromR2(id)).toBe(created);
    await turn(id, "one");
    await json(await api("POST", `/v1/threads/${id}/inject`, { text: "noted" }));
    const injected = await thread(id);
    expect(await restoredFromR2(id)).toBe(injected);
    await json(await api("POST", `/v1/threads/${id}/rollback`, { turns: 1 }));
    const rolledBack = await thread(id);
    expect(await restoredFromR2(id)).toBe(rolledBack);
    const paused = await turn(id, "/call lookup {}");
    await json(await api("POST", `/v1/threads/${id}/turns/${paused.id}/interrupt`));
    const interrupted = await thread(id);
    expect(await restoredFromR2(id)).toBe(interrupted);
  });
});

describe("checkpoint size", () => {
  it("a checkpoint larger than a row is split into parts under the 2 MB limit and loads back", async () => {
    const id = newThreadId();
    await createThread(id);
    // Incompressible text, so the gzip checkpoint stays above one row.
    const bytes = new Uint8Array(3_000_000);
    for (let i = 0; i < bytes.length; i += 65_536)
      crypto.getRandomValues(bytes.subarray(i, i + 65_536));
    const noise = Array.from(bytes, (b) => String.fromCharCode(48 + (b % 64))).join("");
    await turn(id, noise);
    for (let i = 0; i < 6; i++) await turn(id, `more ${i}`);
    await runDurableObjectAlarm(threadStub(id));
    // The noise is in history, so in an item group: split into parts, each under the limit.
    const parts = await sqlRows<{ grp: number; bytes: number }>(
      id,
      "SELECT grp, length(data) AS bytes FROM spindle_checkpoint_items",
    );
    expect(parts.filter((p) => p.grp === 0).length).toBeGreaterThan(1);
    expect(Math.max(...parts.map((c) => c.bytes))).toBeLessThanOrEqual(1_800_000);
    expect((await inspect(id))?.checkpointSeq).toBeGreaterThan(0);
    await expectSameAfterEviction(id);
  });
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
    const [{ first: stored } = { first: 0 }] = await sqlRows<{ first: number }>(
      id,
      "SELECT min(seq) AS first FROM spindle_rollout",
    );
    expect(stored).toBeGreaterThan(20);
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
