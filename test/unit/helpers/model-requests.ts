import { type SeqLine, turnRequests } from "../../../shared/model-requests/index.ts";
import type { RolloutItem, RolloutLine } from "../../../shared/protocol/index.ts";
import { truncationPolicyOf } from "../../../shared/session/index.ts";
import { drain, type Harness, resume, runTurn, T0 } from "./engine.ts";

/** The sink's items as stored lines: seq from 1, each line a second after the one before. */
export function linesOf(items: readonly RolloutItem[], gapAfter?: number, gapMs = 0): SeqLine[] {
  return items.map((item, i) => ({
    seq: i + 1,
    line: {
      timestamp: new Date(
        T0 + i * 1000 + (gapAfter !== undefined && i > gapAfter ? gapMs : 0),
      ).toISOString(),
      ...item,
    } as RolloutLine,
  }));
}

/** Each task's line range, from its `task_started` to the line before the next one. */
function taskRanges(lines: readonly SeqLine[]): { first: number; last: number }[] {
  const starts = lines.filter(
    (l) => l.line.type === "event_msg" && l.line.payload.type === "task_started",
  );
  return starts.map((start, i) => ({
    first: start.seq,
    last: (starts[i + 1]?.seq ?? (lines.at(-1)?.seq ?? 0) + 1) - 1,
  }));
}

export function allRequests(h: Harness, lines = linesOf(h.sink.items), ttlS: number | null = null) {
  const opts = {
    truncation: truncationPolicyOf(h.session.state.config),
    cacheTtlS: () => ttlS,
  };
  return taskRanges(lines).flatMap(({ first, last }) => turnRequests(lines, first, last, opts));
}

/**
 * Turns that break the cache every way a thread can (a thread with `LOOKUP_TOOL`): a tool round,
 * a compaction, a rollback, a model switch, tools and instructions changed. `reload` stands for
 * the object's reload after the tool round and after the rollback.
 */
export async function runEveryBreak(
  start: Harness,
  reload: (h: Harness) => Harness,
): Promise<Harness> {
  let h = start;
  await runTurn(h, "first");
  const paused = await runTurn(h, '/call lookup {"q":1}');
  await resume(h, paused, (calls) => calls.map((c) => ({ call_id: c.call_id, output: "ok" })));
  h = reload(h);
  await drain(h.session.compact("manual"));
  await runTurn(h, "after the summary");
  await runTurn(h, "to be rolled back");
  h.session.recordRollback(1);
  h = reload(h);
  await runTurn(h, "after the rollback");
  await runTurn(h, "on the lite model", { model: "spindle-local-lite" });
  await runTurn(h, "with no tools", { tools: [] });
  await runTurn(h, "told otherwise", { base_instructions: "Answer briefly." });
  return h;
}

/** The break reasons of `runEveryBreak`'s requests, in order. */
export const EVERY_BREAK = [
  "first_request",
  null,
  null,
  // The summary request offers no tools, so its prefix ends after the instructions.
  "tools_changed",
  "compaction",
  null,
  "rollback",
  "model_switch",
  "tools_changed",
  "instructions_changed",
];
