import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { createHash } from "node:crypto";
import { gunzipSync, gzipSync } from "node:zlib";
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, importRollout, json, newThreadId, threadStub } from "../helpers/api.ts";
import {
  createThread,
  expectSameAfterEviction,
  inspect,
  prompt,
  turn,
} from "../helpers/durability.ts";
import { checkThreadRollout, sqlRows } from "../helpers/rollout.ts";

afterEach(() => {
  vi.restoreAllMocks();
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
