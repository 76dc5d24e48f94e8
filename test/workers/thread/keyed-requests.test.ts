import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { KeyedRequests } from "../../../durable-objects/thread/keyed-requests.ts";
import {
  IDEMPOTENCY_TTL_MS,
  IdempotencyKeys,
} from "../../../durable-objects/thread/storage/idempotency-keys.ts";
import { type Sql, sqlOf } from "../../../durable-objects/thread/storage/sql.ts";
import { newThreadId, threadStub } from "../helpers/api.ts";

const T0 = Date.UTC(2026, 10, 30, 12);

interface Setup {
  keyed: KeyedRequests;
  keys: IdempotencyKeys;
  sql: Sql;
  clock: { now: number; nowMs: () => number };
  /** Turns that exist (running, stored or queued), as the Thread would answer. */
  turns: Set<string>;
  /** The newest event seq the keyed records with a key. */
  events: { lastSeq: number };
}

/** Runs `body` with an KeyedRequests over real idempotency keys in a new object's SQLite. */
function withKeyedRequests<T>(body: (setup: Setup) => Promise<T> | T): Promise<T> {
  return runInDurableObject(threadStub(newThreadId()), (_instance, state) => {
    const sql = sqlOf(state.storage.sql);
    const clock = { now: T0, nowMs: () => clock.now };
    const keys = new IdempotencyKeys(sql, clock);
    const turns = new Set<string>();
    const events = { lastSeq: 0 };
    const keyed = new KeyedRequests(
      keys,
      () => events.lastSeq,
      (turnId) => turns.has(turnId),
    );
    return body({ keyed, keys, sql, clock, turns, events });
  });
}

/** The stored keys (none while the table was not created: a thread creates it on first use). */
const storedKeys = (sql: Sql) =>
  sql.tables.ifExists("spindle_idempotency", [], () =>
    sql<{ key: string; fingerprint: string; turn_id: string | null; event_seq: number }>`
      SELECT key, fingerprint, turn_id, event_seq FROM spindle_idempotency ORDER BY key`.toArray(),
  );

function deferred<T>() {
  let resolve: (value: T) => void = () => {};
  const promise = new Promise<T>((res) => {
    resolve = res;
  });
  return { promise, resolve };
}

const KEY = { key: "key-1", fingerprint: "POST /turns {a}" };

describe("KeyedRequests.earlier: the earlier request a retry repeats", () => {
  it("finds the record of the same key with the same fingerprint", async () => {
    const found = await withKeyedRequests(({ keyed, turns, events }) => {
      events.lastSeq = 7;
      turns.add("turn_1");
      keyed.record(KEY, "turn_1");
      events.lastSeq = 9;
      return keyed.earlier(KEY);
    });
    expect(found).toEqual({
      ok: true,
      value: {
        key: "key-1",
        fingerprint: "POST /turns {a}",
        turnId: "turn_1",
        eventSeq: 7,
        at: T0,
      },
    });
  });

  it("finds a record without a turn (a create, a rollback) whatever turns exist", async () => {
    const found = await withKeyedRequests(({ keyed }) => {
      keyed.record(KEY, null);
      return keyed.earlier(KEY);
    });
    expect(found).toEqual({
      ok: true,
      value: { key: "key-1", fingerprint: "POST /turns {a}", turnId: null, eventSeq: 0, at: T0 },
    });
  });

  it("answers the same key with another request as idempotency_key_reused, keeping the record", async () => {
    const result = await withKeyedRequests(({ keyed, turns, sql }) => {
      turns.add("turn_1");
      keyed.record(KEY, "turn_1");
      return {
        earlier: keyed.earlier({ key: KEY.key, fingerprint: "POST /turns {b}" }),
        stored: storedKeys(sql),
      };
    });
    expect(result).toEqual({
      earlier: {
        ok: false,
        error: {
          code: "idempotency_key_reused",
          detail: "This key was used with a different request.",
        },
      },
      stored: [{ key: "key-1", fingerprint: "POST /turns {a}", turn_id: "turn_1", event_seq: 0 }],
    });
  });

  it("treats a record whose turn never began as void: answered as new, and forgotten", async () => {
    const result = await withKeyedRequests(({ keyed, sql }) => {
      keyed.record(KEY, "turn_lost_with_the_instance");
      return {
        earlier: keyed.earlier(KEY),
        has: keyed.has(KEY.key),
        stored: storedKeys(sql),
      };
    });
    expect(result).toEqual({ earlier: { ok: true, value: undefined }, has: false, stored: [] });
  });

  it("answers an unknown or expired key as new", async () => {
    const result = await withKeyedRequests(({ keyed, clock }) => {
      const unknown = keyed.earlier(KEY);
      keyed.record(KEY, null);
      clock.now += IDEMPOTENCY_TTL_MS;
      return { unknown, expired: keyed.earlier(KEY), has: keyed.has(KEY.key) };
    });
    expect(result).toEqual({
      unknown: { ok: true, value: undefined },
      expired: { ok: true, value: undefined },
      has: false,
    });
  });

  it("without a key, every request is carried out", async () => {
    const result = await withKeyedRequests(({ keyed, sql }) => {
      keyed.record(undefined, "turn_1");
      keyed.forget(undefined);
      return { earlier: keyed.earlier(undefined), stored: storedKeys(sql) };
    });
    expect(result).toEqual({ earlier: { ok: true, value: undefined }, stored: [] });
  });
});

describe("KeyedRequests.keyed: only a request that took effect is ever replayed", () => {
  it("records the key with the turn before admitting, and keeps it when keyed succeeds", async () => {
    const result = await withKeyedRequests(async ({ keyed, sql, turns, events }) => {
      events.lastSeq = 3;
      const seenDuring: unknown[] = [];
      const admitted = await keyed.keyed(KEY, "turn_1", async () => {
        seenDuring.push(storedKeys(sql));
        turns.add("turn_1");
        return { ok: true as const, value: "started" };
      });
      return { admitted, seenDuring, after: keyed.earlier(KEY) };
    });
    expect(result).toEqual({
      admitted: { ok: true, value: "started" },
      seenDuring: [
        [{ key: "key-1", fingerprint: "POST /turns {a}", turn_id: "turn_1", event_seq: 3 }],
      ],
      after: {
        ok: true,
        value: {
          key: "key-1",
          fingerprint: "POST /turns {a}",
          turnId: "turn_1",
          eventSeq: 3,
          at: T0,
        },
      },
    });
  });

  it("tells a retry while the first request is still admitting that the key is in use", async () => {
    const result = await withKeyedRequests(async ({ keyed, turns }) => {
      const gate = deferred<void>();
      const first = keyed.keyed(KEY, "turn_1", async () => {
        await gate.promise;
        turns.add("turn_1");
        return { ok: true as const, value: "started" };
      });
      const sameRequest = keyed.earlier(KEY);
      const otherRequest = keyed.earlier({ key: KEY.key, fingerprint: "other" });
      gate.resolve();
      return { sameRequest, otherRequest, first: await first, after: keyed.earlier(KEY) };
    });
    const inUse = {
      ok: false,
      error: {
        code: "idempotency_key_in_use",
        detail: "The first request with this key is still starting.",
      },
    };
    expect(result).toEqual({
      sameRequest: inUse,
      otherRequest: inUse,
      first: { ok: true, value: "started" },
      after: {
        ok: true,
        value: {
          key: "key-1",
          fingerprint: "POST /turns {a}",
          turnId: "turn_1",
          eventSeq: 0,
          at: T0,
        },
      },
    });
  });

  it("forgets the key of an keyed that failed, so a retry is carried out", async () => {
    const result = await withKeyedRequests(async ({ keyed, sql }) => {
      const admitted = await keyed.keyed(KEY, "turn_1", async () => ({
        ok: false as const,
        error: { code: "thread_busy" as const, detail: "Turn turn_0 is running." },
      }));
      return { admitted, earlier: keyed.earlier(KEY), stored: storedKeys(sql) };
    });
    expect(result).toEqual({
      admitted: { ok: false, error: { code: "thread_busy", detail: "Turn turn_0 is running." } },
      earlier: { ok: true, value: undefined },
      stored: [],
    });
  });

  it("forgets the key of an keyed that threw, rethrows, and is no longer admitting", async () => {
    const result = await withKeyedRequests(async ({ keyed, sql }) => {
      const boom = new Error("storage failed");
      const thrown = await keyed
        .keyed(KEY, "turn_1", async () => {
          throw boom;
        })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      return { same: thrown === boom, earlier: keyed.earlier(KEY), stored: storedKeys(sql) };
    });
    expect(result).toEqual({ same: true, earlier: { ok: true, value: undefined }, stored: [] });
  });

  it("without a key, admits at once and records nothing", async () => {
    const result = await withKeyedRequests(async ({ keyed, sql }) => {
      const admitted = await keyed.keyed(undefined, "turn_1", async () => ({
        ok: true as const,
        value: 1,
      }));
      return { admitted, stored: storedKeys(sql) };
    });
    expect(result).toEqual({ admitted: { ok: true, value: 1 }, stored: [] });
  });
});

describe("KeyedRequests.recorded: the key and the work take effect in one step, or neither", () => {
  it("records the key before the work and keeps it when the work returns", async () => {
    const result = await withKeyedRequests(({ keyed, sql }) => {
      const seenDuring: unknown[] = [];
      const value = keyed.recorded(KEY, null, () => {
        seenDuring.push(storedKeys(sql).map((k) => k.key));
        return "rolled back";
      });
      return { value, seenDuring, stored: storedKeys(sql) };
    });
    expect(result).toEqual({
      value: "rolled back",
      seenDuring: [["key-1"]],
      stored: [{ key: "key-1", fingerprint: "POST /turns {a}", turn_id: null, event_seq: 0 }],
    });
  });

  it("forgets the key when the work throws, and rethrows", async () => {
    const result = await withKeyedRequests(({ keyed, sql }) => {
      let thrown: unknown;
      try {
        keyed.recorded(KEY, "turn_1", () => {
          throw new RangeError("no such turn");
        });
      } catch (err) {
        thrown = err;
      }
      return {
        thrown: thrown instanceof RangeError ? thrown.message : thrown,
        has: keyed.has(KEY.key),
        stored: storedKeys(sql),
      };
    });
    expect(result).toEqual({ thrown: "no such turn", has: false, stored: [] });
  });

  it("without a key, only runs the work", async () => {
    const result = await withKeyedRequests(({ keyed, sql }) => ({
      value: keyed.recorded(undefined, null, () => 5),
      stored: storedKeys(sql),
    }));
    expect(result).toEqual({ value: 5, stored: [] });
  });
});
