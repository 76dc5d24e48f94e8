import { decodeRolloutLine } from "../../shared/rollout/index.ts";

export interface SegmentText {
  key: string;
  first_seq: number;
  /** The uncompressed JSONL of the segment. */
  text: string;
  /** Borrowed from the thread a fork came from: `text` is the part of it the fork uses. */
  borrowed?: boolean;
}

export interface RolloutCheck {
  ok: boolean;
  errors: string[];
  /** The whole rollout, in seq order: R2 segments then the SQLite lines after them. */
  lines: string[];
}

/**
 * Verifies a thread's durable rollout (design §10 invariant 5): R2 segments and the SQLite tail
 * together hold seqs 1..N exactly once, contiguous, every line decodes, and where SQLite still
 * holds a line R2 also has, the two are byte-identical.
 */
export function checkRollout(
  segments: readonly SegmentText[],
  tail: readonly { seq: number; line: string }[],
): RolloutCheck {
  const errors: string[] = [];
  const bySeq = new Map<number, string>();
  const sorted = [...segments].sort((a, b) => a.first_seq - b.first_seq);
  let next = 1;
  const inTail = new Set(tail.map((r) => r.seq));
  for (const segment of sorted) {
    // Only a fork's own first line may be on its way to R2 while its borrowed segments are there.
    const bridged = segment.borrowed && next === 1 && segment.first_seq === 2 && inTail.has(1);
    if (segment.first_seq !== next && !bridged) {
      errors.push(`segment ${segment.key} starts at ${segment.first_seq}, expected ${next}`);
    }
    const lines = segment.text.split("\n");
    if (lines.at(-1) === "") lines.pop();
    lines.forEach((line, i) => {
      const seq = segment.first_seq + i;
      if (bySeq.has(seq)) errors.push(`seq ${seq} appears twice in R2`);
      bySeq.set(seq, line);
    });
    // A thread created again under a kept segment's key takes one with its creation time in it.
    const match = /(\d{12})-(\d{12})(\.\d+)?\.jsonl(\.gz)?$/.exec(segment.key);
    const last = segment.first_seq + lines.length - 1;
    const named = segment.borrowed
      ? Number(match?.[1]) <= segment.first_seq && Number(match?.[2]) >= last
      : Number(match?.[1]) === segment.first_seq && Number(match?.[2]) === last;
    if (!match || !named) {
      errors.push(
        `segment key ${segment.key} does not name its range ${segment.first_seq}-${last}`,
      );
    }
    next = last + 1;
  }
  const inR2 = next - 1;
  for (const row of tail) {
    const stored = bySeq.get(row.seq);
    if (stored !== undefined && stored !== row.line)
      errors.push(`seq ${row.seq} differs between R2 and SQLite`);
    if (stored === undefined) bySeq.set(row.seq, row.line);
  }
  const total = Math.max(inR2, ...tail.map((r) => r.seq), 0);
  const lines: string[] = [];
  for (let seq = 1; seq <= total; seq++) {
    const line = bySeq.get(seq);
    if (line === undefined) {
      errors.push(`seq ${seq} is missing`);
      continue;
    }
    try {
      decodeRolloutLine(line, seq);
    } catch (err) {
      errors.push(`seq ${seq} does not decode: ${(err as Error).message}`);
    }
    lines.push(line);
  }
  return { ok: errors.length === 0, errors, lines };
}
