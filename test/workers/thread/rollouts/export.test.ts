import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  LiveThread,
  type StorageParts,
  storagePartsOf,
  threadPrefix,
} from "../../../../durable-objects/thread/live-thread.ts";
import {
  exportedRollout,
  rolloutPrefix,
} from "../../../../durable-objects/thread/rollouts/export.ts";
import type { TurnRow } from "../../../../durable-objects/thread/storage/meta-store.ts";
import type { Env } from "../../../../env.ts";
import type { ForkSource, RolloutExport, RpcResult } from "../../../../shared/api/index.ts";
import type { MessageItem } from "../../../../shared/protocol/index.ts";
import { newThreadId, threadStub } from "../../helpers/api.ts";

/** The test worker's environment as the production code types it (its THREAD is typed here). */
const spindleEnv = env as unknown as Env;

/** Runs `body` with a new thread in a fresh object, over its real SQLite and R2. */
function withThread<T>(body: (live: LiveThread, parts: StorageParts) => Promise<T>): Promise<T> {
  const threadId = newThreadId();
  return runInDurableObject(threadStub(threadId), (_instance, state) => {
    const parts = storagePartsOf(state, spindleEnv);
    const live = LiveThread.create(parts, { tenant: "local", threadId, config: {} }, () => {});
    return body(live, parts);
  });
}

const user = (text: string): MessageItem => ({
  type: "message",
  role: "user",
  content: [{ type: "input_text", text }],
});

/** The stored text of every line in SQLite, in order. */
const storedLines = (live: LiveThread) => live.log.rawAfter(0).map((r) => r.line);

/** Writes one "turn": a message line, with its row over that line. */
function turn(live: LiveThread, parts: StorageParts, id: string, status: TurnRow["status"]) {
  live.session.inject([user(id)]);
  const seq = live.log.lastSeq;
  parts.meta.putTurn({
    id,
    ordinal: seq,
    kind: "turn",
    status,
    first_seq: seq,
    last_seq: seq,
    pending_calls: [],
    usage: null,
    error: null,
  });
}

/** A result's JSONL stream read into its lines, the rest of the value kept as it is. */
async function readExport(result: RpcResult<RolloutExport>) {
  if (!result.ok) return result;
  const text = await new Response(result.value.lines).text();
  return { ok: true, value: { ...result.value, lines: text } };
}

async function readPrefix(result: RpcResult<ForkSource>) {
  if (!result.ok) return result;
  const text = await new Response(result.value.lines).text();
  return { ok: true, value: { ...result.value, lines: text } };
}

const jsonl = (lines: readonly string[]) => lines.map((l) => `${l}\n`).join("");

describe("exportedRollout: the whole rollout as Codex JSONL", () => {
  it("gives every line, byte for byte, each ended by a newline", async () => {
    const result = await withThread(async (live) => {
      live.session.inject([user("one"), user("two")]);
      return {
        stored: storedLines(live),
        exported: await readExport(await exportedRollout(live, false)),
      };
    });
    expect(result.stored).toHaveLength(4);
    expect(result.exported).toEqual({
      ok: true,
      value: { lines: jsonl(result.stored), missingLines: 0 },
    });
  });

  it("gives the lines already moved to R2 and those still only in SQLite, in order", async () => {
    const result = await withThread(async (live) => {
      live.session.inject([user("one"), user("two")]);
      const all = storedLines(live);
      await live.segments.flush();
      live.log.deleteThrough(3);
      live.session.inject([user("three")]);
      return {
        all: [...all, ...storedLines(live).slice(1)],
        sqlite: live.log.rawAfter(0).map((r) => r.seq),
        exported: await readExport(await exportedRollout(live, false)),
      };
    });
    expect(result.sqlite).toEqual([4, 5]);
    expect(result.exported).toEqual({
      ok: true,
      value: { lines: jsonl(result.all), missingLines: 0 },
    });
  });

  it("refuses a rollout with lines that cannot be read, unless asked for what can be", async () => {
    const result = await withThread(async (live, parts) => {
      live.session.inject([user("one")]);
      const all = storedLines(live);
      await live.segments.flush();
      live.log.deleteThrough(3);
      live.session.inject([user("two")]);
      const tail = storedLines(live);
      // The segment of lines 1-3 is lost from R2.
      const listed = await parts.bucket.list({
        prefix: threadPrefix({ tenant: "local", incarnation: null }, live.meta.id),
      });
      await parts.bucket.delete(listed.objects.map((o) => o.key));
      return {
        segments: listed.objects.length,
        all,
        tail,
        refused: await readExport(await exportedRollout(live, false)),
        partial: await readExport(await exportedRollout(live, true)),
      };
    });
    expect(result.segments).toBe(1);
    expect(result.refused).toEqual({
      ok: false,
      error: {
        code: "rollout_incomplete",
        detail:
          "3 of the rollout's 4 lines cannot be read: rollout lines 1-3 are missing. " +
          "Ask with allow_incomplete=true for the lines that can.",
      },
    });
    expect(result.partial).toEqual({
      ok: true,
      value: { lines: jsonl(result.tail), missingLines: 3 },
    });
  });
});

describe("rolloutPrefix: what a fork copies", () => {
  it("with beforeTurn, ends just before that turn's first line", async () => {
    const result = await withThread(async (live, parts) => {
      turn(live, parts, "turn_1", "completed");
      turn(live, parts, "turn_2", "completed");
      turn(live, parts, "turn_3", "completed");
      const all = storedLines(live);
      return {
        all,
        prefix: await readPrefix(await rolloutPrefix(live, { beforeTurn: "turn_2" }, undefined)),
        threadId: live.meta.id,
      };
    });
    expect(result.all).toHaveLength(5);
    expect(result.prefix).toEqual({
      ok: true,
      value: { lines: jsonl(result.all.slice(0, 3)), forkedFrom: result.threadId, warnings: [] },
    });
  });

  it("ends with the last line of the turn named afterTurn", async () => {
    const result = await withThread(async (live, parts) => {
      turn(live, parts, "turn_1", "completed");
      turn(live, parts, "turn_2", "completed");
      turn(live, parts, "turn_3", "completed");
      const all = storedLines(live);
      return {
        all,
        prefix: await readPrefix(await rolloutPrefix(live, { afterTurn: "turn_2" }, undefined)),
        threadId: live.meta.id,
      };
    });
    expect(result.prefix).toEqual({
      ok: true,
      value: { lines: jsonl(result.all.slice(0, 4)), forkedFrom: result.threadId, warnings: [] },
    });
  });

  it("answers turn_not_found for a turn the thread does not have", async () => {
    const result = await withThread(async (live, parts) => {
      turn(live, parts, "turn_1", "completed");
      return rolloutPrefix(live, { beforeTurn: "turn_nope" }, undefined);
    });
    expect(result).toEqual({
      ok: false,
      error: { code: "turn_not_found", detail: 'No turn "turn_nope" in this thread.' },
    });
  });

  it("without beforeTurn, leaves out the lines of the task running now", async () => {
    const result = await withThread(async (live, parts) => {
      turn(live, parts, "turn_1", "completed");
      turn(live, parts, "turn_2", "in_progress");
      const all = storedLines(live);
      return {
        all,
        running: await readPrefix(await rolloutPrefix(live, {}, "turn_2")),
        threadId: live.meta.id,
      };
    });
    expect(result.running).toEqual({
      ok: true,
      value: { lines: jsonl(result.all.slice(0, 3)), forkedFrom: result.threadId, warnings: [] },
    });
  });

  it("without beforeTurn and with nothing running (or a task not begun), copies every line", async () => {
    const result = await withThread(async (live, parts) => {
      turn(live, parts, "turn_1", "completed");
      const all = storedLines(live);
      return {
        all,
        idle: await readPrefix(await rolloutPrefix(live, {}, undefined)),
        notBegun: await readPrefix(await rolloutPrefix(live, {}, "turn_without_row")),
        threadId: live.meta.id,
      };
    });
    const whole = {
      ok: true,
      value: { lines: jsonl(result.all), forkedFrom: result.threadId, warnings: [] },
    };
    expect(result).toEqual({
      all: result.all,
      idle: whole,
      notBegun: whole,
      threadId: result.threadId,
    });
  });

  it("beforeTurn wins over the running task", async () => {
    const result = await withThread(async (live, parts) => {
      turn(live, parts, "turn_1", "completed");
      turn(live, parts, "turn_2", "completed");
      turn(live, parts, "turn_3", "in_progress");
      const all = storedLines(live);
      return {
        all,
        prefix: await readPrefix(await rolloutPrefix(live, { beforeTurn: "turn_2" }, "turn_3")),
      };
    });
    expect(result.prefix.ok && result.prefix.value.lines).toEqual(jsonl(result.all.slice(0, 3)));
  });
});
