import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { systemClock } from "../../../../durable-objects/common/clock.ts";
import { CheckpointStore } from "../../../../durable-objects/thread/storage/checkpoint-store.ts";
import { UNCLAIMED_LOAN_MS } from "../../../../durable-objects/thread/storage/segment-loans.ts";
import { sqlOf } from "../../../../durable-objects/thread/storage/sql.ts";
import { api, json, newThreadId, post, threadStub } from "../../helpers/api.ts";
import {
  corruptSegment,
  createThread,
  expectSameAfterEviction,
  inspect,
  prompt,
  turn,
} from "../../helpers/durability.ts";
import { sqlRows } from "../../helpers/rollout.ts";

const prefixOf = (id: string) => `threads/local/${id}/`;
const keysUnder = async (id: string) =>
  (await env.ROLLOUT.list({ prefix: prefixOf(id) })).objects.map((o) =>
    o.key.slice(prefixOf(id).length),
  );
const flush = (id: string) => runDurableObjectAlarm(threadStub(id));
const exported = async (id: string) => {
  const res = await api("GET", `/v1/threads/${id}/rollout`);
  expect(res.status).toBe(200);
  return (await res.text()).split("\n").filter((l) => l !== "");
};
const fork = async (id: string, body: Record<string, unknown> = {}) => {
  const forkId = newThreadId();
  await json(await post(`/v1/threads/${id}/fork`, { id: forkId, ...body }), 201);
  return forkId;
};
const borrowed = async (id: string) => {
  const object = await env.ROLLOUT.get(`${prefixOf(id)}fork-prefix.json`);
  return object === null
    ? []
    : (
        (await object.json()) as {
          segments: { r2_key: string; first_seq: number; last_seq: number }[];
        }
      ).segments;
};
const rolloutRows = async (id: string) =>
  (await sqlRows<{ seq: number }>(id, "SELECT DISTINCT seq FROM spindle_rollout ORDER BY seq")).map(
    (r) => r.seq,
  );

/** Empties the object's SQLite (R2 stays), then restores it: the thread as R2 alone has it. */
async function restoreFromR2(id: string): Promise<void> {
  await flush(id);
  await runInDurableObject(threadStub(id), async (_i, state) => {
    await state.storage.deleteAll();
  });
  await evictDurableObject(threadStub(id));
  await json(await api("POST", `/v1/threads/${id}/restore`));
}

/** A thread with `turns` turns, all flushed to R2. */
async function flushedThread(turns: string[]): Promise<string> {
  const id = newThreadId();
  await createThread(id, { cwd: "/repo" });
  for (const input of turns) await turn(id, input);
  await flush(id);
  return id;
}

describe("a fork borrows its source's R2 segments", () => {
  it("writes only its own lines, and reads the same as a copy would", async () => {
    const parent = await flushedThread(["one", "two", "three"]);
    const parentLines = await exported(parent);
    const parentSegments = (await keysUnder(parent)).filter((k) => k.startsWith("segments/"));
    const forkId = await fork(parent);

    // SQLite holds the fork's own first line only; R2 has what it borrows and the loan marker.
    expect(await rolloutRows(forkId)).toEqual([1]);
    expect((await borrowed(forkId)).map((s) => s.r2_key)).toEqual(
      parentSegments.map((k) => `${prefixOf(parent)}${k}`),
    );
    expect(await keysUnder(parent)).toContain(`borrowers/${forkId}`);
    await flush(forkId);
    expect(await keysUnder(forkId)).toEqual([
      "fork-prefix.json",
      "segments/000000000001-000000000001.jsonl.gz",
    ]);

    // Its rollout is its own session_meta and the parent's other lines, byte for byte.
    const lines = await exported(forkId);
    expect(lines.slice(1)).toEqual(parentLines.slice(1));
    expect(JSON.parse(lines[0] ?? "{}").payload).toMatchObject({
      id: forkId,
      forked_from_id: parent,
    });
    expect(await prompt(forkId)).toBe(await prompt(parent));
    // A turn read back from the fork comes from the borrowed segments.
    const turnsOf = async (id: string) =>
      (await json<{ data: { id: string }[] }>(await api("GET", `/v1/threads/${id}/turns`))).data;
    const parentTurns = await turnsOf(parent);
    expect(await turnsOf(forkId)).toEqual(parentTurns);
    const first = parentTurns.at(-1)?.id ?? "";
    const itemsOf = async (id: string) =>
      (await json<{ items: unknown[] }>(await api("GET", `/v1/threads/${id}/turns/${first}`)))
        .items;
    const items = await itemsOf(parent);
    expect(items.length).toBeGreaterThan(0);
    expect(await itemsOf(forkId)).toEqual(items);

    // It goes on like any thread, and reloads the same from SQLite, from R2, from R2 alone.
    await turn(forkId, "in the fork");
    await flush(forkId);
    await expectSameAfterEviction(forkId);
    // Without its checkpoint it replays the whole rollout, the borrowed segments too.
    const { checkpointSeq: _seq, ...state } = (await inspect(forkId)) as Record<string, unknown>;
    const before = await prompt(forkId);
    await runInDurableObject(threadStub(forkId), (_i, storage) => {
      new CheckpointStore(sqlOf(storage.storage.sql), storage.storage).clear();
    });
    await evictDurableObject(threadStub(forkId));
    expect(await prompt(forkId)).toBe(before);
    expect(await inspect(forkId)).toMatchObject({ ...state, checkpointSeq: undefined });
    const linesBefore = await exported(forkId);
    await restoreFromR2(forkId);
    expect(await prompt(forkId)).toBe(before);
    expect(await exported(forkId)).toEqual(linesBefore);
    await expectSameAfterEviction(forkId);
  });

  it("a rollback on a fork, into what it borrows, rebuilds from the borrowed segments", async () => {
    const parent = await flushedThread(["one", "two", "three"]);
    const forkId = await fork(parent);
    await flush(forkId);
    await evictDurableObject(threadStub(forkId));
    await json(await api("POST", `/v1/threads/${forkId}/rollback`, { turns: 2 }));
    const history = await (await api("GET", `/v1/threads/${forkId}/history?limit=100`)).text();
    expect(history).toContain('"one"');
    expect(history).not.toContain('"two"');
    await turn(forkId, "four");
    await flush(forkId);
    await expectSameAfterEviction(forkId);
    // The parent is untouched.
    const parentHistory = await (
      await api("GET", `/v1/threads/${parent}/history?limit=100`)
    ).text();
    expect(parentHistory).toContain('"three"');
  });

  it("without its checkpoint, before its first line reached R2, a fork still knows every line", async () => {
    const parent = await flushedThread(["one", "two"]);
    const forkId = await fork(parent);
    const before = await prompt(forkId);
    await runInDurableObject(threadStub(forkId), (_i, state) => {
      new CheckpointStore(sqlOf(state.storage.sql), state.storage).clear();
    });
    await evictDurableObject(threadStub(forkId));
    expect(await prompt(forkId)).toBe(before);
    await turn(forkId, "three");
    await flush(forkId);
    const lines = await exported(forkId);
    expect(lines.slice(1, (await exported(parent)).length)).toEqual(
      (await exported(parent)).slice(1),
    );
    expect(lines.join("\n")).toContain('"three"');
  });

  it("a restore before the fork's first line reached R2 keeps that line, which the next flush writes", async () => {
    const parent = await flushedThread(["one", "two"]);
    const forkId = await fork(parent);
    const before = await exported(forkId);
    // Its `session_meta` is only in SQLite: R2 has the borrowed lines after it.
    await json(await api("POST", `/v1/threads/${forkId}/restore`));
    expect(await rolloutRows(forkId)).toContain(1);
    expect(await exported(forkId)).toEqual(before);
    await flush(forkId);
    expect(await keysUnder(forkId)).toContain("segments/000000000001-000000000001.jsonl.gz");
    // R2 alone now holds the whole fork: a restore from it, and a turn after.
    await restoreFromR2(forkId);
    expect(await exported(forkId)).toEqual(before);
    await turn(forkId, "three");
    expect((await exported(forkId)).join("\n")).toContain('"three"');
  });

  it("a damaged fork-prefix.json is a repair warning on a full replay, not a crash", async () => {
    const parent = await flushedThread(["one"]);
    const forkId = await fork(parent);
    await flush(forkId);
    await env.ROLLOUT.put(`${prefixOf(forkId)}fork-prefix.json`, "{not json");
    await runInDurableObject(threadStub(forkId), (_i, state) => {
      new CheckpointStore(sqlOf(state.storage.sql), state.storage).clear();
    });
    await evictDurableObject(threadStub(forkId));
    const thread = await json<{ warnings: { code: string; message: string }[] }>(
      await api("GET", `/v1/threads/${forkId}`),
    );
    expect(thread.warnings).toContainEqual({
      code: "rollout_repaired",
      message: "fork-prefix.json unreadable: borrowed lines skipped",
    });
    // The turn after it re-sends the full context, and the thread goes on.
    expect((await turn(forkId, "two")).status).toBe("completed");
  });

  it("a fork before a turn borrows a segment only up to its cut", async () => {
    const parent = newThreadId();
    await createThread(parent, { cwd: "/repo" });
    await turn(parent, "one");
    const two = await turn(parent, "two");
    await turn(parent, "three");
    await flush(parent);
    const forkId = await fork(parent, { before_turn: two.id });
    const [segment, ...more] = await borrowed(forkId);
    expect(more).toEqual([]);
    const turns = await json<{ data: { id: string; first_seq: number }[] }>(
      await api("GET", `/v1/threads/${parent}/turns`),
    );
    const start = turns.data.find((t) => t.id === two.id)?.first_seq ?? 0;
    expect(segment).toMatchObject({ first_seq: 2, last_seq: start - 1 });
    const text = (await exported(forkId)).join("\n");
    expect(text).toContain('"one"');
    expect(text).not.toContain('"two"');
    await restoreFromR2(forkId);
    const history = await (await api("GET", `/v1/threads/${forkId}/history?limit=100`)).text();
    expect(history).toContain('"one"');
    expect(history).not.toContain('"two"');
    expect(history).not.toContain('"three"');
  });

  it("lines the source has not flushed yet are copied, the flushed ones borrowed", async () => {
    const parent = await flushedThread(["one"]);
    await turn(parent, "two");
    const forkId = await fork(parent);
    const through = (await borrowed(forkId)).at(-1)?.last_seq ?? 0;
    expect(through).toBeGreaterThan(1);
    const rows = await rolloutRows(forkId);
    expect(rows[0]).toBe(1);
    expect(rows[1]).toBe(through + 1);
    expect((await exported(forkId)).slice(1)).toEqual((await exported(parent)).slice(1));
    await flush(forkId);
    await expectSameAfterEviction(forkId);
  });

  it("a fork of a rollout with a damaged segment copies what it can read", async () => {
    const parent = await flushedThread(["one"]);
    await turn(parent, "two");
    await flush(parent);
    await corruptSegment(parent, 1);
    const forkId = newThreadId();
    await json(await post(`/v1/threads/${parent}/fork`, { id: forkId }), 201);
    expect(await borrowed(forkId)).toEqual([]);
    expect(await keysUnder(parent)).not.toContain(`borrowers/${forkId}`);
  });

  it("a fork that is refused ends the loan its source made; a retried keyed fork keeps it", async () => {
    const parent = await flushedThread(["one"]);
    const taken = await flushedThread(["other"]);
    const res = await post(`/v1/threads/${parent}/fork`, { id: taken });
    expect(res.status).toBe(409);
    expect(await keysUnder(parent)).not.toContain(`borrowers/${taken}`);

    const keyed = () =>
      api("POST", `/v1/threads/${parent}/fork`, {}, undefined, { "idempotency-key": "f-1" });
    const first = await json<{ id: string }>(await keyed(), 201);
    const again = await json<{ id: string }>(await keyed(), 201);
    expect(again.id).toBe(first.id);
    expect(await keysUnder(parent)).toContain(`borrowers/${first.id}`);
    expect((await borrowed(first.id)).length).toBeGreaterThan(0);
  });
});

describe("deleting a thread keeps what its forks borrow", () => {
  it("until the last fork is gone, which sweeps it", async () => {
    const parent = await flushedThread(["one", "two"]);
    const forkId = await fork(parent);
    const forkLines = await exported(forkId);
    const forkPrompt = await prompt(forkId);

    expect((await api("DELETE", `/v1/threads/${parent}`)).status).toBe(204);
    expect((await api("GET", `/v1/threads/${parent}`)).status).toBe(404);
    const kept = await keysUnder(parent);
    expect(kept).toContain(`borrowers/${forkId}`);
    expect(kept).toContain("tombstone.json");
    expect(kept.some((k) => k.startsWith("segments/"))).toBe(true);

    // The fork is whole: exported, reloaded from R2, restored from R2 alone.
    expect(await exported(forkId)).toEqual(forkLines);
    await restoreFromR2(forkId);
    expect(await prompt(forkId)).toBe(forkPrompt);
    // The deleted thread does not come back from what was kept.
    expect((await api("POST", `/v1/threads/${parent}/restore`)).status).toBe(404);

    expect((await api("DELETE", `/v1/threads/${forkId}`)).status).toBe(204);
    expect(await keysUnder(forkId)).toEqual([]);
    expect(await keysUnder(parent)).toEqual([]);
  });

  it("a thread created again under the id keeps apart from what its forks still borrow", async () => {
    const parent = await flushedThread(["one"]);
    const forkId = await fork(parent);
    const forkLines = await exported(forkId);
    expect((await api("DELETE", `/v1/threads/${parent}`)).status).toBe(204);
    const keptSegments = (await keysUnder(parent)).filter((k) => k.startsWith("segments/"));

    // Same id, same first segment range: the new thread's segment takes another key.
    const created = (await createThread(parent, { cwd: "/repo" })) as { created_at: string };
    await turn(parent, "fresh");
    await flush(parent);
    const segments = (await keysUnder(parent)).filter((k) => k.startsWith("segments/"));
    expect(segments).toEqual(expect.arrayContaining(keptSegments));
    const [own, ...more] = segments.filter((k) => !keptSegments.includes(k));
    expect(more).toEqual([]);
    expect(own).toBe(
      keptSegments[0]?.replace(".jsonl.gz", `.${Date.parse(created.created_at)}.jsonl.gz`),
    );
    const fresh = (await exported(parent)).join("\n");
    expect(fresh).toContain('"fresh"');
    expect(fresh).not.toContain('"one"');
    const freshPrompt = await prompt(parent);
    await restoreFromR2(parent);
    expect(await prompt(parent)).toBe(freshPrompt);
    expect(await exported(forkId)).toEqual(forkLines);

    // The fork's end sweeps the old thread's segments, not the new thread's.
    expect((await api("DELETE", `/v1/threads/${forkId}`)).status).toBe(204);
    const left = await keysUnder(parent);
    for (const k of keptSegments) expect(left).not.toContain(k);
    expect(left.some((k) => k.startsWith("segments/"))).toBe(true);
    await evictDurableObject(threadStub(parent));
    expect(await prompt(parent)).toBe(freshPrompt);
    await restoreFromR2(parent);
    expect(await prompt(parent)).toBe(freshPrompt);
    expect((await api("DELETE", `/v1/threads/${parent}`)).status).toBe(204);
    expect(await keysUnder(parent)).toEqual([]);
  });

  it("a fork of a fork reads its grandparent's segments after both are deleted", async () => {
    const root = await flushedThread(["one"]);
    const middle = await fork(root);
    await turn(middle, "two");
    await flush(middle);
    const leaf = await fork(middle);
    const owners = new Set((await borrowed(leaf)).map((s) => s.r2_key.split("/segments/")[0]));
    expect(owners).toEqual(new Set([`threads/local/${root}`, `threads/local/${middle}`]));
    expect(await keysUnder(root)).toContain(`borrowers/${leaf}`);
    const lines = await exported(leaf);
    const before = await prompt(leaf);

    expect((await api("DELETE", `/v1/threads/${root}`)).status).toBe(204);
    expect((await api("DELETE", `/v1/threads/${middle}`)).status).toBe(204);
    // The middle's loan of the root ended with it; the leaf's goes on.
    expect(await keysUnder(root)).not.toContain(`borrowers/${middle}`);
    expect(await exported(leaf)).toEqual(lines);
    await restoreFromR2(leaf);
    expect(await prompt(leaf)).toBe(before);
    await turn(leaf, "three");

    expect((await api("DELETE", `/v1/threads/${leaf}`)).status).toBe(204);
    for (const id of [root, middle, leaf]) expect(await keysUnder(id)).toEqual([]);
  });

  it("a loan no fork took up stops keeping a deleted thread's segments after an hour", async () => {
    const parent = await flushedThread(["one"]);
    const [first, second] = [await fork(parent), await fork(parent)];
    // As when a fork request stopped after its source lent the segments.
    await env.ROLLOUT.put(`${prefixOf(parent)}borrowers/t_never_created`, "{}");
    expect((await api("DELETE", `/v1/threads/${parent}`)).status).toBe(204);
    const later = vi.spyOn(systemClock, "nowMs").mockReturnValue(Date.now() + UNCLAIMED_LOAN_MS);
    try {
      expect((await api("DELETE", `/v1/threads/${first}`)).status).toBe(204);
      // The second fork's loan is as old, but the fork records it: it holds the segments.
      const kept = await keysUnder(parent);
      expect(kept).toContain(`borrowers/${second}`);
      expect(kept.some((k) => k.startsWith("segments/"))).toBe(true);
      expect((await exported(second)).length).toBeGreaterThan(1);
      // Its end is the last loan: the stray marker goes with the sweep.
      expect((await api("DELETE", `/v1/threads/${second}`)).status).toBe(204);
      expect(await keysUnder(parent)).toEqual([]);
    } finally {
      later.mockRestore();
    }
  });

  it("a loan younger than that is a fork on its way, and keeps them", async () => {
    const parent = await flushedThread(["one"]);
    const forkId = await fork(parent);
    await env.ROLLOUT.put(`${prefixOf(parent)}borrowers/t_on_its_way`, "{}");
    expect((await api("DELETE", `/v1/threads/${parent}`)).status).toBe(204);
    expect((await api("DELETE", `/v1/threads/${forkId}`)).status).toBe(204);
    const kept = await keysUnder(parent);
    expect(kept).toContain("borrowers/t_on_its_way");
    expect(kept.some((k) => k.startsWith("segments/"))).toBe(true);
  });

  it("a delete that comes while its thread answers a fork waits for it; the fork stays whole", async () => {
    // Checkpointed: most of the parent's lines are in R2 alone.
    const parent = await flushedThread(["one", "two", "three", "four", "five", "six"]);
    const parentLines = await exported(parent);
    expect((await rolloutRows(parent)).length).toBeLessThan(parentLines.length / 2);
    const list = env.ROLLOUT.list.bind(env.ROLLOUT);
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    // The source's read of its segments waits until the delete has been sent.
    const held = vi.spyOn(env.ROLLOUT, "list").mockImplementationOnce(async (options) => {
      await gate;
      return list(options);
    });
    try {
      const forkId = newThreadId();
      const forking = post(`/v1/threads/${parent}/fork`, { id: forkId });
      await vi.waitFor(() => expect(held).toHaveBeenCalled());
      const deleting = api("DELETE", `/v1/threads/${parent}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
      open();
      expect((await forking).status).toBe(201);
      expect((await deleting).status).toBe(204);
      expect((await exported(forkId)).slice(1)).toEqual(parentLines.slice(1));
      await restoreFromR2(forkId);
      expect((await exported(forkId)).slice(1)).toEqual(parentLines.slice(1));
    } finally {
      held.mockRestore();
    }
  });

  it("a thread whose forks are all gone is deleted whole", async () => {
    const parent = await flushedThread(["one"]);
    const forkId = await fork(parent);
    expect((await api("DELETE", `/v1/threads/${forkId}`)).status).toBe(204);
    expect(await keysUnder(parent)).not.toContain(`borrowers/${forkId}`);
    expect((await api("DELETE", `/v1/threads/${parent}`)).status).toBe(204);
    expect(await keysUnder(parent)).toEqual([]);
  });

  it("while R2 refuses writes, a fork copies, and a thread with loans is not deleted", async () => {
    const parent = await flushedThread(["one"]);
    const outage = vi.spyOn(env.ROLLOUT, "put").mockRejectedValue(new Error("r2 down"));
    try {
      const copy = await fork(parent);
      expect(await keysUnder(parent)).not.toContain(`borrowers/${copy}`);
      expect(await rolloutRows(copy)).toHaveLength((await exported(parent)).length);
      outage.mockRestore();
      const sharing = await fork(parent);
      vi.spyOn(env.ROLLOUT, "put").mockRejectedValue(new Error("r2 down"));
      const before = await prompt(parent);
      expect((await api("DELETE", `/v1/threads/${parent}`)).status).toBe(500);
      expect(await prompt(parent)).toBe(before);
      expect(await keysUnder(parent)).toContain(`borrowers/${sharing}`);
      vi.restoreAllMocks();
      expect((await api("DELETE", `/v1/threads/${parent}`)).status).toBe(204);
      const lines = await exported(sharing);
      expect(lines.length).toBeGreaterThan(1);
      expect((await exported(copy)).slice(1)).toEqual(lines.slice(1));
    } finally {
      vi.restoreAllMocks();
    }
  });
});
