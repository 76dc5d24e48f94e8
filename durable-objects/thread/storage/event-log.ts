import { isTerminalEventType } from "../../../shared/api/index.ts";
import { utf8ByteLength } from "../../../shared/context-manager/index.ts";
import type { Clock } from "../../../shared/ports/index.ts";
import type { Sql } from "./sql.ts";
import { TEXT_PART_MAX_CHARS, TextParts } from "./text-parts.ts";

/** How many events a thread keeps at most for `Last-Event-ID` replay. */
export const EVENT_WINDOW_EVENTS = 2_000;
/**
 * How many bytes of stored event text (UTF-8) a thread keeps at most for replay: with the item
 * deltas of finished items left out, 38 to 50 turns of short chat (about 2.6 KB of events each),
 * more than a client reconnecting within the 15 minutes of retention misses in a chat, while the
 * buffer stays a small part of a long thread's storage (2,000 events of a chat thread, with
 * deltas, are 0.7 MB).
 */
export const EVENT_WINDOW_BYTES = 128 * 1024;
/**
 * Where a prune that finds more than `EVENT_WINDOW_BYTES` cuts to: a quarter below, so a full
 * buffer is cut every few dozen turns rather than on every one.
 */
export const EVENT_WINDOW_CUT_BYTES = (EVENT_WINDOW_BYTES * 3) / 4;
/** How long an event stays replayable. */
export const EVENT_RETENTION_MS = 15 * 60_000;

/** One thread event as stored and streamed (NDJSON over RPC; the worker frames it as SSE). */
export interface ThreadEventRecord {
  seq: number;
  type: string;
  /** Null for items injected outside a turn. */
  turn_id: string | null;
  data: unknown;
}

interface Subscriber {
  controller: ReadableStreamDefaultController<Uint8Array>;
  /** Ends the stream after this turn's terminal event (undefined: follow until cancelled). */
  untilTurn: string | undefined;
  /** Closes the stream and forgets it. */
  end: () => void;
}

const encoder = new TextEncoder();

/**
 * Events after which a turn's stored `item.delta` events are dropped: the item they streamed is
 * stored whole (`item.completed`), or the turn ended and nothing will complete it.
 */
function supersedesDeltas(type: string): boolean {
  return type === "item.completed" || isTerminalEventType(type);
}

/** A stored `item.delta` event: its seq and the UTF-8 bytes of its stored text. */
interface StoredDelta {
  seq: number;
  bytes: number;
}

/** What a `DELETE … RETURNING length(CAST(body AS BLOB)) AS bytes` gives per row it took. */
type Dropped = { bytes: number };

/** Pending events written at once past this many, even before their turn ends. */
const MAX_PENDING_EVENTS = 64;

/**
 * Stored events a replay reads at a time, when its reader asks for more: a client reconnecting
 * far back (events may be megabytes each) makes the object hold one page, not the whole window.
 */
const REPLAY_PAGE_EVENTS = 32;

/**
 * The thread's event sequence (design §7): every event gets the next `seq`, is stored in SQLite
 * (a bounded window, for replay after a disconnect), then fanned out to live subscribers. Persist
 * first: a subscriber that has gone away never affects the turn (style §5), and no event reaches
 * a client before it is stored.
 *
 * A turn's events are stored together, in one statement: each is kept pending until a terminal
 * event (or the next macrotask, or a read of the log) writes the batch and only then sends it.
 * One insert per turn instead of one per event and delta is most of what persisting them costs. An
 * event lost with the instance before its batch was written was never sent, so its `seq` is free
 * to be handed out again.
 *
 * `item.delta` events, most of a turn's events, are stored only while their item is streaming:
 * once an `item.completed` or terminal event follows them, they are deleted (or, in the same
 * batch, never written) but still sent live. Replay leaves them out then, as the RPC contract
 * allows; the completed item holds their text.
 */
export class EventLog {
  readonly #sql: Sql;
  /** Read on first use, so constructing the Durable Object stays free of queries. */
  #last: number | undefined;
  readonly #subscribers = new Set<Subscriber>();
  /** Ends each open stream, replaying or live (`closeAll`). */
  readonly #enders = new Set<() => void>();
  #pending: { event: ThreadEventRecord; at: number }[] = [];
  /** Stored `item.delta` events no later event superseded yet (this instance's). */
  #storedDeltas: StoredDelta[] = [];
  /** Rows of `spindle_events` and the UTF-8 bytes of their `body`: read once, then kept. */
  #stored: { rows: number; bytes: number } | undefined;
  #flushTimer: ReturnType<typeof setTimeout> | undefined;

  readonly #clock: Clock;
  readonly #parts: TextParts;

  constructor(sql: Sql, clock: Clock) {
    this.#sql = sql;
    this.#clock = clock;
    this.#parts = new TextParts(sql, "event");
  }

  get lastSeq(): number {
    this.#last ??=
      this.#sql<{ seq: number | null }>`SELECT MAX(seq) AS seq FROM spindle_events`.one().seq ?? 0;
    return this.#last;
  }

  emit(type: string, turnId: string | null, data: unknown): ThreadEventRecord {
    const event = { seq: this.lastSeq + 1, type, turn_id: turnId, data };
    this.#last = event.seq;
    this.#pending.push({ event, at: this.#clock.nowMs() });
    if (isTerminalEventType(type) || this.#pending.length >= MAX_PENDING_EVENTS) this.flush();
    else this.#flushTimer ??= setTimeout(() => this.flush(), 0);
    return event;
  }

  /**
   * Stores the pending events, then sends them to the subscribers. Usually one statement: the
   * rows travel as one JSON parameter, in as many statements as needed to keep each parameter
   * under the value limit; an event longer than that is stored in parts, one row each. Deltas
   * that a later event of the batch supersedes are sent without being stored; stored ones it
   * supersedes are deleted.
   */
  flush(): void {
    this.#cancelTimer();
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    const bodies = batch.map(({ event }) => JSON.stringify(event));
    const lastSuperseding = batch.findLastIndex(({ event }) => supersedesDeltas(event.type));
    let rows: string[] = [];
    let chars = 0;
    const insertRows = () => {
      if (rows.length === 0) return;
      this.#sql`INSERT INTO spindle_events (seq, at, body)
        SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(${`[${rows.join(",")}]`})`;
      rows = [];
      chars = 0;
    };
    let superseded: StoredDelta[] = [];
    if (lastSuperseding >= 0) [superseded, this.#storedDeltas] = [this.#storedDeltas, []];
    batch.forEach(({ event, at }, i) => {
      if (event.type === "item.delta" && i < lastSuperseding) return;
      const body = bodies[i] ?? "";
      const row = JSON.stringify([event.seq, at, body]);
      let stored = body;
      if (row.length > TEXT_PART_MAX_CHARS) {
        stored = this.#parts.split(event.seq, body);
        this
          .#sql`INSERT INTO spindle_events (seq, at, body) VALUES (${event.seq}, ${at}, ${stored})`;
      } else {
        if (chars + row.length > TEXT_PART_MAX_CHARS) insertRows();
        rows.push(row);
        chars += row.length + 1;
      }
      const bytes = utf8ByteLength(stored);
      this.#counted(1, bytes);
      if (event.type === "item.delta") this.#storedDeltas.push({ seq: event.seq, bytes });
    });
    insertRows();
    if (superseded.length > 0) {
      const seqs = superseded.map((d) => d.seq);
      this.#sql`DELETE FROM spindle_events
        WHERE seq IN (SELECT value FROM json_each(${JSON.stringify(seqs)}))`;
      this.#dropped(superseded);
      for (const seq of seqs) this.#parts.remove(seq);
    }
    batch.forEach(({ event }, i) => {
      const line = `${bodies[i]}\n`;
      for (const subscriber of this.#subscribers) this.#send(subscriber, event, line);
    });
  }

  /** Adds to the kept row and byte counts (nothing while they were not read yet). */
  #counted(rows: number, bytes: number): void {
    if (this.#stored === undefined) return;
    this.#stored.rows += rows;
    this.#stored.bytes += bytes;
  }

  #window(): { rows: number; bytes: number } {
    if (this.#stored === undefined) {
      const row = this.#sql<{ rows: number; bytes: number | null }>`
        SELECT COUNT(*) AS rows, SUM(length(CAST(body AS BLOB))) AS bytes FROM spindle_events`.one();
      this.#stored = { rows: row.rows, bytes: row.bytes ?? 0 };
    }
    return this.#stored;
  }

  /** Counts out the rows a delete took. */
  #dropped(rows: Dropped[]): void {
    this.#counted(-rows.length, -rows.reduce((sum, r) => sum + r.bytes, 0));
  }

  #cancelTimer(): void {
    if (this.#flushTimer !== undefined) clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
  }

  /**
   * Drops events past the window (count, bytes or age), oldest first; past the byte budget, down
   * to `EVENT_WINDOW_CUT_BYTES`. The newest event always stays: after an eviction it is where the
   * sequence continues, so no number is ever handed out twice.
   */
  prune(): void {
    this.flush();
    const last = this.lastSeq;
    const cutoff = this.#clock.nowMs() - EVENT_RETENTION_MS;
    // Times grow with seq, so the oldest event tells whether any is due: the common case (none)
    // then costs one primary-key lookup instead of a scan of the whole window for `at`.
    const first = this.#sql<{ at: number }>`
      SELECT at FROM spindle_events ORDER BY seq LIMIT 1`.toArray()[0];
    if (first !== undefined && first.at < cutoff) {
      this.#dropped(
        this.#sql<Dropped>`DELETE FROM spindle_events WHERE seq < ${last} AND at < ${cutoff}
          RETURNING length(CAST(body AS BLOB)) AS bytes`.toArray(),
      );
    }
    const window = this.#window();
    if (window.rows > EVENT_WINDOW_EVENTS || window.bytes > EVENT_WINDOW_BYTES) {
      // The newest event that does not fit with the ones after it: it and every older one go.
      // Counted from the newest back, over the window itself.
      const overflow = this.#sql<{ seq: number }>`
        SELECT seq FROM (
          SELECT seq, ROW_NUMBER() OVER newest AS n,
            SUM(length(CAST(body AS BLOB))) OVER newest AS bytes
          FROM spindle_events WINDOW newest AS (ORDER BY seq DESC))
        WHERE n > ${EVENT_WINDOW_EVENTS} OR bytes > ${EVENT_WINDOW_CUT_BYTES} LIMIT 1`.toArray()[0];
      if (overflow !== undefined) {
        this.#dropped(
          this.#sql<Dropped>`DELETE FROM spindle_events
            WHERE seq <= ${overflow.seq} AND seq < ${last}
            RETURNING length(CAST(body AS BLOB)) AS bytes`.toArray(),
        );
      }
    }
    // Events are dropped oldest first (their times grow with seq), so their parts go by seq.
    let oldest: number | undefined;
    this.#parts.removeWhere((seq) => {
      oldest ??= this.oldestKept();
      return Number(seq) < oldest;
    });
  }

  /** When the next prune has something to drop by age (undefined: nothing will expire). */
  nextExpiryMs(): number | undefined {
    this.flush();
    const row = this.#sql<{ at: number | null }>`
      SELECT MIN(at) AS at FROM spindle_events WHERE seq < ${this.lastSeq}`.one();
    return row.at === null ? undefined : row.at + EVENT_RETENTION_MS;
  }

  /** The oldest seq still replayable (lastSeq + 1 when none is kept). */
  oldestKept(): number {
    this.flush();
    const row = this.#sql<{ seq: number | null }>`SELECT MIN(seq) AS seq FROM spindle_events`.one();
    return row.seq ?? this.lastSeq + 1;
  }

  /**
   * NDJSON of the stored events after `after`, then live ones. With `untilTurn`, the stream ends
   * after that turn's terminal event; otherwise it stays open until the reader cancels. Stored
   * events are read a page at a time as the reader pulls (stored text, sent as is); once caught
   * up, the reader follows live events. An event emitted meanwhile is stored first, so the next
   * page has it: nothing is skipped or sent twice.
   */
  subscribe(after: number, untilTurn?: string): ReadableStream<Uint8Array> {
    let cursor = after;
    let live: Subscriber | undefined;
    let end = () => {};
    const ends = (event: ThreadEventRecord) =>
      untilTurn !== undefined && event.turn_id === untilTurn && isTerminalEventType(event.type);
    return new ReadableStream<Uint8Array>({
      start: (controller) => {
        end = () => {
          if (live) this.#subscribers.delete(live);
          this.#enders.delete(end);
          try {
            controller.close();
          } catch {
            // Already closed or cancelled.
          }
        };
        this.#enders.add(end);
      },
      pull: (controller) => {
        if (live) return;
        this.flush();
        const rows = this.#sql<{ seq: number; body: string }>`
          SELECT seq, body FROM spindle_events WHERE seq > ${cursor}
          ORDER BY seq LIMIT ${REPLAY_PAGE_EVENTS}`.toArray();
        for (const row of rows) {
          const body = this.#parts.join(row.seq, row.body);
          controller.enqueue(encoder.encode(`${body}\n`));
          cursor = row.seq;
          if (untilTurn !== undefined && ends(JSON.parse(body) as ThreadEventRecord)) {
            end();
            return;
          }
        }
        if (rows.length === 0) {
          live = { controller, untilTurn, end };
          this.#subscribers.add(live);
        }
      },
      cancel: () => {
        if (live) this.#subscribers.delete(live);
        this.#enders.delete(end);
      },
    });
  }

  /** Sends `line`, the event's NDJSON line (serialized once for every subscriber). */
  #send(subscriber: Subscriber, event: ThreadEventRecord, line: string): void {
    const done =
      subscriber.untilTurn !== undefined &&
      event.turn_id === subscriber.untilTurn &&
      isTerminalEventType(event.type);
    // Never waits for the reader: a slow or vanished one must never hold up the turn.
    try {
      // Bytes of its own for each reader: a chunk may be transferred when the stream is read.
      subscriber.controller.enqueue(encoder.encode(line));
    } catch {
      // The reader went away.
      subscriber.end();
      return;
    }
    if (done) subscriber.end();
  }

  /** Ends every stream, replaying or live (thread deleted); pending events go with the thread. */
  closeAll(): void {
    this.#cancelTimer();
    this.#pending = [];
    this.#storedDeltas = [];
    this.#stored = undefined;
    for (const end of [...this.#enders]) end();
    this.#subscribers.clear();
  }
}
