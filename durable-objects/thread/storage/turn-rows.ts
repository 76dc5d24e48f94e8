import type { TurnResource } from "../../../shared/api/index.ts";
import type { ContentItem } from "../../../shared/protocol/index.ts";
import { gunzip, gzip } from "./gzip.ts";
import type { Sql } from "./sql.ts";
import { TextParts } from "./text-parts.ts";

/** A turn's row: its resource minus the items, which are read back from the rollout by seq range. */
export interface TurnRow {
  id: string;
  ordinal: number;
  /** A user turn, or a compaction (manual or automatic). Absent in rows written before kinds. */
  kind?: "turn" | "compaction";
  status: TurnResource["status"];
  first_seq: number;
  last_seq: number;
  pending_calls: TurnResource["pending_calls"];
  usage: TurnResource["usage"];
  error: TurnResource["error"];
  /** Steered input waiting for a paused turn's tool outputs (joins when the turn resumes). */
  queued_input?: ContentItem[][];
  /** The approval requests among `pending_calls` (absent when none). */
  pending_approvals?: NonNullable<TurnResource["pending_approvals"]>;
  /** What the turn's steps went without (absent when nothing). */
  warnings?: NonNullable<TurnResource["warnings"]>;
  /** What started a compaction task (absent for user turns, and where the rollout records none). */
  trigger?: TurnResource["trigger"];
}

/** A row's body as stored: the row without id and ordinal, empty defaults left out. */
type TurnBody = Omit<TurnRow, "id" | "ordinal" | "pending_calls" | "usage" | "error"> & {
  pending_calls?: TurnRow["pending_calls"];
  /** Input, cached input, output, reasoning output and total tokens. */
  usage?: number[];
  error?: TurnRow["error"];
};

/**
 * Finished turns stored in one group row: for short chat turns about 4.3 KB compressed, just over
 * what a row keeps on its own page, so SQLite stores the rest in one full overflow page (a row
 * of half a page takes a page of its own).
 */
export const TURN_GROUP_ROWS = 256;
/** The newest rows stay rows (the latest turn among them, which `last` reads). */
export const RECENT_TURN_ROWS = 8;
/** A row whose body is longer stays a row (it may have parts; groups hold small rows). */
const GROUPED_BODY_MAX_CHARS = 8_192;

/** The statuses a turn does not leave: its row no longer changes. */
export const FINISHED_TURN_STATUSES: ReadonlySet<string> = new Set([
  "completed",
  "failed",
  "interrupted",
]);

/**
 * A turn row's body, kept small (one per turn, forever): the id and ordinal live in their
 * columns, empty defaults are left out and usage is a five-number array.
 */
function encodeTurnBody(row: TurnRow): TurnBody {
  const {
    id: _id,
    ordinal: _ordinal,
    pending_calls,
    usage,
    error,
    queued_input,
    pending_approvals,
    warnings,
    ...rest
  } = row;
  return {
    ...rest,
    ...(pending_calls.length > 0 ? { pending_calls } : {}),
    ...(usage
      ? {
          usage: [
            usage.input_tokens,
            usage.cached_input_tokens,
            usage.output_tokens,
            usage.reasoning_output_tokens,
            usage.total_tokens,
          ],
        }
      : {}),
    ...(error ? { error } : {}),
    ...(queued_input && queued_input.length > 0 ? { queued_input } : {}),
    ...(pending_approvals && pending_approvals.length > 0 ? { pending_approvals } : {}),
    ...(warnings && warnings.length > 0 ? { warnings } : {}),
  };
}

function decodeTurnBody(id: string, ordinal: number, body: TurnBody): TurnRow {
  const [input = 0, cached = 0, output = 0, reasoning = 0, total = 0] = body.usage ?? [];
  return {
    ...body,
    id,
    ordinal,
    pending_calls: body.pending_calls ?? [],
    usage: body.usage
      ? {
          input_tokens: input,
          cached_input_tokens: cached,
          output_tokens: output,
          reasoning_output_tokens: reasoning,
          total_tokens: total,
        }
      : null,
    error: body.error ?? null,
  };
}

export function encodeTurnRow(row: TurnRow): string {
  return JSON.stringify(encodeTurnBody(row));
}

export function decodeTurnRow(stored: { turn_id: string; ordinal: number; body: string }): TurnRow {
  return decodeTurnBody(stored.turn_id, stored.ordinal, JSON.parse(stored.body) as TurnBody);
}

/**
 * A group row's turns, column by column (gzip JSON): ids; each ordinal less its `first_seq`; each
 * `first_seq` less the one after the previous turn's `last_seq`; each `last_seq` less its
 * `first_seq`; usage with input tokens less the previous usage's, and total tokens less input and
 * output (null: none); and the rest of each body. Consecutive turns make most numbers 0 or
 * alike, which halves the compressed size of whole rows (17 against 34 bytes a short chat turn).
 */
interface TurnColumns {
  ids: string[];
  ordinals: number[];
  firsts: number[];
  spans: number[];
  usage: (number[] | null)[];
  rest: Omit<TurnBody, "first_seq" | "last_seq" | "usage">[];
}

/** A group row's `data`: its turns (oldest first) as gzip JSON of their columns. */
export function encodeTurnGroup(rows: readonly TurnRow[]): Uint8Array {
  const columns: TurnColumns = {
    ids: [],
    ordinals: [],
    firsts: [],
    spans: [],
    usage: [],
    rest: [],
  };
  let next = 0;
  let input = 0;
  for (const row of rows) {
    const { first_seq, last_seq, usage, ...rest } = encodeTurnBody(row);
    columns.ids.push(row.id);
    columns.ordinals.push(row.ordinal - first_seq);
    columns.firsts.push(first_seq - next);
    columns.spans.push(last_seq - first_seq);
    next = last_seq + 1;
    const [inTokens = 0, cached = 0, outTokens = 0, reasoning = 0, total = 0] = usage ?? [];
    columns.usage.push(
      usage ? [inTokens - input, cached, outTokens, reasoning, total - inTokens - outTokens] : null,
    );
    if (usage) input = inTokens;
    columns.rest.push(rest);
  }
  return gzip(JSON.stringify(columns));
}

export function decodeTurnGroup(data: Uint8Array | ArrayBuffer): TurnRow[] {
  const columns = JSON.parse(gunzip(data)) as TurnColumns;
  let next = 0;
  let input = 0;
  return columns.rest.map((rest, i) => {
    const first_seq = next + (columns.firsts[i] ?? 0);
    const last_seq = first_seq + (columns.spans[i] ?? 0);
    next = last_seq + 1;
    const packed = columns.usage[i];
    let usage: number[] | undefined;
    if (packed) {
      const [inDelta = 0, cached = 0, outTokens = 0, reasoning = 0, rest = 0] = packed;
      input += inDelta;
      usage = [input, cached, outTokens, reasoning, rest + input + outTokens];
    }
    const body: TurnBody = { ...rest, first_seq, last_seq, ...(usage ? { usage } : {}) };
    return decodeTurnBody(columns.ids[i] ?? "", first_seq + (columns.ordinals[i] ?? 0), body);
  });
}

/**
 * A turn id's 4-byte hash (32-bit FNV-1a over its UTF-16 code units, big-endian). A group row's
 * `hashes` holds its turns' hashes end to end, so `instr(hashes, ?)` finds the groups that may
 * hold a turn without inflating any; the group's turns then tell.
 */
export function turnIdHash(id: string): Uint8Array {
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) hash = Math.imul(hash ^ id.charCodeAt(i), 0x01000193);
  const bytes = new Uint8Array(4);
  new DataView(bytes.buffer).setUint32(0, hash >>> 0);
  return bytes;
}

type StoredRow = { turn_id: string; ordinal: number; body: string };

/**
 * The turn rows of a thread. Each turn is written as a row of `spindle_turns` (a body of JSON,
 * in parts when long). Finished turns do not change again, so once more than
 * `RECENT_TURN_ROWS + TURN_GROUP_ROWS` rows are stored, `pack` moves the oldest finished ones
 * into group rows of `spindle_turn_groups`, 256 turns a row, compressed by column (a short chat
 * turn's row is about 190 bytes with its key; grouped, about 17). A turn is read from its row, else from
 * the newest group that holds it. A row written for a turn a group holds already (none is, in
 * practice: finished turns are not written again) is read first and grouped again later.
 */
export class TurnRows {
  readonly #sql: Sql;
  readonly #parts: TextParts;

  constructor(sql: Sql) {
    this.#sql = sql;
    this.#parts = new TextParts(sql, "turn");
  }

  put(row: TurnRow): void {
    const first = this.#parts.split(row.id, encodeTurnRow(row));
    this.#sql`INSERT INTO spindle_turns (turn_id, ordinal, body)
      VALUES (${row.id}, ${row.ordinal}, ${first})
      ON CONFLICT (turn_id) DO UPDATE SET body = excluded.body`;
  }

  get(id: string): TurnRow | undefined {
    const row = this.#sql<StoredRow>`
      SELECT turn_id, ordinal, body FROM spindle_turns WHERE turn_id = ${id}`.toArray()[0];
    return row ? this.#decode(row) : this.#grouped(id);
  }

  /** The turn with the highest ordinal. Always a row (the newest are never grouped). */
  last(): TurnRow | undefined {
    const row = this.#sql<StoredRow>`
      SELECT turn_id, ordinal, body FROM spindle_turns ORDER BY ordinal DESC LIMIT 1`.toArray()[0];
    return row && this.#decode(row);
  }

  /**
   * Up to `count` turns with an ordinal below `before`, newest first; turns that never started
   * (ordinal 0: they wrote no line) are left out. Groups record no ordinal range, and a turn that
   * finished late joins a newer group than turns after it, so every group is inflated: a
   * 5,000-turn thread's are 19 rows of about 4 KB.
   */
  newest(count: number, before = Number.MAX_SAFE_INTEGER): TurnRow[] {
    const rows = this.#sql<StoredRow>`
      SELECT turn_id, ordinal, body FROM spindle_turns WHERE ordinal > 0 AND ordinal < ${before}
      ORDER BY ordinal DESC LIMIT ${count}`
      .toArray()
      .map((row) => this.#decode(row));
    const groups = this.#sql.tables.ifExists("spindle_turn_groups", [], () =>
      this.#sql<{ data: ArrayBuffer }>`
        SELECT data FROM spindle_turn_groups ORDER BY grp DESC`.toArray(),
    );
    // A row is read before a group, and a newer group before an older one (as `get` reads).
    const seen = new Set(rows.map((row) => row.id));
    for (const { data } of groups) {
      for (const row of decodeTurnGroup(data)) {
        if (row.ordinal <= 0 || row.ordinal >= before || seen.has(row.id)) continue;
        seen.add(row.id);
        rows.push(row);
      }
    }
    return rows.sort((a, b) => b.ordinal - a.ordinal).slice(0, count);
  }

  #decode(row: StoredRow): TurnRow {
    return decodeTurnRow({ ...row, body: this.#parts.join(row.turn_id, row.body) });
  }

  #grouped(id: string): TurnRow | undefined {
    const hash = turnIdHash(id).buffer as ArrayBuffer;
    const groups = this.#sql.tables.ifExists("spindle_turn_groups", [], () =>
      this.#sql<{ data: ArrayBuffer }>`
        SELECT data FROM spindle_turn_groups WHERE instr(hashes, ${hash}) > 0
        ORDER BY grp DESC`.toArray(),
    );
    for (const { data } of groups) {
      const row = decodeTurnGroup(data).find((r) => r.id === id);
      if (row) return row;
    }
    return undefined;
  }

  /**
   * Groups the oldest finished rows, `TURN_GROUP_ROWS` at a time, leaving the newest
   * `RECENT_TURN_ROWS`, unfinished turns and long rows as rows. Returns how many groups it wrote.
   * Off the request path (the alarm, a restore): it reads every row when there are enough.
   */
  pack(): number {
    const { n } = this.#sql<{ n: number }>`SELECT COUNT(*) AS n FROM spindle_turns`.one();
    if (n < RECENT_TURN_ROWS + TURN_GROUP_ROWS) return 0;
    const rows = this.#sql<StoredRow>`
      SELECT turn_id, ordinal, body FROM spindle_turns ORDER BY ordinal`.toArray();
    const finished = rows
      .slice(0, -RECENT_TURN_ROWS)
      .filter((r) => r.body.length <= GROUPED_BODY_MAX_CHARS)
      .map(decodeTurnRow)
      .filter((r) => FINISHED_TURN_STATUSES.has(r.status));
    let written = 0;
    for (let i = 0; i + TURN_GROUP_ROWS <= finished.length; i += TURN_GROUP_ROWS) {
      const group = finished.slice(i, i + TURN_GROUP_ROWS);
      const hashes = new Uint8Array(4 * group.length);
      group.forEach((r, j) => {
        hashes.set(turnIdHash(r.id), 4 * j);
      });
      const data = encodeTurnGroup(group).slice().buffer as ArrayBuffer;
      this.#sql.tables.ensuring("spindle_turn_groups", () => {
        this
          .#sql`INSERT INTO spindle_turn_groups (hashes, data) VALUES (${hashes.buffer}, ${data})`;
      });
      this.#sql`DELETE FROM spindle_turns
        WHERE turn_id IN (SELECT value FROM json_each(${JSON.stringify(group.map((r) => r.id))}))`;
      written += 1;
    }
    return written;
  }
}
