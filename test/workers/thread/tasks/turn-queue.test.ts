import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sqlOf } from "../../../../durable-objects/thread/storage/sql.ts";
import { TurnQueue } from "../../../../durable-objects/thread/tasks/turn-queue.ts";
import { newThreadId, threadStub } from "../../helpers/api.ts";

const turn = (turnId: string) => ({
  turnId,
  content: [{ type: "input_text" as const, text: turnId }],
});

describe("TurnQueue", () => {
  it("a fresh instance (after an eviction) counts what storage holds before it changes it", async () => {
    const shifted = await runInDurableObject(threadStub(newThreadId()), (_i, state) => {
      const sql = sqlOf(state.storage.sql);
      const before = new TurnQueue(sql);
      for (const id of ["a", "b", "c"]) before.push(turn(id));
      // Another instance over the same storage, as after an eviction: its first calls change it.
      const after = new TurnQueue(sql);
      expect(after.remove("a")).toBe(true);
      after.push(turn("d"));
      const order: (string | undefined)[] = [];
      for (let i = 0; i < 4; i++) order.push(after.shift()?.turnId);
      return order;
    });
    expect(shifted).toEqual(["b", "c", "d", undefined]);
  });
});
