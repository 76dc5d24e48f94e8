import type { QuotaGrant, Quotas } from "../../../shared/api/index.ts";
import type { Clock } from "../../../shared/ports/index.ts";
import { utcDay } from "../../common/clock.ts";

/** The turn quotas an admission was granted under: another value needs another admission. */
function turnQuotasKey(quotas: Quotas): string {
  return `${quotas.max_running_turns}/${quotas.tokens_per_day}`;
}

/** What lets the thread start tasks without asking its tenant. */
interface Lease {
  until: number;
  day: string;
  quotas: string;
  /** The thread's tokens (input + output) when it asked: its share counts from there. */
  spentAt: number;
  share: number | null;
}

/** When a request went out: its lease counts from then, its share from what was spent then. */
export interface Asked {
  ms: number;
  spent: number;
}

export interface QuotaLeaseDeps {
  clock: Clock;
  /** The thread's input + output tokens so far. */
  spent: () => number;
  /** Whether a task runs now. */
  running: () => boolean;
  /** Tells the tenant's object, off the response path, that the thread no longer holds `grant`. */
  release: (grant: number) => void;
  /** Runs `fn` in `ms`; the answer cancels it. */
  later: (ms: number, fn: () => void) => () => void;
}

/**
 * The thread's side of an admission lease (`tenant/quota-grants.ts`): the grant it holds at its
 * tenant (a running slot, and maybe a share of the day's tokens), and while the lease lasts the
 * right to start tasks without asking, each while its reservation fits in what is left of the
 * share. It also knows what the running task may still spend (its reservation less what it
 * spent), which a hold asked back keeps reserved. In memory only: an instance that goes away
 * forgets it, and its next task asks again; the tenant's hold then lasts until the tenant asks
 * for it back.
 */
export class QuotaLease {
  readonly #deps: QuotaLeaseDeps;
  /** The grant held at the tenant (until released or given back). */
  #grant: number | undefined;
  #lease: Lease | undefined;
  #cancelRelease: (() => void) | undefined;
  /** Admission requests sent and not answered yet, and the most tokens one of them reserves. */
  #asking = 0;
  #askedTokens = 0;
  /**
   * The newest grant the tenant asked back while a request was out: a grant up to it may be that
   * request's answer, still on its way, so it was kept (the tenant counts its slot) but gives no
   * lease.
   */
  #askedBack = 0;
  /** The thread's tokens the running task may reach (spent at its start plus its reservation). */
  #taskUntil: number | undefined;

  constructor(deps: QuotaLeaseDeps) {
    this.#deps = deps;
  }

  /** The grant held now, 0 for none (what an admission request says it holds). */
  get held(): number {
    return this.#grant ?? 0;
  }

  /** What the running task may still spend of its reservation (0 with none running). */
  get taskReserved(): number {
    return this.#taskUntil === undefined ? 0 : Math.max(0, this.#taskUntil - this.#deps.spent());
  }

  /** Whether work reserving `tokens` may start under `quotas` without asking. */
  covers(quotas: Quotas, tokens: number): boolean {
    const lease = this.#lease;
    if (lease === undefined) return false;
    const now = this.#deps.clock.nowMs();
    return (
      now < lease.until &&
      utcDay(now) === lease.day &&
      lease.quotas === turnQuotasKey(quotas) &&
      (lease.share === null || this.#deps.spent() - lease.spentAt + tokens <= lease.share)
    );
  }

  /** An admission request reserving `tokens` goes out; `granted` or `refused` follows. */
  asking(tokens: number): Asked {
    this.#asking++;
    this.#askedTokens = Math.max(this.#askedTokens, tokens);
    return { ms: this.#deps.clock.nowMs(), spent: this.#deps.spent() };
  }

  /**
   * The tenant admitted a request made `asked`: a lease from then, and the hold released at its
   * end unless a task runs then (a task's end releases it after).
   */
  granted(grant: QuotaGrant, quotas: Quotas, asked: Asked): void {
    this.#answered();
    this.#grant = grant.grant;
    const until = asked.ms + grant.leaseMs;
    this.#releaseAt(until);
    if (grant.grant <= this.#askedBack) {
      this.#lease = undefined;
      return;
    }
    this.#lease = {
      until,
      day: utcDay(asked.ms),
      quotas: turnQuotasKey(quotas),
      spentAt: asked.spent,
      share: grant.tokens,
    };
  }

  /** The tenant refused a request made holding `held`: that hold is gone there. */
  refused(held: number): void {
    this.#answered();
    this.#lease = undefined;
    if (this.#grant === held) {
      this.#cancelTimer();
      this.#grant = undefined;
    }
  }

  /** A task reserving `tokens` started. */
  taskStarted(tokens: number): void {
    this.#taskUntil = this.#deps.spent() + tokens;
  }

  /** The running task may spend `tokens` more (steered input was admitted). */
  taskExtended(tokens: number): void {
    if (this.#taskUntil !== undefined) this.#taskUntil += tokens;
  }

  /**
   * A task ended: with the lease still on, the slot is kept for the next task and released when
   * the lease ends, if no task runs then; without it, released now.
   */
  taskEnded(): void {
    this.#taskUntil = undefined;
    if (this.#grant === undefined) return;
    const until = this.#lease?.until ?? 0;
    if (until <= this.#deps.clock.nowMs()) {
      this.#releaseNow();
      return;
    }
    this.#releaseAt(until);
  }

  /**
   * The tenant wants back `grant` (or an older one): the lease goes, and the slot too unless a
   * task runs (then its end releases it) or a request is out (its answer may be that grant).
   * Answers whether the thread holds nothing any more, and what a kept hold must still reserve:
   * what the running task may still spend, or what the request out reserves.
   */
  yield(grant: number): { released: boolean; reserved: number } {
    const reserved = Math.max(this.taskReserved, this.#asking > 0 ? this.#askedTokens : 0);
    if (this.#grant !== undefined && this.#grant > grant) return { released: false, reserved };
    this.#lease = undefined;
    if (this.#deps.running()) return { released: false, reserved };
    if (this.#asking > 0) {
      this.#askedBack = Math.max(this.#askedBack, grant);
      return { released: false, reserved };
    }
    this.#cancelTimer();
    this.#grant = undefined;
    return { released: true, reserved: 0 };
  }

  /** Forgets the grant without releasing it. */
  reset(): void {
    this.#cancelTimer();
    this.#lease = undefined;
    this.#grant = undefined;
  }

  #answered(): void {
    this.#asking--;
    if (this.#asking === 0) this.#askedTokens = 0;
  }

  /** Releases the hold at `until`, unless a task runs then. */
  #releaseAt(until: number): void {
    this.#cancelTimer();
    this.#cancelRelease = this.#deps.later(until - this.#deps.clock.nowMs(), () => {
      this.#cancelRelease = undefined;
      if (!this.#deps.running()) this.#releaseNow();
    });
  }

  #releaseNow(): void {
    const grant = this.#grant;
    this.#cancelTimer();
    this.#lease = undefined;
    this.#grant = undefined;
    if (grant !== undefined) this.#deps.release(grant);
  }

  #cancelTimer(): void {
    this.#cancelRelease?.();
    this.#cancelRelease = undefined;
  }
}
