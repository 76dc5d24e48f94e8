import { type SeqLine, turnRequests } from "../../../shared/model-requests/index.ts";
import type { RolloutItem, RolloutLine } from "../../../shared/protocol/index.ts";
import { truncationPolicyOf } from "../../../shared/session/index.ts";
import { type Harness, T0 } from "./engine.ts";

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
