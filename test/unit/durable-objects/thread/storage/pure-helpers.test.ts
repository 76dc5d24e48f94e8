import { describe, expect, it } from "vitest";
import { turnRowsFromRollout } from "../../../../../durable-objects/thread/rollouts/turn-index.ts";
import {
  chunkBytes,
  keptItemGroups,
  planItemGroups,
} from "../../../../../durable-objects/thread/storage/checkpoint-store.ts";
import { segmentKey } from "../../../../../durable-objects/thread/storage/segments.ts";
import { splitText } from "../../../../../durable-objects/thread/storage/text-parts.ts";
import type { ResponseItem, RolloutLine } from "../../../../../shared/protocol/index.ts";

const at = "2026-01-01T00:00:00.000Z";
const ev = (payload: object) => ({ timestamp: at, type: "event_msg", payload }) as RolloutLine;
const item = (payload: object) =>
  ({ timestamp: at, type: "response_item", payload }) as RolloutLine;

describe("splitText", () => {
  it("splits at the limit and never between the halves of a surrogate pair", () => {
    expect(splitText("abcdef", 4)).toEqual(["abcd", "ef"]);
    expect(splitText("abc😀d", 4)).toEqual(["abc", "😀d"]);
    expect(splitText("", 4)).toEqual([""]);
    const text = "x😀".repeat(1000);
    expect(splitText(text, 7).join("")).toBe(text);
  });
});

describe("chunkBytes", () => {
  it("splits at the limit and keeps every byte", () => {
    const bytes = new Uint8Array(10).map((_, i) => i);
    expect(chunkBytes(bytes, 4).map((c) => [...c])).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6, 7],
      [8, 9],
    ]);
    expect(chunkBytes(new Uint8Array(), 4)).toHaveLength(1);
  });
});

describe("checkpoint item groups", () => {
  const limits = { maxItems: 3, maxBytes: 100 };
  const items = (n: number) =>
    Array.from(
      { length: n },
      (_, i) =>
        Object.freeze({
          type: "message",
          role: "user",
          content: [{ type: "input_text", text: `${i}` }],
        }) as ResponseItem,
    );

  it("close at the item or byte limit, whichever comes first; the rest is one open group", () => {
    expect(planItemGroups([10, 10, 10, 10, 10, 10, 10], 0, limits)).toEqual([
      { first: 0, count: 3 },
      { first: 3, count: 3 },
      { first: 6, count: 1 },
    ]);
    // 60 + 50 reaches 100: the group closes after its second item; one item alone may pass it.
    expect(planItemGroups([60, 50, 500, 1], 0, limits)).toEqual([
      { first: 0, count: 2 },
      { first: 2, count: 1 },
      { first: 3, count: 1 },
    ]);
    expect(planItemGroups([10, 10, 10, 10], 3, limits)).toEqual([{ first: 3, count: 1 }]);
    expect(planItemGroups([10, 10, 10], 3, limits)).toEqual([]);
  });

  it("keep the closed groups whose item objects are the same, and nothing after a difference", () => {
    const stored = items(7);
    const bytes = stored.map(() => 10);
    const groups = planItemGroups(bytes, 0, limits); // 3 + 3 + 1 (open)
    const grown = [...stored, ...items(2)];
    const grownBytes = grown.map(() => 10);
    // Both closed groups are kept; the open one is rewritten with the new items.
    expect(keptItemGroups(groups, stored, grown, grownBytes, limits)).toBe(2);
    // Equal content is not enough: a rewritten history holds other objects.
    const rewritten = [...stored.slice(0, 4), ...items(5)];
    expect(keptItemGroups(groups, stored, rewritten, grownBytes, limits)).toBe(1);
    expect(keptItemGroups(groups, stored, items(9), grownBytes, limits)).toBe(0);
    // A shorter history (a rollback) keeps only the groups it still holds whole.
    expect(keptItemGroups(groups, stored, stored.slice(0, 5), bytes, limits)).toBe(1);
    // Byte counts that no longer close a group where it was closed: rewrite from there.
    expect(
      keptItemGroups(groups, stored, grown, [10, 10, 10, 95, 10, 10, 10, 10, 10], limits),
    ).toBe(1);
  });
});

describe("segmentKey", () => {
  it("zero-pads the seq range so R2 lists segments in order", () => {
    expect(segmentKey("threads/a/b/", 1, 120)).toBe(
      "threads/a/b/segments/000000000001-000000000120.jsonl.gz",
    );
  });
});

describe("turnRowsFromRollout", () => {
  it("rebuilds turn rows: completed, failed, interrupted, compaction, and a paused turn with its pending call", () => {
    const lines = [
      ev({ type: "task_started", turn_id: "a" }),
      ev({
        type: "token_count",
        info: { total_token_usage: usage(5), last_token_usage: usage(5) },
      }),
      ev({ type: "task_complete", turn_id: "a" }),
      ev({ type: "task_started", turn_id: "b" }),
      ev({ type: "task_complete", turn_id: "b", error: { code: "provider_error", message: "x" } }),
      ev({ type: "task_started", turn_id: "c" }),
      ev({ type: "turn_aborted", turn_id: "c", reason: "interrupted" }),
      ev({ type: "task_started", turn_id: "d" }),
      { timestamp: at, type: "compacted", payload: { message: "s" } } as RolloutLine,
      ev({ type: "task_complete", turn_id: "d" }),
      ev({ type: "task_started", turn_id: "e" }),
      item({ type: "function_call", name: "f", arguments: "{}", call_id: "c1" }),
    ].map((line, i) => ({ seq: i + 1, line }));
    const rows = turnRowsFromRollout(lines);
    expect(rows.map((r) => [r.id, r.status, r.kind, r.first_seq, r.last_seq])).toEqual([
      ["a", "completed", "turn", 1, 3],
      ["b", "failed", "turn", 4, 5],
      ["c", "interrupted", "turn", 6, 7],
      ["d", "completed", "compaction", 8, 10],
      ["e", "requires_action", "turn", 11, 12],
    ]);
    expect(rows[0]?.usage?.total_tokens).toBe(5);
    expect(rows[4]?.pending_calls.map((c) => c.call_id)).toEqual(["c1"]);
    expect(rows.map((r) => r.error)).toEqual([
      null,
      { code: "provider_error", message: "x" },
      null,
      null,
      null,
    ]);
  });

  it("a user turn that compacted between its steps, or before its user message, stays a turn", () => {
    const compactedLine = { timestamp: at, type: "compacted", payload: { message: "s" } };
    const userMessage = ev({ type: "user_message", message: "hi" });
    const lines = [
      ev({ type: "task_started", turn_id: "mid" }),
      userMessage,
      compactedLine as RolloutLine,
      ev({ type: "task_complete", turn_id: "mid" }),
      ev({ type: "task_started", turn_id: "pre" }),
      compactedLine as RolloutLine,
      userMessage,
      ev({ type: "task_complete", turn_id: "pre" }),
      ev({ type: "task_started", turn_id: "task" }),
      compactedLine as RolloutLine,
      ev({ type: "task_complete", turn_id: "task" }),
    ].map((line, i) => ({ seq: i + 1, line }));
    expect(turnRowsFromRollout(lines).map((r) => [r.id, r.kind])).toEqual([
      ["mid", "turn"],
      ["pre", "turn"],
      ["task", "compaction"],
    ]);
  });

  it("reads a failed turn's error whatever its shape: a code outside the vocabulary is provider_error", () => {
    const lines = [
      ev({ type: "task_started", turn_id: "a" }),
      ev({
        type: "task_complete",
        turn_id: "a",
        error: { code: "rate_limited", message: "slow down" },
      }),
      ev({ type: "task_started", turn_id: "b" }),
      ev({ type: "task_complete", turn_id: "b", error: "stream disconnected" }),
    ].map((line, i) => ({ seq: i + 1, line }));
    expect(turnRowsFromRollout(lines).map((r) => [r.status, r.error])).toEqual([
      ["failed", { code: "provider_error", message: "slow down" }],
      ["failed", { code: "provider_error", message: "stream disconnected" }],
    ]);
  });
});

function usage(n: number) {
  return {
    input_tokens: n,
    cached_input_tokens: 0,
    output_tokens: 0,
    reasoning_output_tokens: 0,
    total_tokens: n,
  };
}
