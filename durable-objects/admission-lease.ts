import type { AdmissionGrant, Quotas } from "../shared/api/index.ts";
import type { Clock } from "../shared/ports/index.ts";
import { utcDay } from "./usage-rollup.ts";

/** The turn quotas an admission was granted under: another value needs another admission. */
function turnQuotasKey(quotas: Quotas): string {
  return `${quotas.max_running_turns}/${quotas.tokens_per_day}`;
}

/** What lets the thread start tasks without asking its tenant. */
interface Lease {
  until: number;
  day: string;
  quotas: string;
  /** The thread's tokens (input + output) when it was granted. */
  spentAt: number;
  share: number | null;
}

export interface AdmissionLeaseDeps {
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
 * The thread's side of an admission lease (`tenant-admissions.ts`): the grant it holds at its
 * tenant (a running slot, and maybe a share of the day's tokens), and while the lease lasts the
 * right to start tasks without asking. In memory only: an instance that goes away forgets it,
 * and its next task asks again; the tenant's hold then lasts until the tenant asks for it back.
 */
export class AdmissionLease {
  readonly #deps: AdmissionLeaseDeps;
  /** The grant held at the tenant (until released or given back). */
  #grant: number | undefined;
  #lease: Lease | undefined;
  #cancelRelease: (() => void) | undefined;
  /** Admission requests sent and not answered yet. */
  #asking = 0;
  /**
   * The newest grant the tenant asked back while a request was out: a grant up to it may be that
   * request's answer, still on its way, so it was kept (the tenant counts its slot) but gives no
   * lease.
   */
  #askedBack = 0;

  constructor(deps: AdmissionLeaseDeps) {
    this.#deps = deps;
  }

  /** The grant held now, 0 for none (what an admission request says it holds). */
  get held(): number {
    return this.#grant ?? 0;
  }

  /** Whether a task may start under `quotas` without asking. */
  covers(quotas: Quotas): boolean {
    const lease = this.#lease;
    if (lease === undefined) return false;
    const now = this.#deps.clock.nowMs();
    return (
      now < lease.until &&
      utcDay(now) === lease.day &&
      lease.quotas === turnQuotasKey(quotas) &&
      (lease.share === null || this.#deps.spent() - lease.spentAt < lease.share)
    );
  }

  /** An admission request goes out; `granted` or `refused` follows. */
  asking(): void {
    this.#asking++;
  }

  /** The tenant admitted a task asked for at `askedAt` (its lease counts from then). */
  granted(grant: AdmissionGrant, quotas: Quotas, askedAt: number): void {
    this.#asking--;
    this.#cancelTimer();
    this.#grant = grant.grant;
    if (grant.grant <= this.#askedBack) {
      this.#lease = undefined;
      return;
    }
    this.#lease = {
      until: askedAt + grant.leaseMs,
      day: utcDay(askedAt),
      quotas: turnQuotasKey(quotas),
      spentAt: this.#deps.spent(),
      share: grant.tokens,
    };
  }

  /** The tenant refused a request made holding `held`: that hold is gone there. */
  refused(held: number): void {
    this.#asking--;
    this.#lease = undefined;
    if (this.#grant === held) {
      this.#cancelTimer();
      this.#grant = undefined;
    }
  }

  /**
   * A task ended: with the lease still on, the slot is kept for the next task and released when
   * the lease ends, if no task runs then; without it, released now.
   */
  taskEnded(): void {
    if (this.#grant === undefined) return;
    const left = this.#lease ? this.#lease.until - this.#deps.clock.nowMs() : 0;
    if (left <= 0) {
      this.#releaseNow();
      return;
    }
    this.#cancelTimer();
    this.#cancelRelease = this.#deps.later(left, () => {
      this.#cancelRelease = undefined;
      if (!this.#deps.running()) this.#releaseNow();
    });
  }

  /**
   * The tenant wants back `grant` (or an older one): the lease goes, and the slot too unless a
   * task runs (then its end releases it) or a request is out (its answer may be that grant).
   * True when the thread holds nothing any more.
   */
  yield(grant: number): boolean {
    if (this.#grant !== undefined && this.#grant > grant) return false;
    this.#lease = undefined;
    if (this.#deps.running()) return false;
    if (this.#asking > 0) {
      this.#askedBack = Math.max(this.#askedBack, grant);
      return false;
    }
    this.#cancelTimer();
    this.#grant = undefined;
    return true;
  }

  /** Forgets the grant without releasing it. */
  reset(): void {
    this.#cancelTimer();
    this.#lease = undefined;
    this.#grant = undefined;
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
