import type { Quotas, RpcResult, YieldedQuota } from "../../../shared/api/index.ts";
import { failQuota, ok } from "../../common/results.ts";
import type { Sql } from "../storage/sql.ts";
import type { TenantSync } from "../tenancy/tenant-sync.ts";
import { QuotaLease, type QuotaLeaseDeps } from "./quota-lease.ts";

/**
 * The tenant's quotas as a thread applies them (design §11, §15 invariant 13), before anything
 * is recorded or the provider called, and never to a task already running:
 * - `max_thread_bytes`, checked here without a call: a thread whose rollout holds that many bytes
 *   takes no new input (turns, queued or steered ones, injects); outputs still finish a paused
 *   turn;
 * - `tokens_per_day` and `max_running_turns`, checked by the tenant's object when a task starts
 *   (a turn, a queued turn, a resumed one, a compaction) and the thread holds no lease that
 *   covers it (`thread/quotas/quota-lease.ts`): one call per lease, made only when one of them is set, so a
 *   tenant without them costs its turns nothing here. Under `tokens_per_day` a task reserves
 *   what it may spend (`ThreadSession.reservation`), and steered input, which makes the running
 *   turn sample once more, reserves that request too before it joins.
 * `max_threads` is checked by the tenant's object when a thread is created (`TenantSync.reserve`).
 */
export class QuotaGate {
  readonly #sync: TenantSync;
  readonly #sql: Sql;
  readonly #lease: QuotaLease;

  constructor(sync: TenantSync, sql: Sql, lease: Omit<QuotaLeaseDeps, "release">) {
    this.#sync = sync;
    this.#sql = sql;
    this.#lease = new QuotaLease({
      ...lease,
      release: (grant) => sync.releaseQuota(grant),
    });
  }

  /** `quota_exceeded` (`max_thread_bytes`) when the thread may take no more input. */
  inputRefused(): RpcResult<never> | undefined {
    const max = this.#sync.quotas.max_thread_bytes;
    if (max === null) return undefined;
    const bytes = rolloutBytes(this.#sql);
    if (bytes < max) return undefined;
    return failQuota(
      "max_thread_bytes",
      `The thread's rollout holds ${bytes} bytes, its tenant's max_thread_bytes is ${max}.`,
    );
  }

  /**
   * The tenant's answer on starting a task that may spend `reservation()` tokens, or undefined
   * (synchronously, without a call) when the tenant sets neither quota a task start needs, or the
   * thread's lease covers the task. The reservation is read only under `tokens_per_day`.
   */
  taskStart(reservation: () => number): Promise<RpcResult<void>> | undefined {
    const quotas = this.#sync.quotas;
    if (quotas.tokens_per_day === null && quotas.max_running_turns === null) return undefined;
    const tokens = quotas.tokens_per_day === null ? 0 : reservation();
    if (this.#lease.covers(quotas, tokens)) return undefined;
    return this.#ask(quotas, this.#lease.held, tokens);
  }

  /** A task started that may spend `reservation()` tokens (read only under `tokens_per_day`). */
  taskStarted(reservation: () => number): void {
    if (this.#sync.quotas.tokens_per_day !== null) this.#lease.taskStarted(reservation());
  }

  /**
   * The tenant's answer on steered input that makes the running turn sample once more, spending
   * up to `reservation()` tokens more, or undefined (no call) without `tokens_per_day` or when the
   * lease covers it. A refusal drops no hold: the running task keeps its own.
   */
  steerStart(reservation: () => number): Promise<RpcResult<void>> | undefined {
    const quotas = this.#sync.quotas;
    if (quotas.tokens_per_day === null) return undefined;
    const more = reservation();
    const tokens = this.#lease.taskReserved + more;
    if (this.#lease.covers(quotas, tokens)) {
      this.#lease.taskExtended(more);
      return undefined;
    }
    return this.#ask(quotas, 0, tokens)?.then((answer) => {
      if (answer.ok) this.#lease.taskExtended(more);
      return answer;
    });
  }

  /** Asks the tenant to admit work reserving `tokens`, holding `held`; the lease takes the answer. */
  #ask(quotas: Quotas, held: number, tokens: number): Promise<RpcResult<void>> | undefined {
    const asked = this.#sync.grantQuota(quotas, held, tokens);
    if (asked === undefined) return undefined;
    const at = this.#lease.asking(tokens);
    return asked.then(
      (answer) => {
        if (!answer.ok) {
          this.#lease.refused(held);
          return answer;
        }
        this.#lease.granted(answer.value, quotas, at);
        return ok(undefined);
      },
      (err: unknown) => {
        this.#lease.refused(held);
        throw err;
      },
    );
  }

  /** A task ended: its slot waits for the next task while the lease lasts. */
  taskEnded(): void {
    this.#lease.taskEnded();
  }

  /** The thread is deleted: its lease goes with it, unreleased (its tombstone ends the hold). */
  reset(): void {
    this.#lease.reset();
  }

  /**
   * The tenant wants the admission back (`ThreadRpc.yieldQuota`): the answer carries the
   * thread's pending ledger entries, which the tenant takes in the step that changes the hold.
   */
  yieldQuota(grant: number): YieldedQuota {
    return { ...this.#lease.yield(grant), usage: this.#sync.pendingUsage() };
  }
}

/** The bytes of the thread's rollout as JSONL: its R2 segments plus the lines not in one yet. */
export function rolloutBytes(sql: Sql): number {
  const flushed = sql<{ bytes: number; through: number }>`
    SELECT COALESCE(SUM(bytes), 0) AS bytes, COALESCE(MAX(last_seq), 0) AS through
    FROM spindle_segments WHERE state = 'done'`.one();
  const tail = sql<{ bytes: number }>`
    SELECT COALESCE(SUM(length(CAST(line AS BLOB))), 0) + COUNT(DISTINCT seq) AS bytes
    FROM spindle_rollout WHERE seq > ${flushed.through}`.one();
  return flushed.bytes + tail.bytes;
}
