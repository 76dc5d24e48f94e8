/**
 * The stores of the `Tenant` object, each over a fresh tenant object's SQLite: the keys
 * (`tenant/keys.ts`), the thread index (`tenant/thread-index.ts`) and the usage rollups
 * (`tenant/usage-rollup.ts`).
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { keyDigest } from "../../../durable-objects/common/digests.ts";
import { migrate } from "../../../durable-objects/common/migrations.ts";
import { sqlOf } from "../../../durable-objects/common/sql.ts";
import { KeyStore } from "../../../durable-objects/tenant/keys.ts";
import {
  QuotaGrants,
  RECLAIM_PARALLEL,
  RESERVED_RETRY_AFTER_S,
  type YieldAnswer,
} from "../../../durable-objects/tenant/quota-grants.ts";
import { TENANT_MIGRATIONS } from "../../../durable-objects/tenant/schema.ts";
import { RESERVATION_MS, ThreadIndex } from "../../../durable-objects/tenant/thread-index.ts";
import { UsageRollup } from "../../../durable-objects/tenant/usage-rollup.ts";
import type {
  GrantQuotaRequest,
  LedgerEntry,
  QuotaGrant,
  Quotas,
  RpcResult,
  TenantResource,
  ThreadResource,
  ThreadSync,
} from "../../../shared/api/index.ts";
import { NO_QUOTAS, parseApiKey } from "../../../shared/api/index.ts";
import { okValue } from "../helpers/results.ts";
import { newTenantId } from "../helpers/tenancy.ts";

/** Key ids are tagged with the development secret. */
const DEV_ENV = { SPINDLE_ENV: "development" };

/** Runs `body` over the SQLite of a fresh tenant object, with a clock the test moves. */
function withTenantStorage<T>(
  body: (parts: { sql: ReturnType<typeof sqlOf>; clock: { nowMs: () => number; at: number } }) => T,
): Promise<T> {
  return runInDurableObject(env.TENANT.getByName(newTenantId()), (_i, state) => {
    migrate(state.storage.sql, TENANT_MIGRATIONS);
    const clock = { at: Date.UTC(2026, 11, 1, 12), nowMs: () => clock.at };
    return body({ sql: sqlOf(state.storage.sql), clock });
  });
}

const tenant: TenantResource = {
  object: "tenant",
  id: "acme",
  name: null,
  jurisdiction: "eu",
  quotas: NO_QUOTAS,
  status: "active",
  created_at: "2026-12-01T00:00:00.000Z",
};

function threadAt(id: string, updatedAt: string, extra: Partial<ThreadResource> = {}) {
  return { id, status: "idle", updated_at: updatedAt, metadata: {}, ...extra } as ThreadResource;
}

const sync = (
  threadId: string,
  version: number,
  thread: ThreadResource | null,
  usage: LedgerEntry[] = [],
): ThreadSync => ({ threadId, incarnation: null, version, thread, usage });

describe("KeyStore", () => {
  it("verifies a key by its id and digest only, never from the secret alone", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const keys = new KeyStore(sql, clock, DEV_ENV);
      const made = okValue(keys.create(tenant, { name: "ci", scopes: ["threads", "usage"] }));
      const parts = parseApiKey(made.key);
      const other = okValue(keys.create(tenant, { name: null, scopes: ["keys"] }));
      return {
        parts: parts && {
          jurisdiction: parts.jurisdiction,
          tenant: parts.tenant,
          keyId: parts.keyId,
        },
        own: keys.verify(made.id, keyDigest(made.key)),
        swapped: keys.verify(other.id, keyDigest(made.key)),
        unknown: keys.verify("key_nope", keyDigest(made.key)),
        truncated: keys.verify(made.id, keyDigest(made.key).subarray(0, 16)),
        stored: sql<{ digest: ArrayBuffer; body: string }>`SELECT digest, body FROM tenant_keys`
          .toArray()
          .map((row) => row.body.includes(parts?.secret ?? "?")),
      };
    });
    expect(result).toEqual({
      parts: { jurisdiction: "eu", tenant: "acme", keyId: expect.stringMatching(/^key_/) },
      own: ["threads", "usage"],
      swapped: undefined,
      unknown: undefined,
      truncated: undefined,
      stored: [false, false],
    });
  });

  it("writes last_used_at at most once a minute, lists keys by creation and revokes them", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const keys = new KeyStore(sql, clock, DEV_ENV);
      const a = okValue(keys.create(tenant, { name: "a", scopes: ["threads"] }));
      clock.at += 1;
      const b = okValue(keys.create(tenant, { name: "b", scopes: ["threads"] }));
      keys.verify(a.id, keyDigest(a.key));
      const first = keys.list({ limit: 10 })?.data[0]?.last_used_at;
      clock.at += 30_000;
      keys.verify(a.id, keyDigest(a.key));
      const soon = keys.list({ limit: 10 })?.data[0]?.last_used_at;
      clock.at += 31_000;
      keys.verify(a.id, keyDigest(a.key));
      const later = keys.list({ limit: 10 })?.data[0]?.last_used_at;
      const page = keys.list({ limit: 1 });
      const rest = page?.next_cursor
        ? keys.list({ limit: 1, cursor: page.next_cursor })
        : undefined;
      return {
        times: [first, soon, later].map((t) => (t ? Date.parse(t) - Date.UTC(2026, 11, 1, 12) : t)),
        pages: [page?.data.map((k) => k.name), rest?.data.map((k) => k.name), rest?.next_cursor],
        badCursor: keys.list({ limit: 1, cursor: "nonsense" }),
        revoked: [keys.revoke(a.id), keys.revoke(a.id), keys.verify(a.id, keyDigest(a.key))],
        left: keys.list({ limit: 10 })?.data.map((k) => k.id),
        b: b.id,
      };
    });
    expect(result.times).toEqual([1, 1, 61_001]);
    expect(result.pages).toEqual([["a"], ["b"], null]);
    expect(result.badCursor).toBe(undefined);
    expect(result.revoked).toEqual([true, false, undefined]);
    expect(result.left).toEqual([result.b]);
  });
});

describe("ThreadIndex", () => {
  it("applies a push unless a newer one was applied, and a null thread drops the entry", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const index = new ThreadIndex(sql, clock);
      const ids = () =>
        (
          index.list({ limit: 10, order: "desc" }) as { value: { data: ThreadResource[] } }
        ).value.data.map((t) => [t.id, t.updated_at]);
      index.apply(sync("t1", 2, threadAt("t1", "2026-12-01T10:00:00.000Z")));
      index.apply(sync("t1", 1, threadAt("t1", "2026-12-01T09:00:00.000Z")));
      const afterLate = ids();
      index.apply(sync("t1", 3, null));
      const afterDelete = ids();
      index.apply(sync("t1", 2, threadAt("t1", "2026-12-01T11:00:00.000Z")));
      return { afterLate, afterDelete, afterStale: ids() };
    });
    expect(result).toEqual({
      afterLate: [["t1", "2026-12-01T10:00:00.000Z"]],
      afterDelete: [],
      afterStale: [],
    });
  });

  it("pages by updated_at then id, either way, with status and metadata filters", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const index = new ThreadIndex(sql, clock);
      const at = (n: number) => `2026-12-01T10:00:0${n}.000Z`;
      index.apply(sync("a", 1, threadAt("a", at(1), { metadata: { team: "x" } })));
      index.apply(sync("b", 1, threadAt("b", at(2), { status: "running" })));
      index.apply(sync("c", 1, threadAt("c", at(2), { metadata: { team: "x" } })));
      index.apply(sync("d", 1, threadAt("d", at(3))));
      const all = (order: "asc" | "desc") => {
        const seen: string[] = [];
        let cursor: string | undefined;
        for (;;) {
          const page = index.list({ limit: 1, order, ...(cursor ? { cursor } : {}) });
          if (!page.ok) return page;
          seen.push(...page.value.data.map((t) => t.id));
          if (page.value.next_cursor === null) return seen;
          cursor = page.value.next_cursor;
        }
      };
      const ids = (q: Parameters<ThreadIndex["list"]>[0]) => {
        const page = index.list(q);
        return page.ok ? page.value.data.map((t) => t.id) : page;
      };
      return {
        desc: all("desc"),
        asc: all("asc"),
        running: ids({ limit: 10, order: "desc", status: "running" }),
        team: ids({ limit: 10, order: "desc", metadata: { team: "x" } }),
        none: ids({ limit: 10, order: "desc", metadata: { team: "x", other: "y" } }),
      };
    });
    expect(result).toEqual({
      desc: ["d", "c", "b", "a"],
      asc: ["a", "b", "c", "d"],
      running: ["b"],
      team: ["c", "a"],
      none: [],
    });
  });

  it("reservations count under max_threads until their thread pushes, or for a minute", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const index = new ThreadIndex(sql, clock);
      const code = (r: { ok: boolean; error?: { quota?: string } }) =>
        r.ok ? "ok" : r.error?.quota;
      const first = code(index.reserve("t1", 2));
      const second = code(index.reserve("t2", 2));
      const third = code(index.reserve("t3", 2));
      const again = code(index.reserve("t1", 2));
      index.apply(sync("t1", 1, threadAt("t1", "2026-12-01T10:00:00.000Z")));
      clock.at += RESERVATION_MS;
      const afterExpiry = code(index.reserve("t3", 2));
      const listed = index.list({ limit: 10, order: "desc" });
      return {
        first,
        second,
        third,
        again,
        afterExpiry,
        listed: listed.ok ? listed.value.data.map((t) => t.id) : listed,
      };
    });
    expect(result).toEqual({
      first: "ok",
      second: "ok",
      third: "max_threads",
      again: "ok",
      afterExpiry: "ok",
      listed: ["t1"],
    });
  });
});

describe("QuotaGrants", () => {
  const quotas = (q: Partial<Quotas>): Quotas => ({ ...NO_QUOTAS, ...q });
  const ask = (threadId: string, q: Partial<Quotas>, held = 0, tokens = 0): GrantQuotaRequest => ({
    threadId,
    incarnation: null,
    held,
    usage: [],
    quotas: quotas(q),
    tokens,
  });
  const RELEASED: YieldAnswer = { released: true, reserved: 0, usage: [] };
  /** A holder running a task that may still spend `reserved`. */
  const kept = (reserved = 0): YieldAnswer => ({ released: false, reserved, usage: [] });
  /**
   * Admissions over the object's SQLite, holders answering as `answers` says (else released;
   * undefined: the call failed); `taken` lists the threads whose entries it took, and how many.
   */
  const admissionsOver = (
    sql: ReturnType<typeof sqlOf>,
    clock: { nowMs: () => number },
    answers: Record<string, YieldAnswer> = {},
  ) => {
    const asked: string[] = [];
    const taken: string[] = [];
    const admissions = new QuotaGrants({
      sql,
      clock,
      yieldOf: async (threadId) => {
        asked.push(threadId);
        return threadId in answers ? answers[threadId] : RELEASED;
      },
      take: (threadId, usage) => {
        if (usage.length > 0) taken.push(`${threadId}:${usage.length}`);
      },
    });
    return { admissions, asked, taken };
  };
  const outcome = (r: RpcResult<QuotaGrant>) => (r.ok ? "ok" : r.error.quota);
  /** The threads holding an admission, as the object's rows say. */
  const heldIn = (sql: ReturnType<typeof sqlOf>) =>
    sql<{ thread_id: string }>`SELECT thread_id FROM tenant_admissions ORDER BY thread_id`
      .toArray()
      .map((row) => row.thread_id);

  it("a slot per holder: at the limit it asks the others, oldest first, and admits when one gives its slot back", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const { admissions, asked } = admissionsOver(sql, clock, { a: kept(), c: kept() });
      const max = { max_running_turns: 2 };
      const steps = [
        outcome(await admissions.admit(ask("a", max), () => 0)),
        outcome(await admissions.admit(ask("b", max), () => 0)),
      ];
      // The holder's own next admission never counts against it, and asks nobody.
      steps.push(outcome(await admissions.admit(ask("a", max), () => 0)));
      const askedBefore = [...asked];
      // c at the limit: a runs a task (keeps its slot), b is idle and releases.
      steps.push(outcome(await admissions.admit(ask("c", max), () => 0)));
      const askedForC = asked.splice(0);
      // d: both holders (a, c) run.
      steps.push(outcome(await admissions.admit(ask("d", max), () => 0)));
      return { steps, askedBefore, askedForC, askedForD: asked, holders: heldIn(sql) };
    });
    expect(result).toEqual({
      steps: ["ok", "ok", "ok", "ok", "max_running_turns"],
      askedBefore: [],
      askedForC: ["b", "a"],
      askedForD: ["a", "c"],
      holders: ["a", "c"],
    });
  });

  it("asks a batch of holders at a time, and stops once there is room", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const { admissions, asked } = admissionsOver(sql, clock);
      const max = { max_running_turns: RECLAIM_PARALLEL + 4 };
      for (let i = 0; i < RECLAIM_PARALLEL + 4; i++) {
        clock.at += 1;
        await admissions.admit(ask(`h${i}`, max), () => 0);
      }
      const admitted = await admissions.admit(ask("late", max), () => 0);
      return { admitted: admitted.ok, asked, holders: heldIn(sql).length };
    });
    expect(result).toEqual({
      admitted: true,
      asked: Array.from({ length: RECLAIM_PARALLEL }, (_, i) => `h${i}`),
      // The whole first batch released (every holder here is idle); the rest were not asked.
      holders: 4 + 1,
    });
  });

  it("a release ends the hold it names, never a newer one; a refusal drops the hold the asker held, never a newer one", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const { admissions } = admissionsOver(sql, clock, { b: kept() });
      const two = { max_running_turns: 2 };
      const grantOf = async (req: GrantQuotaRequest) => {
        clock.at += 1;
        const r = await admissions.admit(req, () => 0);
        if (!r.ok) throw new Error(`not admitted: ${r.error.detail}`);
        return r.value.grant;
      };
      const first = await grantOf(ask("a", two));
      const second = await grantOf(ask("a", two));
      admissions.release({ threadId: "a", incarnation: null, grant: first, usage: [] });
      const afterOld = heldIn(sql);
      admissions.release({ threadId: "a", incarnation: null, grant: second, usage: [] });
      const afterNew = heldIn(sql);
      const held = await grantOf(ask("a", two));
      await grantOf(ask("b", two));
      // The quota is down to one: a, asking with its grant, is refused (b runs), and its hold goes.
      const refused = outcome(
        await admissions.admit(ask("a", { max_running_turns: 1 }, held), () => 0),
      );
      const afterRefusal = heldIn(sql);
      // A request that asked with an older grant than the one now held leaves the newer one.
      await grantOf(ask("a", two));
      const stale = outcome(
        await admissions.admit(ask("a", { max_running_turns: 1 }, held), () => 0),
      );
      return {
        grew: second > first,
        afterOld,
        afterNew,
        refused,
        afterRefusal,
        stale,
        holders: heldIn(sql),
      };
    });
    expect(result).toEqual({
      grew: true,
      afterOld: ["a"],
      afterNew: [],
      refused: "max_running_turns",
      afterRefusal: ["b"],
      stale: "max_running_turns",
      holders: ["a", "b"],
    });
  });

  it("shares: the reservation or a quarter of the rest; counted usage settles them; shares out are asked back before a refusal", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const answers: Record<string, YieldAnswer> = { a: kept(3), d: undefined };
      const { admissions, asked } = admissionsOver(sql, clock, answers);
      const day = { tokens_per_day: 100 };
      let used = 0;
      const share = async (threadId: string, tokens: number) => {
        clock.at += 1;
        const r = await admissions.admit(ask(threadId, day, 0, tokens), () => used);
        return r.ok ? r.value.tokens : { quota: r.error.quota, retry: r.error.retryAfterSeconds };
      };
      const shares = [await share("a", 10), await share("b", 10), await share("c", 10)];
      const askedEarly = asked.splice(0);
      // The ledger counts what a, b and c spent (and 12 tokens of others): no longer reserved.
      used = 60;
      admissions.settle("a", 20);
      admissions.settle("b", 18);
      admissions.settle("c", 10);
      // 9 reserved, 31 left: d needs 35, and gets it once a (running: 3 more) and c (idle)
      // answered; b, whose share is spent, is not asked.
      const d = await share("d", 35);
      const askedForD = asked.splice(0);
      // e needs 10 of the 2 left: a still runs and d cannot be reached.
      const e = await share("e", 10);
      const askedForE = asked.splice(0);
      // Once a and d are done, nothing is reserved: a task past what is left runs alone, with
      // exactly its reservation, and nothing else is admitted meanwhile.
      admissions.release({
        threadId: "a",
        incarnation: null,
        grant: Number.MAX_SAFE_INTEGER,
        usage: [],
      });
      answers.d = RELEASED;
      const alone = await share("e", 500);
      answers.e = kept(500);
      const meanwhile = await share("f", 1);
      used = 100;
      const spent = await admissions.admit(ask("g", day, 0, 1), () => used);
      return {
        shares,
        askedEarly,
        d,
        askedForD,
        e,
        askedForE,
        alone,
        meanwhile,
        spent: spent.ok
          ? "ok"
          : { quota: spent.error.quota, tomorrow: (spent.error.retryAfterSeconds ?? 0) > 3600 },
      };
    });
    const reserved = { quota: "tokens_per_day", retry: RESERVED_RETRY_AFTER_S };
    expect(result).toEqual({
      shares: [25, 18, 14],
      askedEarly: [],
      d: 35,
      askedForD: ["a", "c"],
      e: reserved,
      askedForE: ["a", "d"],
      alone: 500,
      meanwhile: reserved,
      spent: { quota: "tokens_per_day", tomorrow: true },
    });
  });

  it("takes the entries an admission, a release and a holder's answer carry, before the hold changes", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const usage = [
        {
          incarnation: "i",
          seq: 1,
          turn_id: "t",
          model: "m",
          day: "2026-12-01",
          first_of_turn: true,
          input_tokens: 5,
          cached_input_tokens: 0,
          output_tokens: 1,
          reasoning_tokens: 0,
        },
      ];
      const { admissions, taken } = admissionsOver(sql, clock, {
        a: { released: true, reserved: 0, usage },
      });
      const day = { tokens_per_day: 100 };
      await admissions.admit({ ...ask("a", day, 0, 60), usage }, () => 0);
      await admissions.admit({ ...ask("b", day, 0, 60) }, () => 0);
      admissions.release({
        threadId: "b",
        incarnation: null,
        grant: Number.MAX_SAFE_INTEGER,
        usage,
      });
      return { taken, holders: heldIn(sql) };
    });
    // a's own request, then a's answer when b needed its share, then b's release.
    expect(result).toEqual({ taken: ["a:1", "a:1", "b:1"], holders: [] });
  });

  it("checks the day's tokens again after asking for a slot: pushes land meanwhile", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      let used = 0;
      const admissions = new QuotaGrants({
        sql,
        clock,
        yieldOf: async () => {
          // While the holder is asked, a push brings the tokens the day had left.
          used = 100;
          return RELEASED;
        },
        take: () => {},
      });
      const both = { max_running_turns: 1, tokens_per_day: 100 };
      const first = await admissions.admit(ask("a", both), () => used);
      const second = await admissions.admit(ask("b", both), () => used);
      return { first: outcome(first), second: outcome(second), held: heldIn(sql) };
    });
    expect(result).toEqual({ first: "ok", second: "tokens_per_day", held: [] });
  });

  it("a new instance knows every hold still out", async () => {
    const result = await withTenantStorage(async ({ sql, clock }) => {
      const before = admissionsOver(sql, clock).admissions;
      const granted = await before.admit(
        ask("a", { max_running_turns: 1, tokens_per_day: 80 }),
        () => 0,
      );
      const { admissions: after, asked } = admissionsOver(sql, clock, { a: kept() });
      const refused = await after.admit(ask("b", { max_running_turns: 1 }), () => 0);
      clock.at += 1;
      const later = await after.admit(ask("a", { max_running_turns: 1 }), () => 0);
      return {
        holders: heldIn(sql),
        refused: outcome(refused),
        asked,
        grew: granted.ok && later.ok && later.value.grant > granted.value.grant,
      };
    });
    expect(result).toEqual({
      holders: ["a"],
      refused: "max_running_turns",
      asked: ["a"],
      grew: true,
    });
  });
});

describe("UsageRollup", () => {
  const entry = (
    incarnation: string,
    seq: number,
    extra: Partial<LedgerEntry> = {},
  ): LedgerEntry => ({
    incarnation,
    seq,
    turn_id: `turn_${seq}`,
    model: "m",
    day: "2026-12-01",
    first_of_turn: true,
    input_tokens: 10,
    cached_input_tokens: 1,
    output_tokens: 2,
    reasoning_tokens: 0,
    ...extra,
  });

  it("takes each entry once, by incarnation then seq, and a later incarnation starts over", async () => {
    const result = await withTenantStorage(({ sql }) => {
      const counted: [string, number][] = [];
      const usage = new UsageRollup(sql, (threadId, tokens) => counted.push([threadId, tokens]));
      const A = "2026-12-01T00:00:00.000Z";
      const B = "2026-12-01T01:00:00.000Z";
      const marks = [
        usage.apply("t", [entry(A, 3), entry(A, 5)]),
        usage.apply("t", [entry(A, 5), entry(A, 3)]),
        usage.apply("t", [entry(A, 7, { first_of_turn: false })]),
        usage.apply("t", [entry(B, 2, { model: "n" })]),
        usage.apply("t", [entry(A, 9)]),
        usage.apply("t", []),
      ];
      const byModel = usage.query({ group_by: "model", limit: 10 }, Date.UTC(2026, 11, 1));
      return {
        marks,
        byModel: byModel.ok ? byModel.value.data : byModel,
        tokens: usage.tokensOn("2026-12-01"),
        counted,
      };
    });
    expect(result.marks).toEqual([
      { incarnation: "2026-12-01T00:00:00.000Z", seq: 5 },
      { incarnation: "2026-12-01T00:00:00.000Z", seq: 5 },
      { incarnation: "2026-12-01T00:00:00.000Z", seq: 7 },
      { incarnation: "2026-12-01T01:00:00.000Z", seq: 2 },
      { incarnation: "2026-12-01T01:00:00.000Z", seq: 2 },
      { incarnation: "2026-12-01T01:00:00.000Z", seq: 2 },
    ]);
    const bucket = (model: string, n: number, turns: number) => ({
      object: "usage_bucket",
      bucket: model,
      input_tokens: 10 * n,
      cached_input_tokens: n,
      output_tokens: 2 * n,
      reasoning_tokens: 0,
      requests: n,
      turns,
    });
    expect(result.byModel).toEqual([bucket("m", 3, 2), bucket("n", 1, 1)]);
    expect(result.tokens).toBe(48);
    // Each apply that took entries tells what they counted; one that took none, nothing.
    expect(result.counted).toEqual([
      ["t", 24],
      ["t", 12],
      ["t", 12],
    ]);
  });

  it("answers a range by UTC day, start included, end excluded, with the default range", async () => {
    const result = await withTenantStorage(({ sql }) => {
      const usage = new UsageRollup(sql);
      const A = "2026-12-01T00:00:00.000Z";
      usage.apply("t", [
        entry(A, 1, { day: "2026-10-01" }),
        entry(A, 2, { day: "2026-11-20" }),
        entry(A, 3, { day: "2026-12-01" }),
      ]);
      const days = (q: Partial<{ start: string; end: string }>) => {
        const page = usage.query({ group_by: "day", limit: 10, ...q }, Date.UTC(2026, 11, 1, 12));
        return page.ok ? page.value.data.map((b) => b.bucket) : page;
      };
      return {
        defaults: days({}),
        range: days({ start: "2026-11-20", end: "2026-12-01" }),
        all: days({ start: "2026-01-01", end: "2027-01-01" }),
      };
    });
    expect(result).toEqual({
      defaults: ["2026-11-20", "2026-12-01"],
      range: ["2026-11-20"],
      all: ["2026-10-01", "2026-11-20", "2026-12-01"],
    });
  });
});
