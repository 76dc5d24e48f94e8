import type {
  AdmissionGrant,
  AdmitTaskRequest,
  ReleaseAdmissionRequest,
  RpcResult,
} from "../shared/api/index.ts";
import type { Clock } from "../shared/ports/index.ts";
import { failQuota, ok } from "./results.ts";
import type { Sql } from "./sql.ts";
import { secondsToNextUtcDay } from "./usage-rollup.ts";

/** How long an admission lets a thread start tasks without asking again. */
export const ADMISSION_LEASE_MS = 30_000;
/**
 * How long the tenant keeps a share reserved past the lease's length: the thread counts its
 * lease from before it asked, so this only absorbs clock skew between objects.
 */
export const SHARE_SKEW_MS = 2_000;
/** A share is this part of the day's tokens neither used nor reserved by other threads' shares. */
const TOKEN_SHARE_PARTS = 4;
/** Holders asked at once when the tenant wants slots or shares back. */
export const RECLAIM_PARALLEL = 16;

/** Why an admission is refused now, and whether asking holders could change that. */
interface Blocked {
  reclaim?: "shares" | "slots";
  refusal: () => RpcResult<never>;
}

/** What a thread holds: a running slot (counted under `max_running_turns`) and maybe a share. */
interface Hold {
  grant: number;
  /** Tokens reserved for the thread's lease; null: none (no `tokens_per_day`, or given back). */
  share: number | null;
  grantedAt: number;
}

/**
 * How a holder answered a request to give its admission back: released (it runs nothing), kept
 * (it runs a task: it dropped its lease and share, and releases the slot when the task ends), or
 * unknown (the call failed: nothing changes).
 */
export type YieldAnswer = "released" | "kept" | "unknown";

export interface AdmissionsDeps {
  sql: Sql;
  clock: Clock;
  /** Asks `threadId` to give back `grant` (and anything older). */
  yieldOf: (threadId: string, grant: number) => Promise<YieldAnswer>;
}

/**
 * The tenant's admissions under `max_running_turns` and `tokens_per_day` (design §11, §15
 * invariant 13), as leases, so a busy thread asks once per lease rather than once per task:
 * - a slot: every thread holding an admission counts as running until it releases it (its lease
 *   ended with no task running) or gives it back when asked. A tenant at `max_running_turns`
 *   asks the other holders to give back slots they do not use before it refuses, so an idle
 *   holder never costs another thread its turn;
 * - a share: under `tokens_per_day`, an admission reserves a part of the day's tokens that are
 *   neither used nor reserved already, which the thread spends without asking. A thread is
 *   refused when the day's tokens are used; when they are not, but other threads' shares cover
 *   the rest, those threads are asked to give their shares back first.
 * So a task starts only while the tokens used and reserved are below the limit, and only while
 * fewer than `max_running_turns` other threads hold a slot. Holds are rows (written once per
 * admission, not per task), so a new instance of the object knows every lease still out.
 */
export class TenantAdmissions {
  readonly #deps: AdmissionsDeps;
  #holds: Map<string, Hold> | undefined;
  #lastGrant = 0;

  constructor(deps: AdmissionsDeps) {
    this.#deps = deps;
  }

  /**
   * Admits `req` when its quotas allow (`used` counts the day's tokens, the request's pending
   * entries included). A quota blocked only by what other threads hold is asked back from them,
   * once per kind; after every call both quotas are checked again, since pushes and other
   * admissions land meanwhile, and the last check and the grant are one synchronous step.
   */
  async admit(req: AdmitTaskRequest, used: () => number): Promise<RpcResult<AdmissionGrant>> {
    const asked = new Set<Blocked["reclaim"]>();
    for (;;) {
      const tokens = used();
      const blocked = this.#blocked(req, tokens);
      if (blocked === undefined) return ok(this.#grant(req, tokens));
      const kind = blocked.reclaim;
      if (kind === undefined || asked.has(kind)) return this.#refuse(req, blocked.refusal());
      asked.add(kind);
      await this.#reclaim(
        req.threadId,
        kind === "shares" ? (hold) => this.#fresh(hold) : () => true,
        () => this.#blocked(req, used())?.reclaim !== kind,
      );
    }
  }

  /**
   * What refuses `req` now, if anything: the day's tokens used (final), or the rest of them
   * reserved by other threads' shares, or every slot held by other threads (both of which the
   * holders may give back).
   */
  #blocked(req: AdmitTaskRequest, used: number): Blocked | undefined {
    const { tokens_per_day: limit, max_running_turns: max } = req.quotas;
    if (limit !== null) {
      if (used >= limit) {
        const now = this.#deps.clock.nowMs();
        return {
          refusal: () =>
            failQuota(
              "tokens_per_day",
              `The tenant used ${used} of its ${limit} tokens today (UTC).`,
              secondsToNextUtcDay(now),
            ),
        };
      }
      if (used + this.#reserved(req.threadId) >= limit) {
        return { reclaim: "shares", refusal: () => this.#sharesRefusal(req) };
      }
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
    return undefined;
  }

  /** The hold `req` gets, its share sized from the tokens `used`. */
  #grant(req: AdmitTaskRequest, used: number): AdmissionGrant {
    const limit = req.quotas.tokens_per_day;
    const share =
      limit === null
        ? null
        : Math.max(
            0,
            Math.floor((limit - used - this.#reserved(req.threadId)) / TOKEN_SHARE_PARTS),
          );
    const hold: Hold = { grant: this.#nextGrant(), share, grantedAt: this.#deps.clock.nowMs() };
    this.#load().set(req.threadId, hold);
    this.#deps.sql`INSERT INTO tenant_admissions (thread_id, grant_id, share, granted_at)
      VALUES (${req.threadId}, ${hold.grant}, ${share}, ${hold.grantedAt})
      ON CONFLICT (thread_id) DO UPDATE SET grant_id = excluded.grant_id, share = excluded.share,
        granted_at = excluded.granted_at`;
    return { grant: hold.grant, leaseMs: ADMISSION_LEASE_MS, tokens: share };
  }

  /** `threadId` no longer holds `grant` nor anything older. */
  release(req: ReleaseAdmissionRequest): void {
    const hold = this.#load().get(req.threadId);
    if (hold && hold.grant <= req.grant) this.forget(req.threadId);
  }

  /** The thread is gone (deleted, or its tenant is): it holds nothing. */
  forget(threadId: string): void {
    this.#load().delete(threadId);
    this.#deps.sql`DELETE FROM tenant_admissions WHERE thread_id = ${threadId}`;
  }

  /** Shares still out after asking for them: retry once the oldest of them lapses. */
  #sharesRefusal(req: AdmitTaskRequest): RpcResult<never> {
    const now = this.#deps.clock.nowMs();
    const lapses = [...this.#load()]
      .filter(([threadId, hold]) => threadId !== req.threadId && this.#fresh(hold))
      .map(([, hold]) => hold.grantedAt + ADMISSION_LEASE_MS + SHARE_SKEW_MS - now);
    const wait = Math.max(1, Math.ceil(Math.min(...lapses) / 1000));
    return failQuota(
      "tokens_per_day",
      "The tenant's tokens left today are reserved by turns of other threads.",
      wait,
    );
  }

  /** A refused thread is not starting a task: the hold it asked with goes. */
  #refuse(req: AdmitTaskRequest, refusal: RpcResult<never>): RpcResult<never> {
    const hold = this.#load().get(req.threadId);
    if (hold && hold.grant <= req.held) this.forget(req.threadId);
    return refusal;
  }

  #fresh(hold: Hold): boolean {
    return (
      hold.share !== null &&
      hold.grantedAt + ADMISSION_LEASE_MS + SHARE_SKEW_MS > this.#deps.clock.nowMs()
    );
  }

  /** Tokens reserved by the shares of threads other than `threadId`. */
  #reserved(threadId: string): number {
    let sum = 0;
    for (const [holder, hold] of this.#load()) {
      if (holder !== threadId && this.#fresh(hold)) sum += hold.share ?? 0;
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
        const now = this.#load().get(holder);
        // A hold granted while the question was out is newer than the answer.
        if (now === undefined || now.grant > grant || answer === "unknown") continue;
        if (answer === "released") {
          this.forget(holder);
        } else if (now.share !== null) {
          now.share = null;
          this.#deps.sql`UPDATE tenant_admissions SET share = NULL WHERE thread_id = ${holder}`;
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
        granted_at: number;
      }>`SELECT thread_id, grant_id, share, granted_at FROM tenant_admissions`.toArray();
      this.#holds = new Map(
        rows.map((row) => [
          row.thread_id,
          { grant: row.grant_id, share: row.share, grantedAt: row.granted_at },
        ]),
      );
      this.#lastGrant = Math.max(0, ...rows.map((row) => row.grant_id));
    }
    return this.#holds;
  }
}
