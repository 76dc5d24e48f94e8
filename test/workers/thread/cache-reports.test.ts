/**
 * The live cache report (the `token_count` event's `cache`) against the one
 * `GET …/turns/{turn}/requests` rebuilds from the rollout: the same, request for request, across
 * evictions, a part longer than a SQLite row, a restore from R2 and a rollout that cannot be read.
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { gunzipSync, gzipSync } from "node:zlib";
import { describe, expect, it, vi } from "vitest";
import type { CacheReport } from "../../../shared/api/index.ts";
import {
  api,
  importRollout,
  json,
  newThreadId,
  readSse,
  type SseFrame,
  threadStub,
} from "../helpers/api.ts";
import { createThread, inspect, turn } from "../helpers/durability.ts";
import { getWith } from "../helpers/turns.ts";

/** Runs alarms until the thread has a checkpoint. */
async function checkpointAfter(id: string): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await runDurableObjectAlarm(threadStub(id));
    if (((await inspect(id))?.checkpointSeq ?? 0) > 0) return;
  }
  throw new Error("no checkpoint in 10 alarms");
}

/** The cache reports of the thread's first `count` `token_count` events, oldest first. */
async function liveReports(id: string, count: number): Promise<(CacheReport | null)[]> {
  const res = await getWith(`/v1/threads/${id}/events`, { "last-event-id": "0" });
  const counts = (frames: SseFrame[]) => frames.filter((f) => f.event === "token_count");
  const frames = await readSse(res, (seen) => counts(seen).length >= count);
  return counts(frames).map((f) => JSON.parse(f.data).data.cache);
}

/** A turn run with `stream: true`: the cache reports its `token_count` events carried. */
async function streamedTurn(id: string, input: string): Promise<(CacheReport | null)[]> {
  const res = await api("POST", `/v1/threads/${id}/turns`, { input, stream: true });
  const frames = await readSse(res, (seen) => seen.some((f) => f.event === "turn.completed"));
  return frames.filter((f) => f.event === "token_count").map((f) => JSON.parse(f.data).data.cache);
}

/** Every request's cache report as the requests route rebuilds it, oldest turn first. */
async function rebuiltReports(id: string): Promise<CacheReport[]> {
  const turns = await json<{ data: { id: string }[] }>(
    await api("GET", `/v1/threads/${id}/turns?limit=100`),
  );
  const out: CacheReport[] = [];
  for (const t of turns.data.reverse()) {
    const page = await json<{ data: { cache: CacheReport }[] }>(
      await api("GET", `/v1/threads/${id}/turns/${t.id}/requests`),
    );
    out.push(...page.data.map((r) => r.cache));
  }
  return out;
}

const requestParts = (id: string) =>
  runInDurableObject(threadStub(id), (_instance, state) => ({
    rows: state.storage.sql.exec("SELECT idx FROM spindle_request_parts").toArray().length,
    continued: state.storage.sql
      .exec("SELECT key FROM spindle_parts WHERE kind = 'request'")
      .toArray().length,
  }));

/**
 * A thread with one turn, flushed, that keeps no newest request, as a thread of an earlier
 * release has it; evicted.
 */
async function threadOfAnEarlierRelease(): Promise<string> {
  const id = newThreadId();
  await createThread(id, { cwd: "/repo" });
  await turn(id, "one");
  await runDurableObjectAlarm(threadStub(id));
  await runInDurableObject(threadStub(id), (_instance, state) => {
    state.storage.sql.exec("DELETE FROM spindle_meta WHERE key = 'last_request'");
    state.storage.sql.exec("DELETE FROM spindle_request_parts");
  });
  await evictDurableObject(threadStub(id));
  return id;
}

describe("the cache report on the token_count event", () => {
  it("is the rebuilt one after evictions, with a part longer than a row, and after a restore from R2", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    const live = [...(await streamedTurn(id, "one"))];
    await evictDurableObject(threadStub(id));
    // 600,000 characters: more than one SQLite part (500,000) holds.
    live.push(...(await streamedTurn(id, `long ${"x".repeat(600_000)}`)));
    expect((await requestParts(id)).continued).toBeGreaterThan(0);
    await evictDurableObject(threadStub(id));
    live.push(...(await streamedTurn(id, "three")));
    await runDurableObjectAlarm(threadStub(id));
    await json(await api("POST", `/v1/threads/${id}/restore`));
    // The restore empties what it keeps of the newest request and rebuilds it from the rollout.
    live.push(...(await streamedTurn(id, "four")));

    const rebuilt = await rebuiltReports(id);
    expect(rebuilt.map((r) => r.break_reason)).toEqual(["first_request", null, null, null]);
    expect(live).toEqual(rebuilt);
    // What SQLite keeps is the newest request: its instructions, tools and input items.
    const prompt = await json<{ input: unknown[] }>(await api("GET", `/v1/threads/${id}/prompt`));
    const kept = await requestParts(id);
    expect(kept.rows).toBeGreaterThan(2);
    expect(kept.rows).toBeLessThanOrEqual(prompt.input.length + 2);
  });

  it("after a cold start from a checkpoint, shares the stored runs without reading them, or reads one it cannot tell", async () => {
    const id = newThreadId();
    await createThread(id);
    const live: (CacheReport | null)[] = [];
    for (let i = 0; i < 12; i++) live.push(...(await streamedTurn(id, `question ${i}`)));
    await checkpointAfter(id);
    await evictDurableObject(threadStub(id));
    live.push(...(await streamedTurn(id, "after the cold start")));
    // History came back as runs (8 items a group here), and the report read none of them.
    const loaded = await threadStub(id).storedRunsForTesting();
    expect(loaded?.runs).toBeGreaterThan(1);
    expect(loaded?.unread).toBe(loaded?.runs);

    // A group whose record has no key (written by an earlier release) is read to compare it.
    await runInDurableObject(threadStub(id), (_instance, state) => {
      const sql = state.storage.sql;
      const run = sql
        .exec<{ data: ArrayBuffer }>("SELECT data FROM spindle_checkpoint_runs WHERE grp = 0")
        .one();
      const { key: _key, ...record } = JSON.parse(gunzipSync(new Uint8Array(run.data)).toString());
      sql.exec(
        "UPDATE spindle_checkpoint_runs SET data = ? WHERE grp = 0",
        gzipSync(JSON.stringify(record)),
      );
    });
    await evictDurableObject(threadStub(id));
    live.push(...(await streamedTurn(id, "with a run it reads")));
    const after = await threadStub(id).storedRunsForTesting();
    expect(after?.unread).toBe((after?.runs ?? 0) - 1);

    const rebuilt = await rebuiltReports(id);
    expect(rebuilt.slice(1).every((r) => r.break_reason === null)).toBe(true);
    expect(live).toEqual(rebuilt);
  });

  it("after a rollback and a compaction, and across a model switch", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    await turn(id, "one");
    await turn(id, "two");
    await json(await api("POST", `/v1/threads/${id}/rollback`, { turns: 1 }));
    await turn(id, "after the rollback");
    await json(await api("POST", `/v1/threads/${id}/compact`, {}));
    await evictDurableObject(threadStub(id));
    await turn(id, "after the summary");
    await turn(id, "on the lite model", { model: "spindle-local-lite" });

    const rebuilt = await rebuiltReports(id);
    expect(rebuilt.map((r) => r.break_reason)).toEqual([
      "first_request",
      null,
      "rollback",
      // The summary request offers no tools, as the thread's requests did: its prefix holds.
      null,
      "compaction",
      "model_switch",
    ]);
    expect(await liveReports(id, rebuilt.length)).toEqual(rebuilt);
  });

  it("is null once when the rollout cannot be read back to rebuild the previous request, then whole again", async () => {
    const id = await threadOfAnEarlierRelease();
    const listing = vi.spyOn(env.ROLLOUT, "list").mockRejectedValue(new Error("r2 down"));
    const reading = vi.spyOn(env.ROLLOUT, "get").mockRejectedValue(new Error("r2 down"));
    try {
      await turn(id, "two");
    } finally {
      listing.mockRestore();
      reading.mockRestore();
    }
    await turn(id, "three");
    const rebuilt = await rebuiltReports(id);
    expect(await liveReports(id, 3)).toEqual([rebuilt[0], null, rebuilt[2]]);
    expect(rebuilt[2]?.break_reason).toBeNull();
  });

  it("an imported thread's first turn compares with the request its rollout rebuilds", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    await turn(id, "one");
    const rollout = await (await api("GET", `/v1/threads/${id}/rollout`)).text();
    const copy = newThreadId();
    expect((await importRollout(copy, rollout)).status).toBe(201);
    const head = () =>
      runInDurableObject(
        threadStub(copy),
        (_instance, state) =>
          state.storage.sql
            .exec("SELECT value FROM spindle_meta WHERE key = 'last_request'")
            .toArray().length,
      );
    // Nothing is kept until the first task rebuilds it: the import's answer does not wait for it.
    expect(await head()).toBe(0);
    await turn(copy, "two");
    expect(await head()).toBe(1);
    const rebuilt = await rebuiltReports(copy);
    expect(rebuilt.at(-1)?.break_reason).toBeNull();
    expect(await liveReports(copy, 1)).toEqual([rebuilt.at(-1)]);
  });

  it("a thread of an earlier release rebuilds its newest request from the rollout on its first turn", async () => {
    const id = await threadOfAnEarlierRelease();
    await turn(id, "two");
    const rebuilt = await rebuiltReports(id);
    expect(rebuilt.map((r) => r.break_reason)).toEqual(["first_request", null]);
    expect(await liveReports(id, 2)).toEqual(rebuilt);
  });
});
