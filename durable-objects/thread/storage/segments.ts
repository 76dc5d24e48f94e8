import type { SharedSegment } from "../../../shared/api/index.ts";
import { gunzip, gzip, sha256Hex } from "./gzip.ts";
import type { RolloutLog } from "./rollout-log.ts";
import { CREATED_AT, leftBehind, readBorrowed, tombstoneOf } from "./segment-loans.ts";
import type { Sql } from "./sql.ts";

/** Upper bound of one segment's uncompressed JSONL. */
export const SEGMENT_MAX_BYTES = 4 * 1024 * 1024;

/** A manifest row: a segment (the fork's own, or one it borrows) and whether R2 holds it. */
export interface SegmentRow extends SharedSegment {
  state: "pending" | "done";
}

/**
 * `{prefix}segments/{first:012}-{last:012}.jsonl.gz`: zero-padded so R2 lists them in order. With
 * `createdMs`, `….{createdMs}.jsonl.gz`: the key of a thread created under an id whose deleted
 * thread's segment, kept for its forks, holds the plain one.
 */
export function segmentKey(
  prefix: string,
  first: number,
  last: number,
  createdMs?: number,
): string {
  const pad = (n: number) => String(n).padStart(12, "0");
  const incarnation = createdMs === undefined ? "" : `.${createdMs}`;
  return `${prefix}segments/${pad(first)}-${pad(last)}${incarnation}.jsonl.gz`;
}

/**
 * Moves the SQLite tail to R2 as immutable segment objects (design §6). Each segment is a
 * contiguous seq range written under its own key exactly once. The range is recorded as `pending`
 * in the manifest before the put, so a retry after a failure (or an eviction) rewrites the same
 * range from the same lines, never a different one: no gap, no duplicate. Lines stay in SQLite
 * until their segment is `done`.
 */
export class SegmentStore {
  readonly #sql: Sql;
  readonly #bucket: R2Bucket;
  readonly #prefix: string;
  readonly #log: RolloutLog;
  /** The thread's creation time, which its segments carry (see `segment-loans.ts`). */
  readonly #createdAt: string;
  #inFlight: Promise<void> | undefined;
  /** `flushedThrough`, read once and then kept up to date by this store's own writes. */
  #flushed: number | undefined;

  constructor(sql: Sql, bucket: R2Bucket, prefix: string, log: RolloutLog, createdAt: string) {
    this.#sql = sql;
    this.#bucket = bucket;
    this.#prefix = prefix;
    this.#log = log;
    this.#createdAt = createdAt;
  }

  manifest(): SegmentRow[] {
    return this.#sql<SegmentRow & Record<string, SqlStorageValue>>`
      SELECT first_seq, last_seq, r2_key, bytes, sha256, state FROM spindle_segments ORDER BY first_seq`.toArray();
  }

  /** The last seq R2 holds (0 when none). */
  flushedThrough(): number {
    this.#flushed ??= SegmentStore.flushedThroughOf(this.#sql);
    return this.#flushed;
  }

  /**
   * The newest seq before the first pending segment: a fork's borrowed segments are done while
   * its own first line is still on its way, and that line must stay in SQLite until it is in R2.
   */
  static flushedThroughOf(sql: Sql): number {
    const row = sql<{ seq: number | null }>`
      SELECT MAX(last_seq) AS seq FROM spindle_segments WHERE state = 'done' AND first_seq <
        COALESCE((SELECT MIN(first_seq) FROM spindle_segments WHERE state = 'pending'), 1e18)`.one();
    return row.seq ?? 0;
  }

  /** The newest seq any done segment holds (a fork's borrowed ones too), 0 when none. */
  static lastDoneSeqOf(sql: Sql): number {
    const row = sql<{ seq: number | null }>`
      SELECT MAX(last_seq) AS seq FROM spindle_segments WHERE state = 'done'`.one();
    return row.seq ?? 0;
  }

  /** Records a segment R2 already holds (restore). */
  static recordDone(sql: Sql, s: SharedSegment): void {
    sql`INSERT INTO spindle_segments (first_seq, last_seq, r2_key, bytes, sha256, state)
      VALUES (${s.first_seq}, ${s.last_seq}, ${s.r2_key}, ${s.bytes}, ${s.sha256}, 'done')`;
  }

  /** Records a range to be written next (a fork's own first line, before its borrowed ones). */
  static recordPending(sql: Sql, prefix: string, first: number, last: number): SegmentRow {
    const row: SegmentRow = {
      first_seq: first,
      last_seq: last,
      r2_key: segmentKey(prefix, first, last),
      bytes: 0,
      sha256: "",
      state: "pending",
    };
    sql`INSERT INTO spindle_segments (first_seq, last_seq, r2_key, bytes, sha256, state)
      VALUES (${first}, ${last}, ${row.r2_key}, 0, '', 'pending')`;
    return row;
  }

  /** Flushes every unflushed line; concurrent callers share one run. Throws if a put fails. */
  flush(): Promise<void> {
    this.#inFlight ??= this.#flushAll().finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  async #flushAll(): Promise<void> {
    for (;;) {
      const segment = this.#pending() ?? this.#plan();
      if (segment === undefined) return;
      await this.#write(segment);
    }
  }

  #pending(): SegmentRow | undefined {
    return this.manifest().find((s) => s.state === "pending");
  }

  /** Records the next range as pending. Synchronous: the plan is durable before any put. */
  #plan(): SegmentRow | undefined {
    // From the manifest, not the cached value: a store of an instance's earlier load may have
    // finished a segment since.
    const after = SegmentStore.flushedThroughOf(this.#sql);
    this.#flushed = after;
    // A range ends before a segment the manifest already has (a fork's borrowed ones).
    const next = this.#sql<{ seq: number | null }>`
      SELECT MIN(first_seq) AS seq FROM spindle_segments WHERE first_seq > ${after}`.one().seq;
    const rows = this.#log.rawAfter(after, Math.min(10_000, (next ?? Infinity) - after - 1));
    if (rows.length === 0) return undefined;
    let bytes = 0;
    let last = after;
    for (const row of rows) {
      if (row.seq !== last + 1)
        throw new Error(`[rollout] gap in the SQLite tail after seq ${last}`);
      if (bytes > 0 && bytes + row.line.length + 1 > SEGMENT_MAX_BYTES) break;
      bytes += row.line.length + 1;
      last = row.seq;
    }
    const first = after + 1;
    return SegmentStore.recordPending(this.#sql, this.#prefix, first, last);
  }

  async #write(segment: SegmentRow): Promise<void> {
    const lines = this.#log
      .rawAfter(segment.first_seq - 1, segment.last_seq - segment.first_seq + 1)
      .map((r) => r.line);
    if (lines.length !== segment.last_seq - segment.first_seq + 1) {
      throw new Error(
        `[rollout] lines ${segment.first_seq}-${segment.last_seq} left SQLite before R2`,
      );
    }
    const text = `${lines.join("\n")}\n`;
    const digest = await sha256Hex(text);
    let key = segment.r2_key;
    let existing = await this.#bucket.head(key);
    if (existing !== null && existing.customMetadata?.sha256 !== digest) {
      // Other lines under this key: a deleted thread's, kept for its forks. Never overwritten.
      key = segmentKey(
        this.#prefix,
        segment.first_seq,
        segment.last_seq,
        Date.parse(this.#createdAt),
      );
      existing = await this.#bucket.head(key);
    }
    if (existing?.customMetadata?.sha256 !== digest) {
      const body = gzip(text);
      await this.#bucket.put(key, body, {
        httpMetadata: { contentType: "application/gzip" },
        customMetadata: {
          sha256: digest,
          first_seq: String(segment.first_seq),
          last_seq: String(segment.last_seq),
          [CREATED_AT]: this.#createdAt,
        },
      });
    }
    this
      .#sql`UPDATE spindle_segments SET state = 'done', bytes = ${text.length}, sha256 = ${digest},
      r2_key = ${key} WHERE first_seq = ${segment.first_seq}`;
    this.#flushed = Math.max(this.flushedThrough(), segment.last_seq);
  }

  /**
   * The lines with seq in [first, last] that flushed segments hold, read from only those
   * segments (the manifest says which). A damaged or missing segment's lines are left out; a
   * read that fails throws.
   */
  async readLines(first: number, last: number): Promise<{ seq: number; line: string }[]> {
    const lines: { seq: number; line: string }[] = [];
    for (const segment of this.manifest()) {
      if (segment.state !== "done" || segment.last_seq < first || segment.first_seq > last)
        continue;
      const object = await this.#bucket.get(segment.r2_key);
      if (object === null) continue;
      const bytes = await object.arrayBuffer();
      try {
        const decoded = await decodeSegment(object, bytes);
        // A borrowed segment's row is the part of it the fork uses.
        const from = Math.max(first, segment.first_seq);
        const to = Math.min(last, segment.last_seq);
        lines.push(...decoded.lines.filter((l) => l.seq >= from && l.seq <= to));
      } catch {
        // Left out: the caller gets fewer lines, as a replay skips a damaged segment.
      }
    }
    return lines;
  }

  /**
   * Reads every segment of a prefix from R2 in seq order, checking each checksum. A segment whose
   * content is wrong is skipped with a warning (its lines are then missing); a read that fails
   * throws.
   */
  static async readAll(
    bucket: R2Bucket,
    prefix: string,
  ): Promise<{
    lines: { seq: number; line: string }[];
    segments: SharedSegment[];
    warnings: string[];
  }> {
    const lines: { seq: number; line: string }[] = [];
    const segments: SharedSegment[] = [];
    const warnings: string[] = [];
    // Segments a deleted thread under this id left for its forks are not this thread's.
    const tombstone = await tombstoneOf(bucket, prefix);
    let cursor: string | undefined;
    do {
      const page = await bucket.list({
        prefix: `${prefix}segments/`,
        cursor,
        include: ["customMetadata"],
      });
      for (const object of page.objects) {
        if (tombstone && leftBehind(object, tombstone)) continue;
        // A read that fails is R2 unavailable, not a bad segment: the caller fails and is retried
        // later, instead of rebuilding the thread without the segment's lines.
        const body = await bucket.get(object.key);
        const bytes = body === null ? null : await body.arrayBuffer();
        try {
          const segment = await decodeSegment(object, bytes);
          lines.push(...segment.lines);
          segments.push(segment.row);
        } catch (err) {
          warnings.push(`segment ${object.key} skipped: ${(err as Error).message}`);
        }
      }
      cursor = page.truncated ? page.cursor : undefined;
    } while (cursor !== undefined);
    // A fork's borrowed segments: the part of each that it uses.
    const record = await readBorrowed(bucket, prefix);
    if (record === "damaged") warnings.push("fork-prefix.json unreadable: borrowed lines skipped");
    for (const borrowed of record === "damaged" ? [] : record) {
      const object = await bucket.get(borrowed.r2_key);
      const bytes = object === null ? null : await object.arrayBuffer();
      try {
        if (object === null) throw new Error("it vanished");
        const segment = await decodeSegment(object, bytes);
        lines.push(
          ...segment.lines.filter((l) => l.seq >= borrowed.first_seq && l.seq <= borrowed.last_seq),
        );
        segments.push(borrowed);
      } catch (err) {
        warnings.push(`segment ${borrowed.r2_key} skipped: ${(err as Error).message}`);
      }
    }
    lines.sort((a, b) => a.seq - b.seq);
    segments.sort((a, b) => a.first_seq - b.first_seq);
    return { lines, segments, warnings };
  }
}

/** A segment's lines, checked against its metadata; throws when its content is not right. */
async function decodeSegment(
  object: R2Object,
  bytes: ArrayBuffer | null,
): Promise<{ lines: { seq: number; line: string }[]; row: SharedSegment }> {
  if (bytes === null) throw new Error("it vanished");
  const text = gunzip(bytes);
  const expected = object.customMetadata?.sha256;
  if (expected === undefined || expected !== (await sha256Hex(text))) {
    throw new Error("its checksum does not match");
  }
  const first = Number(object.customMetadata?.first_seq);
  if (!Number.isInteger(first) || first < 1) throw new Error("it has no first_seq");
  const texts = text.split("\n").filter((l) => l !== "");
  return {
    lines: texts.map((line, i) => ({ seq: first + i, line })),
    row: {
      first_seq: first,
      last_seq: first + texts.length - 1,
      r2_key: object.key,
      bytes: text.length,
      sha256: expected,
    },
  };
}
