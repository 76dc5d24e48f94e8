import { describe, expect, it } from "vitest";
import { QuotaLease } from "../../../../durable-objects/thread/quotas/quota-lease.ts";
import { NO_QUOTAS, type Quotas } from "../../../../shared/api/index.ts";

const QUOTAS: Quotas = { ...NO_QUOTAS, max_running_turns: 2, tokens_per_day: 1_000 };
const NOON = Date.UTC(2026, 11, 1, 12);

/** A lease over a clock, a token count, a running flag and timers the test drives. */
function harness() {
  const state = { now: NOON, spent: 0, running: false };
  const released: number[] = [];
  const timers: { at: number; fn: () => void; live: boolean }[] = [];
  const lease = new QuotaLease({
    clock: { nowMs: () => state.now },
    spent: () => state.spent,
    running: () => state.running,
    release: (grant) => released.push(grant),
    later: (ms, fn) => {
      const timer = { at: state.now + ms, fn, live: true };
      timers.push(timer);
      return () => {
        timer.live = false;
      };
    },
  });
  /** Moves the clock, firing the timers due. */
  const advance = (ms: number) => {
    state.now += ms;
    for (const timer of timers) {
      if (timer.live && timer.at <= state.now) {
        timer.live = false;
        timer.fn();
      }
    }
  };
  const pending = () => timers.filter((timer) => timer.live).length;
  /** A request reserving `reserving` tokens, answered with grant `grant` and share `tokens`. */
  const grant = (grant: number, tokens: number | null = null, reserving = 0) =>
    lease.granted({ grant, leaseMs: 30_000, tokens }, QUOTAS, lease.asking(reserving));
  return { state, lease, released, advance, pending, grant };
}

describe("QuotaLease", () => {
  it("covers tasks until the lease ends, counted from the request", () => {
    const { lease, advance, state } = harness();
    expect(lease.covers(QUOTAS, 0)).toBe(false);
    const asked = lease.asking(0);
    state.now += 1_000;
    lease.granted({ grant: 7, leaseMs: 30_000, tokens: null }, QUOTAS, asked);
    expect(lease.held).toBe(7);
    expect(lease.covers(QUOTAS, 0)).toBe(true);
    advance(28_999);
    expect(lease.covers(QUOTAS, 0)).toBe(true);
    advance(1);
    expect(lease.covers(QUOTAS, 0)).toBe(false);
  });

  it("covers work only while its reservation fits in what is left of the share, spent counted from the request", () => {
    const { lease, state } = harness();
    state.spent = 500;
    const asked = lease.asking(60);
    // Spent while the request was out: it counts against the share too.
    state.spent = 520;
    lease.granted({ grant: 1, leaseMs: 30_000, tokens: 100 }, QUOTAS, asked);
    expect(lease.covers({ ...QUOTAS, max_running_turns: 3 }, 0)).toBe(false);
    expect(lease.covers({ ...QUOTAS, tokens_per_day: 2_000 }, 0)).toBe(false);
    // A byte quota is no turn quota: it changes nothing here.
    expect(lease.covers({ ...QUOTAS, max_thread_bytes: 10 }, 0)).toBe(true);
    expect(lease.covers(QUOTAS, 80)).toBe(true);
    expect(lease.covers(QUOTAS, 81)).toBe(false);
    state.spent = 590;
    expect(lease.covers(QUOTAS, 10)).toBe(true);
    expect(lease.covers(QUOTAS, 11)).toBe(false);

    const late = harness();
    late.state.now = Date.UTC(2026, 11, 1, 23, 59, 50);
    late.grant(1);
    expect(late.lease.covers(QUOTAS, 0)).toBe(true);
    late.advance(10_000);
    expect(late.lease.covers(QUOTAS, 0)).toBe(false);
  });

  it("knows what the running task may still spend: its reservation, more for steered input, none once it ended", () => {
    const { lease, state, grant } = harness();
    grant(1, 1_000, 300);
    state.spent = 40;
    lease.taskStarted(300);
    expect(lease.taskReserved).toBe(300);
    state.spent = 140;
    expect(lease.taskReserved).toBe(200);
    lease.taskExtended(150);
    expect(lease.taskReserved).toBe(350);
    // A task that spends past its reservation (an estimate) reserves nothing more.
    state.spent = 600;
    expect(lease.taskReserved).toBe(0);
    lease.taskEnded();
    expect(lease.taskReserved).toBe(0);
    lease.taskExtended(10);
    expect(lease.taskReserved).toBe(0);
  });

  it("keeps the slot after a task while the lease lasts, and releases it when it ends with nothing running", () => {
    const { lease, state, released, advance, pending, grant } = harness();
    grant(3);
    advance(5_000);
    lease.taskEnded();
    expect(released).toEqual([]);
    expect(pending()).toBe(1);
    // Another task under the lease runs past its end: the release waits for that task.
    advance(5_000);
    state.running = true;
    advance(20_000);
    expect(released).toEqual([]);
    state.running = false;
    lease.taskEnded();
    expect(released).toEqual([3]);
    expect(lease.held).toBe(0);
    expect(lease.covers(QUOTAS, 0)).toBe(false);

    // A grant no task follows (the thread was busy, or the turn a steer was for ended) is
    // released when its lease ends all the same.
    const idle = harness();
    idle.grant(4);
    idle.advance(30_000);
    expect(idle.released).toEqual([4]);
    expect(idle.pending()).toBe(0);
  });

  it("gives the admission back when asked: all of it when idle, all but the running task's reservation while one runs", () => {
    const idle = harness();
    idle.grant(5, 1_000, 200);
    idle.lease.taskStarted(200);
    idle.lease.taskEnded();
    expect(idle.lease.yield(5)).toEqual({ released: true, reserved: 0 });
    expect(idle.lease.held).toBe(0);
    expect(idle.pending()).toBe(0);
    // Nothing is released later: the tenant already dropped the hold.
    idle.advance(60_000);
    expect(idle.released).toEqual([]);

    const busy = harness();
    busy.grant(6, 1_000, 200);
    busy.state.running = true;
    busy.lease.taskStarted(200);
    busy.state.spent = 50;
    expect(busy.lease.yield(6)).toEqual({ released: false, reserved: 150 });
    expect(busy.lease.covers(QUOTAS, 0)).toBe(false);
    expect(busy.lease.held).toBe(6);
    busy.state.running = false;
    busy.lease.taskEnded();
    expect(busy.released).toEqual([6]);
  });

  it("keeps a newer grant than the one asked back, and forgets only the refused request's hold", () => {
    const { lease, grant } = harness();
    grant(9);
    expect(lease.yield(8).released).toBe(false);
    expect(lease.covers(QUOTAS, 0)).toBe(true);
    // A refusal of a request made holding 8 leaves grant 9 held (not usable: it was refused).
    lease.asking(0);
    lease.refused(8);
    expect(lease.held).toBe(9);
    expect(lease.covers(QUOTAS, 0)).toBe(false);
    lease.asking(0);
    lease.refused(9);
    expect(lease.held).toBe(0);
  });

  it("a grant asked back while a request was out holds the slot and that request's reservation, but gives no lease", () => {
    const { lease, released, grant } = harness();
    const asked = lease.asking(250);
    // The tenant granted 4 and, before the answer arrived, asked for it back.
    expect(lease.yield(4)).toEqual({ released: false, reserved: 250 });
    lease.granted({ grant: 4, leaseMs: 30_000, tokens: 250 }, QUOTAS, asked);
    expect(lease.held).toBe(4);
    expect(lease.covers(QUOTAS, 0)).toBe(false);
    lease.taskEnded();
    expect(released).toEqual([4]);
    // A grant made after that question is a lease as usual.
    grant(5);
    expect(lease.covers(QUOTAS, 0)).toBe(true);
  });

  it("a reset forgets the grant without releasing it", () => {
    const { lease, released, advance, pending, grant } = harness();
    grant(2);
    lease.taskEnded();
    lease.reset();
    expect(lease.held).toBe(0);
    expect(pending()).toBe(0);
    advance(60_000);
    expect(released).toEqual([]);
  });
});
