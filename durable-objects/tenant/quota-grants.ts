import type {
  GrantQuotaRequest,
  LedgerEntry,
  QuotaGrant,
  ReleaseQuotaRequest,
  RpcResult,
  YieldedQuota,
} from "../../shared/api/index.ts";
import type { Clock } from "../../shared/ports/index.ts";
import { secondsToNextUtcDay } from "../common/clock.ts";
import { failQuota, ok } from "../common/results.ts";
import type { Sql } from "../common/sql.ts";
import { tokenShare } from "./token-shares.ts";

/** How long an admission lets a thread start tasks without asking again. */
export const QUOTA_LEASE_MS = 30_000;
/** Holders asked at once when the tenant wants slots or shares back. */
export const RECLAIM_PARALLEL = 16;
/**
 * `Retry-After` of a refusal while the tokens left are reserved by tasks running in other
 * threads: their reservations are settled as they end.
 */
export const RESERVED_RETRY_AFTER_S = 5;

/** Why an admission is refused now, and whether asking holders could change that. */
interface Blocked {
  reclaim?: "shares" | "slots";
  refusal: () => RpcResult<never>;
}

/** What a thread holds: a running slot (counted under `max_running_turns`) and maybe a share. */
interface Hold {
  grant: number;
  /**
   * Tokens still reserved for the thread: its share, less what the ledger has taken of its usage
   * since; null: none (no `tokens_per_day`).
   */
  share: number | null;
}

/** A holder's answer when asked to give its admission back; undefined: the call failed. */
export type YieldAnswer = YieldedQuota | undefined;

export interface QuotaGrantsDeps {
  sql: Sql;
  clock: Clock;
  /** Asks `threadId` to give back `grant` (and anything older). */
  yieldOf: (threadId: string, grant: number) => Promise<YieldAnswer>;
  /** Takes a thread's ledger entries into the ledger (whose counting calls `settle`). */
  take: (threadId: string, usage: readonly LedgerEntry[]) => void;
}

/**
 * The tenant's admissions under `max_running_turns` and `tokens_per_day` (design §11, §15
 * invariant 13), as leases, so a busy thread asks once per lease rather than once per task:
 * - a slot: every thread holding an admission counts as running until it releases it (its lease
 *   ended with no task running) or gives it back when asked. A tenant at `max_running_turns`
 *   asks the other holders to give back slots they do not use before it refuses, so an idle
 *   holder never costs another thread its turn;
 * - a share: under `tokens_per_day`, an admission reserves at least what the task may spend
 *   (`GrantQuotaRequest.tokens`), by the rule of `tenant/token-shares.ts`; the thread starts its next
 *   tasks on what is left of it without asking. The ledger's counting of the thread's usage
 *   settles the share (`settle`: what is counted is no longer reserved), and a hold ends only in
 *   a step that also takes the thread's uncounted entries (a release, an answer, a refusal), so
 *   every token a thread spends is reserved or counted, never neither. When other threads' shares
 *   keep a task out, those threads are asked to give back what they do not need (all of it when
 *   idle; a running task keeps what it may still spend) before a refusal.
 * Holds are rows (written once per admission, and when a share is settled), so a new instance of
 * the object knows every lease still out.
 */
export class QuotaGrants {
  readonly #deps: QuotaGrantsDeps;
  #holds: Map<string, Hold> | undefined;
  #lastGrant = 0;

  constructor(deps: QuotaGrantsDeps) {
    this.#deps = deps;
  }

  /**
   * Admits `req` when its quotas allow (`used` counts the day's tokens, read after the request's
   * entries are taken). A quota blocked only by what other threads hold is asked back from them,
   * once per kind; after every call both quotas are checked again, since pushes and other
   * admissions land meanwhile, and the last check and the grant are one synchronous step.
   */
  async admit(req: GrantQuotaRequest, used: () => number): Promise<RpcResult<QuotaGrant>> {
    this.#deps.take(req.threadId, req.usage);
    const asked = new Set<Blocked["reclaim"]>();
    for (;;) {
      const checked = this.#check(req, used());
      if (!("refusal" in checked)) return ok(this.#grant(req, checked.share));
      const kind = checked.reclaim;
      if (kind === undefined || asked.has(kind)) return this.#refuse(req, checked.refusal());
      asked.add(kind);
      await this.#reclaim(
        req.threadId,
        kind === "shares" ? (hold) => (hold.share ?? 0) > 0 : () => true,
        () => {
          const now = this.#check(req, used());
          return !("refusal" in now) || now.reclaim !== kind;
        },
      );
    }
  }

  /**
   * What refuses `req` now, if anything: the day's tokens used (final), or the rest of them
   * reserved by other threads' shares, or every slot held by other threads (both of which the
   * holders may give back); else the share it gets.
   */
  #check(req: GrantQuotaRequest, used: number): Blocked | { share: number | null } {
    const { tokens_per_day: limit, max_running_turns: max } = req.quotas;
    let share: number | null = null;
    if (limit !== null) {
      const answer = tokenShare(limit, used, this.#reserved(req.threadId), req.tokens);
      if ("refused" in answer) {
        const now = this.#deps.clock.nowMs();
        if (answer.refused === "used") {
          return {
            refusal: () =>
              failQuota(
                "tokens_per_day",
                `The tenant used ${used} of its ${limit} tokens today (UTC).`,
                secondsToNextUtcDay(now),
              ),
          };
        }
        return {
          reclaim: "shares",
          refusal: () =>
            failQuota(
              "tokens_per_day",
              `The task may use ${req.tokens} tokens; the tenant's tokens left today are reserved by tasks running in other threads.`,
              Math.min(RESERVED_RETRY_AFTER_S, secondsToNextUtcDay(now)),
            ),
        };
      }
      share = answer.share;
    }
    const count = this.#othersHolding(req.threadId);
    if (max !== null && count >= max) {
      return {
        reclaim: "slots",
        refusal: () =>
          failQuota(
            "max_running_turns",
            `${count} turns of the tenant are running, its max_running_turns.`,
          ),
      };
    }
    return { share };
  }

  /** The hold `req` gets, with `share`. */
  #grant(req: GrantQuotaRequest, share: number | null): QuotaGrant {
    const hold: Hold = { grant: this.#nextGrant(), share };
    this.#load().set(req.threadId, hold);
    this.#deps.sql`INSERT INTO tenant_admissions (thread_id, grant_id, share, granted_at)
      VALUES (${req.threadId}, ${hold.grant}, ${share}, ${this.#deps.clock.nowMs()})
      ON CONFLICT (thread_id) DO UPDATE SET grant_id = excluded.grant_id, share = excluded.share,
        granted_at = excluded.granted_at`;
    return { grant: hold.grant, leaseMs: QUOTA_LEASE_MS, tokens: share };
  }

  /**
   * The ledger counted `tokens` of the thread's usage: no longer reserved by its share (they
   * were spent on it, since a hold's entries from before it were taken when it was granted).
   */
  settle(threadId: string, tokens: number): void {
    const hold = this.#load().get(threadId);
    if (hold === undefined || hold.share === null || hold.share === 0 || tokens <= 0) return;
    hold.share = Math.max(0, hold.share - tokens);
    this.#deps
      .sql`UPDATE tenant_admissions SET share = ${hold.share} WHERE thread_id = ${threadId}`;
  }

  /** `threadId` no longer holds `grant` nor anything older; its entries are taken first. */
  release(req: ReleaseQuotaRequest): void {
    this.#deps.take(req.threadId, req.usage);
    const hold = this.#load().get(req.threadId);
    if (hold && hold.grant <= req.grant) this.forget(req.threadId);
  }

  /** The thread is gone (deleted, or its tenant is): it holds nothing. */
  forget(threadId: string): void {
    this.#load().delete(threadId);
    this.#deps.sql`DELETE FROM tenant_admissions WHERE thread_id = ${threadId}`;
  }

  /** A refused thread is not starting a task: the hold it asked with goes. */
  #refuse(req: GrantQuotaRequest, refusal: RpcResult<never>): RpcResult<never> {
    const hold = this.#load().get(req.threadId);
    if (hold && hold.grant <= req.held) this.forget(req.threadId);
    return refusal;
  }

  /** Tokens reserved by the shares of threads other than `threadId`. */
  #reserved(threadId: string): number {
    let sum = 0;
    for (const [holder, hold] of this.#load()) {
      if (holder !== threadId) sum += hold.share ?? 0;
    }
    return sum;
  }

  #othersHolding(threadId: string): number {
    const holds = this.#load();
    return holds.size - (holds.has(threadId) ? 1 : 0);
  }

  /**
   * Asks holders other than `threadId` that `wanted` selects, oldest grant first, a batch at a
   * time, to give back what they hold, until `enough` says there is room.
   */
  async #reclaim(
    threadId: string,
    wanted: (hold: Hold) => boolean,
    enough: () => boolean,
  ): Promise<void> {
    const asked = [...this.#load()]
      .filter(([holder, hold]) => holder !== threadId && wanted(hold))
      .sort(([, a], [, b]) => a.grant - b.grant);
    for (let i = 0; i < asked.length && !enough(); i += RECLAIM_PARALLEL) {
      const answers = await Promise.all(
        asked.slice(i, i + RECLAIM_PARALLEL).map(async ([holder, hold]) => {
          const answer = await this.#deps.yieldOf(holder, hold.grant);
          return { holder, grant: hold.grant, answer };
        }),
      );
      for (const { holder, grant, answer } of answers) {
        if (answer === undefined) continue;
        // Usage all the same, whichever hold it was spent under.
        this.#deps.take(holder, answer.usage);
        const now = this.#load().get(holder);
        // A hold granted while the question was out is newer than the answer.
        if (now === undefined || now.grant > grant) continue;
        if (answer.released) {
          this.forget(holder);
        } else if (now.share !== null && now.share > answer.reserved) {
          now.share = answer.reserved;
          this.#deps
            .sql`UPDATE tenant_admissions SET share = ${now.share} WHERE thread_id = ${holder}`;
        }
      }
    }
  }

  #nextGrant(): number {
    this.#lastGrant = Math.max(this.#lastGrant + 1, this.#deps.clock.nowMs());
    return this.#lastGrant;
  }

  #load(): Map<string, Hold> {
    if (this.#holds === undefined) {
      const rows = this.#deps.sql<{
        thread_id: string;
        grant_id: number;
        share: number | null;
      }>`SELECT thread_id, grant_id, share FROM tenant_admissions`.toArray();
      this.#holds = new Map(
        rows.map((row) => [row.thread_id, { grant: row.grant_id, share: row.share }]),
      );
      this.#lastGrant = Math.max(0, ...rows.map((row) => row.grant_id));
    }
    return this.#holds;
  }
}
