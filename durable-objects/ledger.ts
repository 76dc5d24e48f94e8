import { type LedgerEntry, type ThreadUsage, ZERO_THREAD_USAGE } from "../shared/api/index.ts";
import {
  addTokenUsage,
  type RolloutItem,
  requestUsage,
  type TokenUsage,
  ZERO_TOKEN_USAGE,
} from "../shared/protocol/index.ts";
import type { Sql } from "./sql.ts";
import { SyncValues } from "./sync-values.ts";

/** What the object keeps about its ledger: ids go on across a delete, totals are the thread's. */
interface LedgerState {
  /** The id of the next entry: never reused, so the tenant's watermark only moves forward. */
  next_id: number;
  /** The turn of the newest entry: the next one of another turn counts that turn. */
  last_turn: string | null;
  totals: ThreadUsage;
}

const STATE_KEY = "ledger";

/**
 * The thread's side of the usage ledger (design §11). Every provider request that reports usage
 * ends in a `token_count` line; in the same synchronous step as that line, `observe` derives the
 * request's usage from it (how far the line's running total moved since the previous one) and
 * writes one entry, which stays until the tenant's object has acknowledged it (the entries are
 * the outbox), and adds it to the thread's totals. Nothing else writes entries: a request that
 * failed or was interrupted wrote no `token_count` line and used nothing the thread can know of,
 * and lines copied by a fork or an import never pass through here, so nothing is counted twice.
 */
export class ThreadLedger {
  readonly #sql: Sql;
  readonly #values: SyncValues;
  /** The running total of the newest `token_count` line (the baseline of the next request). */
  #total: TokenUsage | undefined;
  /** The task whose requests are counted now, from its `task_started` line. */
  #task: string | undefined;
  /** The task of a turn resumed after a reload (its `task_started` line came before the reload). */
  readonly #resumedTask: () => string | undefined;
  /** The model of the request under way: the engine asks for a client for each task's model. */
  requestModel: string | undefined;
  /** The usage of the newest entry, until the turn's row takes it. */
  #lastUsage: TokenUsage | undefined;

  constructor(
    sql: Sql,
    /** The running total as the thread was loaded (the newest `token_count` line's). */
    total: TokenUsage | undefined,
    resumedTask: () => string | undefined,
  ) {
    this.#sql = sql;
    this.#values = new SyncValues(sql);
    this.#total = total;
    this.#resumedTask = resumedTask;
  }

  #state(): LedgerState {
    return (
      this.#values.get<LedgerState>(STATE_KEY) ?? {
        next_id: 1,
        last_turn: null,
        totals: { ...ZERO_THREAD_USAGE },
      }
    );
  }

  /** The thread's totals. */
  totals(): ThreadUsage {
    return this.#state().totals;
  }

  /** Called with every line the engine writes, right after it is written. */
  observe(item: RolloutItem, timestamp: string): void {
    if (item.type !== "event_msg") return;
    const event = item.payload;
    if (event.type === "task_started") {
      this.#task = event.turn_id;
      return;
    }
    if (event.type !== "token_count" || event.info === null) return;
    const usage = requestUsage(this.#total, event.info);
    this.#total = event.info.total_token_usage;
    this.#lastUsage = usage;
    const state = this.#state();
    const turn = this.#task ?? this.#resumedTask() ?? "unknown";
    const entry: LedgerEntry = {
      id: state.next_id,
      turn_id: turn,
      model: this.requestModel ?? "unknown",
      day: timestamp.slice(0, 10),
      first_of_turn: turn !== state.last_turn,
      input_tokens: usage.input_tokens,
      cached_input_tokens: usage.cached_input_tokens,
      output_tokens: usage.output_tokens,
      reasoning_tokens: usage.reasoning_output_tokens,
    };
    this.#sql`INSERT INTO spindle_usage (id, body) VALUES (${entry.id}, ${JSON.stringify(entry)})`;
    this.#values.put(STATE_KEY, {
      next_id: entry.id + 1,
      last_turn: turn,
      totals: addToTotals(state.totals, entry),
    } satisfies LedgerState);
  }

  /** The usage of the request whose entry was written last, once (a turn's row adds it up). */
  takeLastUsage(): TokenUsage | undefined {
    const usage = this.#lastUsage;
    this.#lastUsage = undefined;
    return usage;
  }

  /**
   * Starts the totals of a new thread in this object (a create, a fork, an import), keeping the
   * entry ids going and the entries not yet acknowledged.
   */
  static startThread(sql: Sql): void {
    const values = new SyncValues(sql);
    const state = values.get<LedgerState>(STATE_KEY);
    if (state === undefined) return;
    values.put(STATE_KEY, {
      next_id: state.next_id,
      last_turn: null,
      totals: { ...ZERO_THREAD_USAGE },
    } satisfies LedgerState);
  }
}

/** A turn's usage so far plus its newest request's. */
export function addTurnUsage(
  sum: TokenUsage | null,
  request: TokenUsage | undefined,
): TokenUsage | null {
  if (request === undefined) return sum;
  return addTokenUsage(sum ?? ZERO_TOKEN_USAGE, request);
}

function addToTotals(totals: ThreadUsage, entry: LedgerEntry): ThreadUsage {
  return {
    input_tokens: totals.input_tokens + entry.input_tokens,
    cached_input_tokens: totals.cached_input_tokens + entry.cached_input_tokens,
    output_tokens: totals.output_tokens + entry.output_tokens,
    reasoning_tokens: totals.reasoning_tokens + entry.reasoning_tokens,
    requests: totals.requests + 1,
    turns: totals.turns + (entry.first_of_turn ? 1 : 0),
  };
}

/** The entries not acknowledged yet, oldest first, at most `limit`. */
export function pendingEntries(sql: Sql, limit: number): LedgerEntry[] {
  return sql<{ body: string }>`SELECT body FROM spindle_usage ORDER BY id LIMIT ${limit}`
    .toArray()
    .map((row) => JSON.parse(row.body) as LedgerEntry);
}

/** Drops the entries the tenant's object has taken. */
export function dropEntries(sql: Sql, through: number): void {
  sql`DELETE FROM spindle_usage WHERE id <= ${through}`;
}
