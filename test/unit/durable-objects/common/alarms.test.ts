import { describe, expect, it } from "vitest";
import { AlarmSchedule } from "../../../../durable-objects/common/alarms.ts";

/** The alarm calls of a Durable Object's storage, recorded; `stored` is the alarm it holds. */
function fakeStorage(stored: number | null = null) {
  const calls: string[] = [];
  const storage = {
    stored,
    calls,
    async getAlarm() {
      calls.push("get");
      return storage.stored;
    },
    async setAlarm(at: number | Date) {
      calls.push(`set ${Number(at)}`);
      storage.stored = Number(at);
    },
    async deleteAlarm() {
      calls.push("delete");
      storage.stored = null;
    },
  };
  return storage;
}

/** A clock that stays where the test puts it. */
function fakeClock(now = 1_000_000) {
  const clock = {
    now,
    nowMs: () => clock.now,
  };
  return clock;
}

describe("AlarmSchedule: one alarm, only ever brought forward by a duty", () => {
  it("sets the alarm when none is stored", async () => {
    const storage = fakeStorage(null);
    const alarms = new AlarmSchedule(storage, fakeClock(1_000_000));
    await alarms.within(500);
    expect(storage.calls).toEqual(["get", "set 1000500"]);
    expect(storage.stored).toBe(1_000_500);
    expect(alarms.unset).toBe(false);
  });

  it("keeps a stored alarm that is due sooner", async () => {
    const storage = fakeStorage(1_000_100);
    const alarms = new AlarmSchedule(storage, fakeClock(1_000_000));
    await alarms.within(500);
    expect(storage.calls).toEqual(["get"]);
    expect(storage.stored).toBe(1_000_100);
  });

  it("keeps a stored alarm due at exactly the same time", async () => {
    const storage = fakeStorage(1_000_500);
    const alarms = new AlarmSchedule(storage, fakeClock(1_000_000));
    await alarms.within(500);
    expect(storage.calls).toEqual(["get"]);
  });

  it("brings a later stored alarm (an event expiry, a retry's backoff) forward", async () => {
    const storage = fakeStorage(1_900_000);
    const alarms = new AlarmSchedule(storage, fakeClock(1_000_000));
    await alarms.within(500);
    expect(storage.calls).toEqual(["get", "set 1000500"]);
    expect(storage.stored).toBe(1_000_500);
  });

  it("reads the stored alarm once per instance, then decides from what it set or read", async () => {
    const storage = fakeStorage(null);
    const clock = fakeClock(1_000_000);
    const alarms = new AlarmSchedule(storage, clock);
    await alarms.within(1_000); // due 1_001_000
    await alarms.within(5_000); // later: kept
    clock.now = 1_000_400;
    await alarms.within(100); // due 1_000_500: sooner, set
    await alarms.within(30_000); // later: kept
    expect(storage.calls).toEqual(["get", "set 1001000", "set 1000500"]);
  });

  it("an alarm set while the first read is under way is not undone by what the read found", async () => {
    const storage = fakeStorage(1_900_000);
    const alarms = new AlarmSchedule(storage, fakeClock(1_000_000));
    const reading = alarms.within(1_000); // due 1_001_000; reads storage first
    const setting = alarms.at(1_000_050); // runs during the read
    await Promise.all([reading, setting]);
    // The read's 1_900_000 is stale: 1_000_050 stays, and it is sooner than 1_001_000.
    expect(storage.calls).toEqual(["get", "set 1000050"]);
    expect(storage.stored).toBe(1_000_050);
  });

  it("after the alarm fired, it is unset and the next duty sets it without reading storage", async () => {
    const storage = fakeStorage(1_000_100);
    const alarms = new AlarmSchedule(storage, fakeClock(1_000_000));
    await alarms.within(500); // reads 1_000_100: kept
    alarms.fired();
    expect(alarms.unset).toBe(true);
    await alarms.within(60_000);
    expect(storage.calls).toEqual(["get", "set 1060000"]);
    expect(alarms.unset).toBe(false);
  });

  it("`at` sets the alarm later as well as sooner, and later duties compare with it", async () => {
    const storage = fakeStorage(null);
    const alarms = new AlarmSchedule(storage, fakeClock(1_000_000));
    await alarms.at(1_000_050);
    await alarms.at(1_300_000);
    await alarms.within(400_000); // later than 1_300_000: kept, no read needed
    await alarms.within(1_000); // sooner: set
    expect(storage.calls).toEqual(["set 1000050", "set 1300000", "set 1001000"]);
  });

  it("clear deletes the alarm, and the next duty sets one without reading storage", async () => {
    const storage = fakeStorage(1_000_100);
    const alarms = new AlarmSchedule(storage, fakeClock(1_000_000));
    await alarms.clear();
    expect(storage.stored).toBeNull();
    expect(alarms.unset).toBe(true);
    await alarms.within(2_000);
    expect(storage.calls).toEqual(["delete", "set 1002000"]);
  });

  it("knows nothing before its first read: not unset", () => {
    const alarms = new AlarmSchedule(fakeStorage(null), fakeClock());
    expect(alarms.unset).toBe(false);
  });
});
