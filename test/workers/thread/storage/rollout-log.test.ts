import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  decodeTolerantly,
  RolloutLog,
} from "../../../../durable-objects/thread/storage/rollout-log.ts";
import { sqlOf } from "../../../../durable-objects/thread/storage/sql.ts";
import type { RolloutItem, RolloutLine } from "../../../../shared/protocol/index.ts";
import { encodeRolloutLine } from "../../../../shared/rollout/index.ts";
import { newThreadId, threadStub } from "../../helpers/api.ts";

const clock = { nowMs: () => Date.UTC(2026, 10, 30) };

const message = (text: string): RolloutItem => ({
  type: "response_item",
  payload: { type: "message", role: "user", content: [{ type: "input_text", text }] },
});

/** Runs `body` with a fresh rollout log over a new object's SQLite (the schema migrated). */
function withLog<T>(body: (log: RolloutLog, sql: ReturnType<typeof sqlOf>) => T): Promise<T> {
  const stub = threadStub(newThreadId());
  return runInDurableObject(stub, (_instance, state) => {
    const sql = sqlOf(state.storage.sql);
    return body(new RolloutLog(sql, clock, 0), sql);
  });
}

const texts = (lines: readonly { payload: unknown }[] | undefined) =>
  lines?.map((line) => (line.payload as { content: { text: string }[] }).content[0]?.text);

describe("RolloutLog: lines kept in memory for the next checkpoint", () => {
  it("gives back the appended line objects, equal to what their rows decode to", async () => {
    const result = await withLog((log) => {
      for (const text of ["one", "two", "three"]) log.append(message(text));
      const kept = log.linesInMemory(0, 3);
      return {
        kept: texts(kept),
        same: JSON.stringify(kept) === JSON.stringify(decodeTolerantly(log.rawAfter(0)).lines),
        partial: texts(log.linesInMemory(1, 2)),
        beyond: log.linesInMemory(0, 4),
      };
    });
    expect(result.kept).toEqual(["one", "two", "three"]);
    expect(result.same).toBe(true);
    expect(result.partial).toEqual(["two"]);
    expect(result.beyond).toBeUndefined();
  });

  it("forgets lines a checkpoint covered, and every line before one appended as text", async () => {
    const result = await withLog((log) => {
      for (const text of ["a", "b", "c", "d"]) log.append(message(text));
      log.deleteThrough(2);
      const afterDelete = { before: log.linesInMemory(0, 4), kept: texts(log.linesInMemory(2, 4)) };
      const imported = { timestamp: "2026-11-30T00:00:00.000Z", ...message("imported") };
      log.appendText(encodeRolloutLine(imported as RolloutLine));
      log.append(message("f"));
      return {
        ...afterDelete,
        acrossImport: log.linesInMemory(2, 6),
        afterImport: texts(log.linesInMemory(5, 6)),
      };
    });
    expect(result.before).toBeUndefined();
    expect(result.kept).toEqual(["c", "d"]);
    expect(result.acrossImport).toBeUndefined();
    expect(result.afterImport).toEqual(["f"]);
  });

  it("stops keeping lines past its character limit; the checkpoint then reads rows", async () => {
    const result = await withLog((log) => {
      log.append(message("small"));
      log.append(message("x".repeat(5 * 2 ** 20)));
      log.append(message("next"));
      return { all: log.linesInMemory(0, 3), last: texts(log.linesInMemory(2, 3)) };
    });
    expect(result.all).toBeUndefined();
    expect(result.last).toEqual(["next"]);
  });

  it("remembers lines a load decoded only when they are every line after its checkpoint", async () => {
    const result = await withLog((log, sql) => {
      for (const text of ["a", "b", "c"]) log.append(message(text));
      const reload = () => new RolloutLog(sql, clock, 3);
      const rows = log.rawAfter(1);
      const lines = decodeTolerantly(rows).lines;
      const whole = reload();
      whole.remember(1, rows, lines);
      const gap = reload();
      gap.remember(0, rows, lines);
      return { whole: texts(whole.linesInMemory(1, 3)), gap: gap.linesInMemory(0, 3) };
    });
    expect(result.whole).toEqual(["b", "c"]);
    expect(result.gap).toBeUndefined();
  });
});
