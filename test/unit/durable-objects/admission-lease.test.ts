import { describe, expect, it } from "vitest";
import { AdmissionLease } from "../../../durable-objects/admission-lease.ts";
import { NO_QUOTAS, type Quotas } from "../../../shared/api/index.ts";

const QUOTAS: Quotas = { ...NO_QUOTAS, max_running_turns: 2, tokens_per_day: 1_000 };
const NOON = Date.UTC(2026, 11, 1, 12);

/** A lease over a clock, a token count, a running flag and timers the test drives. */
function harness() {
  const state = { now: NOON, spent: 0, running: false };
  const released: number[] = [];
  const timers: { at: number; fn: () => void; live: boolean }[] = [];
  const lease = new AdmissionLease({
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
  return { state, lease, released, advance, pending };
}

describe("AdmissionLease", () => {
  it("covers tasks until the lease ends, counted from the request", () => {
    const { lease, advance } = harness();
    expect(lease.covers(QUOTAS)).toBe(false);
    lease.asking();
    lease.granted({ grant: 7, leaseMs: 30_000, tokens: null }, QUOTAS, NOON - 1_000);
    expect(lease.held).toBe(7);
    expect(lease.covers(QUOTAS)).toBe(true);
    advance(28_999);
    expect(lease.covers(QUOTAS)).toBe(true);
    advance(1);
    expect(lease.covers(QUOTAS)).toBe(false);
  });

  it("covers no task under other quotas, on another UTC day, or once its share is spent", () => {
    const { lease, state } = harness();
    state.spent = 500;
    lease.asking();
    lease.granted({ grant: 1, leaseMs: 30_000, tokens: 100 }, QUOTAS, NOON);
    expect(lease.covers({ ...QUOTAS, max_running_turns: 3 })).toBe(false);
    expect(lease.covers({ ...QUOTAS, tokens_per_day: 2_000 })).toBe(false);
    // A byte quota is no turn quota: it changes nothing here.
    expect(lease.covers({ ...QUOTAS, max_thread_bytes: 10 })).toBe(true);
    state.spent = 599;
    expect(lease.covers(QUOTAS)).toBe(true);
    state.spent = 600;
    expect(lease.covers(QUOTAS)).toBe(false);

    const late = harness();
    late.state.now = Date.UTC(2026, 11, 1, 23, 59, 50);
    late.lease.asking();
    late.lease.granted({ grant: 1, leaseMs: 30_000, tokens: null }, QUOTAS, late.state.now);
    expect(late.lease.covers(QUOTAS)).toBe(true);
    late.advance(10_000);
    expect(late.lease.covers(QUOTAS)).toBe(false);
  });

  it("keeps the slot after a task while the lease lasts, and releases it when it ends with nothing running", () => {
    const { lease, state, released, advance, pending } = harness();
    lease.asking();
    lease.granted({ grant: 3, leaseMs: 30_000, tokens: null }, QUOTAS, NOON);
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
    expect(lease.covers(QUOTAS)).toBe(false);

    const idle = harness();
    idle.lease.asking();
    idle.lease.granted({ grant: 4, leaseMs: 30_000, tokens: null }, QUOTAS, NOON);
    idle.lease.taskEnded();
    idle.advance(30_000);
    expect(idle.released).toEqual([4]);
    expect(idle.pending()).toBe(0);
  });

  it("gives the admission back when asked: all of it when idle, the lease only while a task runs", () => {
    const idle = harness();
    idle.lease.asking();
    idle.lease.granted({ grant: 5, leaseMs: 30_000, tokens: null }, QUOTAS, NOON);
    idle.lease.taskEnded();
    expect(idle.lease.yield(5)).toBe(true);
    expect(idle.lease.held).toBe(0);
    expect(idle.pending()).toBe(0);
    // Nothing is released later: the tenant already dropped the hold.
    idle.advance(60_000);
    expect(idle.released).toEqual([]);

    const busy = harness();
    busy.lease.asking();
    busy.lease.granted({ grant: 6, leaseMs: 30_000, tokens: null }, QUOTAS, NOON);
    busy.state.running = true;
    expect(busy.lease.yield(6)).toBe(false);
    expect(busy.lease.covers(QUOTAS)).toBe(false);
    expect(busy.lease.held).toBe(6);
    busy.state.running = false;
    busy.lease.taskEnded();
    expect(busy.released).toEqual([6]);
  });

  it("keeps a newer grant than the one asked back, and forgets only the refused request's hold", () => {
    const { lease } = harness();
    lease.asking();
    lease.granted({ grant: 9, leaseMs: 30_000, tokens: null }, QUOTAS, NOON);
    expect(lease.yield(8)).toBe(false);
    expect(lease.covers(QUOTAS)).toBe(true);
    // A refusal of a request made holding 8 leaves grant 9 held (not usable: it was refused).
    lease.asking();
    lease.refused(8);
    expect(lease.held).toBe(9);
    expect(lease.covers(QUOTAS)).toBe(false);
    lease.asking();
    lease.refused(9);
    expect(lease.held).toBe(0);
  });

  it("a grant asked back while a request was out holds the slot but gives no lease", () => {
    const { lease, released } = harness();
    lease.asking();
    // The tenant granted 4 and, before the answer arrived, asked for it back.
    expect(lease.yield(4)).toBe(false);
    lease.granted({ grant: 4, leaseMs: 30_000, tokens: null }, QUOTAS, NOON);
    expect(lease.held).toBe(4);
    expect(lease.covers(QUOTAS)).toBe(false);
    lease.taskEnded();
    expect(released).toEqual([4]);
    // A grant made after that question is a lease as usual.
    lease.asking();
    lease.granted({ grant: 5, leaseMs: 30_000, tokens: null }, QUOTAS, NOON);
    expect(lease.covers(QUOTAS)).toBe(true);
  });

  it("a reset forgets the grant without releasing it", () => {
    const { lease, released, advance, pending } = harness();
    lease.asking();
    lease.granted({ grant: 2, leaseMs: 30_000, tokens: null }, QUOTAS, NOON);
    lease.taskEnded();
    lease.reset();
    expect(lease.held).toBe(0);
    expect(pending()).toBe(0);
    advance(60_000);
    expect(released).toEqual([]);
  });
});
