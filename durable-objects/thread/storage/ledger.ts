import {
  type EntryMark,
  type LedgerEntry,
  type UsageCounts,
  ZERO_THREAD_USAGE,
} from "../../../shared/api/index.ts";
import {
  addTokenUsage,
  type RolloutItem,
  type RolloutLine,
  requestUsage,
  type TokenUsage,
  ZERO_TOKEN_USAGE,
} from "../../../shared/protocol/index.ts";
import { SyncValues } from "../tenancy/sync-values.ts";
import type { Sql } from "./sql.ts";

/** The thread's totals, for the thread of this object that `incarnation` names. */
interface LedgerState {
  incarnation: string;
  /** The turn of the newest entry: the next one of another turn counts that turn. */
  last_turn: string | null;
  /** That turn's usage so far: its row takes it, so a turn cut short keeps what it used. */
  last_turn_usage: TokenUsage | null;
  totals: UsageCounts;
}

const STATE_KEY = "ledger";

/** One provider request as its `token_count` line tells it. */
interface RequestUsage {
  turn: string;
  usage: TokenUsage;
}

/**
 * Reads provider requests off rollout lines, in order: a `token_count` line with usage is one
 * request, whose usage is how far the line's running total moved since the previous one (see
 * `requestUsage`), of the task the newest `task_started` line began. The live thread and a
 * restore read lines the same way, so they count the same.
 */
class RequestReader {
  #total: TokenUsage | undefined;
  #task: string | undefined;

  constructor(total: TokenUsage | undefined, task: string | undefined) {
    this.#total = total;
    this.#task = task;
  }

  read(item: RolloutItem): RequestUsage | undefined {
    if (item.type !== "event_msg") return undefined;
    const event = item.payload;
    if (event.type === "task_started") this.#task = event.turn_id;
    if (event.type !== "token_count" || event.info === null) return undefined;
    const usage = requestUsage(this.#total, event.info);
    this.#total = event.info.total_token_usage;
    return { turn: this.#task ?? "unknown", usage };
  }
}

/**
 * The thread's side of the usage ledger (design §11). Every provider request that reports usage
 * ends in a `token_count` line; in the same synchronous step as that line, `observe` writes one
 * entry (id: the thread's creation time and the line's seq), which stays until the tenant's
 * object has acknowledged it (the entries are the outbox), and adds it to the thread's totals.
 * Nothing else writes entries: a request that failed or was interrupted wrote no `token_count`
 * line and used nothing the thread can know of, and lines copied by a fork or an import never pass
 * through here, so nothing is counted twice.
 */
export class ThreadLedger {
  readonly #sql: Sql;
  readonly #values: SyncValues;
  readonly #incarnation: string;
  readonly #reader: RequestReader;
  /** The model of the request under way: the engine asks for a client for each task's model. */
  requestModel: string | undefined;

  constructor(
    sql: Sql,
    /** The thread's `created_at`: entries of a thread created again later are told apart. */
    incarnation: string,
    /** The running total as the thread was loaded (the newest `token_count` line's). */
    total: TokenUsage | undefined,
    /** The task a turn resumed after a reload is (its `task_started` came before the reload). */
    resumedTask: string | undefined,
  ) {
    this.#sql = sql;
    this.#values = new SyncValues(sql);
    this.#incarnation = incarnation;
    this.#reader = new RequestReader(total, resumedTask);
  }

  #state(): LedgerState {
    const state = this.#values.get<LedgerState>(STATE_KEY);
    return state?.incarnation === this.#incarnation ? state : emptyState(this.#incarnation);
  }

  /** The thread's totals. */
  totals(): UsageCounts {
    return this.#state().totals;
  }

  /**
   * Called with every line the engine writes, right after it is written as `seq`; answers the
   * usage of the request a `token_count` line with usage counts.
   */
  observe(item: RolloutItem, seq: number, timestamp: string): TokenUsage | undefined {
    const request = this.#reader.read(item);
    if (request === undefined) return undefined;
    const { turn, usage } = request;
    const state = this.#state();
    const entry: LedgerEntry = {
      incarnation: this.#incarnation,
      seq,
      turn_id: turn,
      model: this.requestModel ?? "unknown",
      day: timestamp.slice(0, 10),
      first_of_turn: turn !== state.last_turn,
      input_tokens: usage.input_tokens,
      cached_input_tokens: usage.cached_input_tokens,
      output_tokens: usage.output_tokens,
      reasoning_tokens: usage.reasoning_output_tokens,
    };
    this.#sql`INSERT INTO spindle_usage (incarnation, seq, body)
      VALUES (${entry.incarnation}, ${seq}, ${JSON.stringify(entry)})`;
    this.#values.put(STATE_KEY, next(state, request));
    return usage;
  }

  /**
   * What the turn's requests used, as the ledger counted them, while it is the newest turn with
   * an entry (a running or just ended one); undefined for another.
   */
  turnUsage(turnId: string): TokenUsage | undefined {
    const state = this.#state();
    return state.last_turn === turnId ? (state.last_turn_usage ?? undefined) : undefined;
  }

  /**
   * The totals of a thread rebuilt from its rollout (a restore): its own requests, the lines
   * after `copiedThrough` (a fork's or an import's copied lines are not its own), read as they
   * were read live.
   */
  static rebuild(
    sql: Sql,
    incarnation: string,
    lines: readonly { seq: number; line: RolloutLine }[],
    copiedThrough: number,
  ): void {
    const reader = new RequestReader(undefined, undefined);
    let state = emptyState(incarnation);
    for (const { seq, line } of lines) {
      const request = reader.read(line as RolloutItem);
      if (request !== undefined && seq > copiedThrough) state = next(state, request);
    }
    new SyncValues(sql).put(STATE_KEY, state);
  }
}

/**
 * The creation time of a thread created in this object now: later than that of any thread
 * deleted here before, so the two threads' ledger entries are told apart (`incarnation`).
 */
export function creationTime(sql: Sql, nowMs: number): string {
  const after = new SyncValues(sql).get<string>("created_after");
  const floor = after === undefined ? Number.NEGATIVE_INFINITY : Date.parse(after) + 1;
  return new Date(Math.max(nowMs, floor)).toISOString();
}

function emptyState(incarnation: string): LedgerState {
  return { incarnation, last_turn: null, last_turn_usage: null, totals: { ...ZERO_THREAD_USAGE } };
}

/** The state after one more request. */
function next(state: LedgerState, { turn, usage }: RequestUsage): LedgerState {
  const first = turn !== state.last_turn;
  return {
    incarnation: state.incarnation,
    last_turn: turn,
    last_turn_usage: addTurnUsage(first ? null : state.last_turn_usage, usage),
    totals: addToTotals(state.totals, usage, first),
  };
}

/** A turn's usage so far plus its newest request's. */
export function addTurnUsage(
  sum: TokenUsage | null,
  request: TokenUsage | undefined,
): TokenUsage | null {
  if (request === undefined) return sum;
  return addTokenUsage(sum ?? ZERO_TOKEN_USAGE, request);
}

function addToTotals(totals: UsageCounts, usage: TokenUsage, firstOfTurn: boolean): UsageCounts {
  return {
    input_tokens: totals.input_tokens + usage.input_tokens,
    cached_input_tokens: totals.cached_input_tokens + usage.cached_input_tokens,
    output_tokens: totals.output_tokens + usage.output_tokens,
    reasoning_tokens: totals.reasoning_tokens + usage.reasoning_output_tokens,
    requests: totals.requests + 1,
    turns: totals.turns + (firstOfTurn ? 1 : 0),
  };
}

/** The entries not acknowledged yet, oldest first (by thread, then line), at most `limit`. */
export function pendingEntries(sql: Sql, limit: number): LedgerEntry[] {
  return sql<{ body: string }>`SELECT body FROM spindle_usage ORDER BY incarnation, seq
    LIMIT ${limit}`
    .toArray()
    .map((row) => JSON.parse(row.body) as LedgerEntry);
}

/** Drops the entries the tenant's object has taken: everything up to `through`. */
export function dropEntries(sql: Sql, through: EntryMark | null): void {
  if (through === null) return;
  sql`DELETE FROM spindle_usage WHERE incarnation < ${through.incarnation}
    OR (incarnation = ${through.incarnation} AND seq <= ${through.seq})`;
}
