import type { Clock } from "../../../shared/ports/index.ts";
import type { RolloutItem, RolloutLine } from "../../../shared/protocol/index.ts";
import { decodeRolloutLine, encodeRolloutLine } from "../../../shared/rollout/index.ts";
import type { RolloutSink } from "../../../shared/session/index.ts";
import type { Sql } from "./sql.ts";
import { splitText } from "./text-parts.ts";

/**
 * What a log keeps in memory for the next checkpoint at most: lines, and characters of their JSON
 * (a line's payload may be an untruncated tool output that history does not hold). Past either
 * (a checkpoint held back while R2 is down, huge outputs) it drops them all, and that checkpoint
 * reads and decodes its rows instead.
 */
const MAX_LINES_IN_MEMORY = 2_000;
const MAX_CHARS_IN_MEMORY = 4 * 2 ** 20;

export interface StoredLine {
  seq: number;
  line: string;
}

/**
 * The SQLite tail of a thread's rollout. `append` inserts synchronously, in the same step in which
 * the engine changes memory, so the output gate holds every response until the line is durable
 * (design §6, invariant 5). Sequence numbers start at 1 and never repeat.
 */
export class RolloutLog implements RolloutSink {
  readonly #sql: Sql;
  readonly #clock: Clock;
  #lastSeq: number;
  /** Timestamp of the newest line this instance appended, if any. */
  #lastWrittenAt: string | undefined;
  /**
   * The newest lines as objects (seqs after `#memoryAfter`): the next checkpoint takes them
   * instead of decoding their rows, and so shares their items with the live history instead of
   * holding a second copy. Lines appended as text (imports) are not kept.
   */
  #memory: RolloutLine[] = [];
  /** The JSON length of each of `#memory`, and their sum. */
  #memorySizes: number[] = [];
  #memoryChars = 0;
  #memoryAfter: number;

  constructor(sql: Sql, clock: Clock, lastSeq: number) {
    this.#sql = sql;
    this.#clock = clock;
    this.#lastSeq = lastSeq;
    this.#memoryAfter = lastSeq;
  }

  get lastSeq(): number {
    return this.#lastSeq;
  }

  /**
   * When the newest line appended through `append` was written. A thread's `updated_at` is this,
   * not a later clock read, so a thread restored from its rollout reports the same time.
   */
  get lastWrittenAt(): string | undefined {
    return this.#lastWrittenAt;
  }

  append(item: RolloutItem): void {
    const timestamp = new Date(this.#clock.nowMs()).toISOString();
    const line = { timestamp, ...item } as RolloutLine;
    const text = encodeRolloutLine(line);
    this.#insert(text);
    this.#lastWrittenAt = timestamp;
    this.#keep(line, text.length);
  }

  /** Appends an already-encoded line (imports keep the original bytes). */
  appendText(text: string): void {
    this.#insert(text);
    this.#forget(this.#memory.length + 1);
  }

  #keep(line: RolloutLine, chars: number): void {
    if (
      this.#memory.length >= MAX_LINES_IN_MEMORY ||
      this.#memoryChars + chars > MAX_CHARS_IN_MEMORY
    ) {
      this.#forget(this.#memory.length + 1);
      return;
    }
    this.#memory.push(line);
    this.#memorySizes.push(chars);
    this.#memoryChars += chars;
  }

  #insert(text: string): void {
    const seq = this.#lastSeq + 1;
    RolloutLog.insert(this.#sql, seq, text);
    this.#lastSeq = seq;
  }

  /** Drops the oldest `count` seqs from memory (more than it holds: the newest line too). */
  #forget(count: number): void {
    this.#memory.splice(0, count);
    for (const chars of this.#memorySizes.splice(0, count)) this.#memoryChars -= chars;
    this.#memoryAfter += count;
  }

  /**
   * Keeps `lines`, decoded from `rows` (a load read them for its replay), for the next checkpoint:
   * only when they are every line after `after` and nothing was appended yet, within the limits.
   */
  remember(after: number, rows: readonly StoredLine[], lines: readonly RolloutLine[]): void {
    if (this.#memory.length > 0 || this.#memoryAfter !== this.#lastSeq) return;
    if (rows.length !== lines.length || rows.length !== this.#lastSeq - after) return;
    if (firstMissingSeq(rows, after, this.#lastSeq) !== undefined) return;
    this.#memoryAfter = after;
    lines.forEach((line, i) => {
      this.#keep(line, rows[i]?.line.length ?? 0);
    });
  }

  /** The lines with seq in (after, last] as kept in memory, or undefined when some are not. */
  linesInMemory(after: number, last: number): RolloutLine[] | undefined {
    const end = this.#memoryAfter + this.#memory.length;
    if (after < this.#memoryAfter || last > end || last < after) return undefined;
    return this.#memory.slice(after - this.#memoryAfter, last - this.#memoryAfter);
  }

  static insert(sql: Sql, seq: number, text: string): void {
    splitText(text).forEach((part, i) => {
      sql`INSERT INTO spindle_rollout (seq, part, line) VALUES (${seq}, ${i}, ${part})`;
    });
  }

  /** Stored lines with `seq > after`, oldest first, at most `limit`. */
  rawAfter(after: number, limit = Number.MAX_SAFE_INTEGER): StoredLine[] {
    const last = after + Math.min(limit, Number.MAX_SAFE_INTEGER - after);
    const rows = this.#sql<{ seq: number; part: number; line: string }>`
      SELECT seq, part, line FROM spindle_rollout WHERE seq > ${after} AND seq <= ${last}
      ORDER BY seq, part`.toArray();
    const lines: StoredLine[] = [];
    for (const row of rows) {
      const previous = lines.at(-1);
      if (row.part > 0 && previous?.seq === row.seq) previous.line += row.line;
      else lines.push({ seq: row.seq, line: row.line });
    }
    return lines;
  }

  /** Drops lines up to and including `seq` (only ever lines already in R2 and in a checkpoint). */
  deleteThrough(seq: number): void {
    this.#sql`DELETE FROM spindle_rollout WHERE seq <= ${seq}`;
    const covered = Math.min(seq - this.#memoryAfter, this.#memory.length);
    if (covered > 0) this.#forget(covered);
  }

  static maxStoredSeq(sql: Sql): number {
    const row = sql<{ seq: number | null }>`SELECT MAX(seq) AS seq FROM spindle_rollout`.one();
    return row.seq ?? 0;
  }
}

/**
 * The first seq in (after, last] that `rows` (in seq order) lack, or undefined when they hold
 * every one. SQLite holds every line after the newest checkpoint, so a line it lacks there is in
 * R2 only (a thread restored from R2 before its first checkpoint) or was lost.
 */
export function firstMissingSeq(
  rows: readonly StoredLine[],
  after: number,
  last: number,
): number | undefined {
  let expected = after + 1;
  for (const row of rows) {
    if (row.seq !== expected) return expected;
    expected += 1;
  }
  return expected <= last ? expected : undefined;
}

/**
 * Decodes stored lines. A line that does not decode is skipped with a warning: one corrupt row
 * must not keep the thread from loading (design §10 invariant 8).
 */
export function decodeTolerantly(rows: readonly StoredLine[]): {
  lines: RolloutLine[];
  warnings: string[];
} {
  const lines: RolloutLine[] = [];
  const warnings: string[] = [];
  for (const row of rows) {
    try {
      lines.push(decodeRolloutLine(row.line, row.seq));
    } catch (err) {
      warnings.push(`rollout line ${row.seq} skipped: ${(err as Error).message}`);
    }
  }
  return { lines, warnings };
}
