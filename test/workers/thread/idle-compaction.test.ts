/**
 * Idle compaction (design §14, `durable-objects/thread/idle-compaction.ts`): a thread left idle
 * after a model request is compacted by the object's alarm shortly before its model's prompt
 * cache expires. The object runs on the real clock, so a test brings the stored due time to now
 * (as if the thread had been idle that long) and then runs the alarm.
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  IDLE_COMPACTION_KEY,
  type IdleCompactionDue,
} from "../../../durable-objects/thread/idle-compaction.ts";
import { MetaStore } from "../../../durable-objects/thread/storage/meta-store.ts";
import { sqlOf } from "../../../durable-objects/thread/storage/sql.ts";
import { TurnQueue } from "../../../durable-objects/thread/tasks/turn-queue.ts";
import { api, json, newThreadId, post, readSse, threadStub, untilRunning } from "../helpers/api.ts";
import { createHook, signedDelivery } from "../helpers/hooks.ts";
import { answerEvents, responsesStream } from "../helpers/openai.ts";
import { receiver } from "../helpers/receiver.ts";
import { ADMIN_KEY, tenantWithKey, threadObjectOf } from "../helpers/tenancy.ts";
import { createThread, type Turn, turn, until, untilTurnStatus } from "../helpers/turns.ts";
import {
  createEndpoint,
  thread as tenantThread,
  turn as tenantTurn,
  until as untilDelivered,
  verified,
} from "../helpers/webhooks.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

/** Compacts once idle 60 s with at least 2,000 tokens of context. */
const IDLE = { after_idle_s: 60, min_context_tokens: 2_000 };
/** About 5,000 tokens of input: a context above the threshold. */
const LARGE = `remember this: ${"lorem ipsum dolor sit amet ".repeat(700)}`;

type Stub = ReturnType<typeof threadStub>;
type ThreadBody = { last_turn_id?: string; turn_count: number };

const metaOf = (state: DurableObjectState) => new MetaStore(sqlOf(state.storage.sql));

/** The scheduled idle compaction, as stored. */
const scheduledOf = (stub: Stub) =>
  runInDurableObject(
    stub,
    (_, state) => metaOf(state).get<IdleCompactionDue | null>(IDLE_COMPACTION_KEY) ?? undefined,
  );

/** Stores `due` as the scheduled idle compaction. */
const schedule = (stub: Stub, due: IdleCompactionDue) =>
  runInDurableObject(stub, (_, state) => metaOf(state).put(IDLE_COMPACTION_KEY, due));

/** Makes the scheduled idle compaction due now, as if the thread had been idle that long. */
async function bringDue(stub: Stub): Promise<void> {
  const scheduled = await scheduledOf(stub);
  if (!scheduled) throw new Error("no idle compaction is scheduled");
  await schedule(stub, { ...scheduled, due_ms: Date.now() - 1 });
}

const threadOf = async (id: string) => json<ThreadBody>(await api("GET", `/v1/threads/${id}`));
const turnOf = async (id: string, turnId: string) =>
  json<Turn & { kind: string; trigger?: string }>(
    await api("GET", `/v1/threads/${id}/turns/${turnId}`),
  );

/** The thread's newest turn once it has ended (not in progress). */
async function lastEndedTurn(id: string) {
  let last: Awaited<ReturnType<typeof turnOf>> | undefined;
  await vi.waitUntil(
    async () => {
      const lastId = (await threadOf(id)).last_turn_id;
      last = lastId === undefined ? undefined : await turnOf(id, lastId);
      return last !== undefined && last.status !== "in_progress";
    },
    { timeout: 5_000, interval: 20 },
  );
  if (!last) throw new Error("no turn");
  return last;
}

describe("idle compaction", () => {
  it("is scheduled shortly before the model's cache expires, and compacts a large idle thread as a compaction turn with trigger idle", async () => {
    const id = newThreadId();
    const stub = threadStub(id);
    await createThread(id, { idle_compaction: { after_idle_s: 1, min_context_tokens: 2_000 } });
    const before = Date.now();
    const large = await turn(id, LARGE);
    const after = Date.now();
    // spindle-local stands for a 5-minute cache: due 300 s − 30 s after the request's start.
    const scheduled = await scheduledOf(stub);
    expect(scheduled?.after_turn).toBe(large.id);
    expect(scheduled?.due_ms).toBeGreaterThanOrEqual(before + 270_000);
    expect(scheduled?.due_ms).toBeLessThanOrEqual(after + 270_000);

    // Early, the alarm only keeps it scheduled.
    await runDurableObjectAlarm(stub);
    expect((await threadOf(id)).last_turn_id).toBe(large.id);
    expect(await scheduledOf(stub)).toEqual(scheduled);

    await bringDue(stub);
    const stream = await api("GET", `/v1/threads/${id}/events`);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const frames = await readSse(stream, until("turn.completed"));
    const completed = frames.find((f) => f.event === "turn.completed");
    expect(JSON.parse(completed?.data ?? "{}")).toMatchObject({
      type: "turn.completed",
      data: { kind: "compaction", trigger: "idle", status: "completed" },
    });
    const compaction = await lastEndedTurn(id);
    expect(compaction).toMatchObject({ kind: "compaction", trigger: "idle", status: "completed" });
    expect(compaction.id).not.toBe(large.id);
    // Done once: an idle compaction schedules none.
    expect(await scheduledOf(stub)).toBeUndefined();
    await runDurableObjectAlarm(stub);
    expect((await threadOf(id)).last_turn_id).toBe(compaction.id);
    // The rollout records the trigger: a restore from R2 rebuilds the same turn.
    await json(await api("POST", `/v1/threads/${id}/restore`));
    expect(await turnOf(id, compaction.id)).toEqual(compaction);
  });

  it("waits after_idle_s when that is later than the cache's expiry", async () => {
    const id = newThreadId();
    const stub = threadStub(id);
    await createThread(id, { idle_compaction: { after_idle_s: 600, min_context_tokens: 2_000 } });
    await turn(id, LARGE);
    const ended = Date.now();
    const scheduled = await scheduledOf(stub);
    expect(scheduled?.due_ms).toBeGreaterThanOrEqual(ended - 5_000 + 600_000);
    expect(scheduled?.due_ms).toBeLessThanOrEqual(ended + 600_000);
  });

  it("does not compact a context below min_context_tokens", async () => {
    const id = newThreadId();
    const stub = threadStub(id);
    await createThread(id, { idle_compaction: IDLE });
    const small = await turn(id, "hi");
    await bringDue(stub);
    await runDurableObjectAlarm(stub);
    expect((await threadOf(id)).last_turn_id).toBe(small.id);
    // Tried once: not again at every alarm.
    expect(await scheduledOf(stub)).toBeUndefined();
  });

  it("is off without idle_compaction, and a turn's override of null turns it off", async () => {
    const id = newThreadId();
    const stub = threadStub(id);
    await createThread(id);
    await turn(id, LARGE);
    expect(await scheduledOf(stub)).toBeUndefined();
    await turn(id, "on", { overrides: { idle_compaction: IDLE } });
    expect(await scheduledOf(stub)).toBeDefined();
    await turn(id, "off", { overrides: { idle_compaction: null } });
    expect(await scheduledOf(stub)).toBeUndefined();
    const config = (
      await json<{ config: Record<string, unknown> }>(await api("GET", `/v1/threads/${id}`))
    ).config;
    // Kept as null: off even where the tenant has a default.
    expect(config.idle_compaction).toBeNull();
  });

  it("a compaction's end cancels it: the context is compacted already", async () => {
    const id = newThreadId();
    const stub = threadStub(id);
    await createThread(id, { idle_compaction: IDLE });
    await turn(id, LARGE);
    expect(await scheduledOf(stub)).toBeDefined();
    await json(await post(`/v1/threads/${id}/compact`));
    expect(await scheduledOf(stub)).toBeUndefined();
  });

  it("does not compact while a turn runs; that turn's end schedules it again", async () => {
    const id = newThreadId();
    const stub = threadStub(id);
    await createThread(id, { idle_compaction: IDLE });
    await turn(id, LARGE);
    await bringDue(stub);
    const slow = turn(id, "/slow 100 still working");
    await untilRunning(id);
    await runDurableObjectAlarm(stub);
    const done = await slow;
    expect(done.status).toBe("completed");
    expect((await lastEndedTurn(id)).id).toBe(done.id);
    const scheduled = await scheduledOf(stub);
    expect(scheduled?.after_turn).toBe(done.id);
    expect(scheduled?.due_ms).toBeGreaterThan(Date.now());
  });

  it("does not compact while a turn is queued: the queued turn runs instead", async () => {
    const id = newThreadId();
    const stub = threadStub(id);
    await createThread(id, { idle_compaction: IDLE });
    await turn(id, LARGE);
    await bringDue(stub);
    // A queue left behind by a lost instance: the new instance's alarm starts it.
    const queuedId = "turn_01900000000000000000000000000000";
    await runInDurableObject(stub, (_, state) => {
      new TurnQueue(sqlOf(state.storage.sql)).push({
        turnId: queuedId,
        content: [{ type: "input_text", text: "queued" }],
      });
    });
    await evictDurableObject(stub);
    await runDurableObjectAlarm(stub);
    await untilTurnStatus(id, queuedId, "completed");
    expect((await turnOf(id, queuedId)).kind).toBe("turn");
    expect((await lastEndedTurn(id)).id).toBe(queuedId);
    expect((await scheduledOf(stub))?.after_turn).toBe(queuedId);
  });

  it("does not compact a turn waiting on a client tool (requires_action)", async () => {
    const id = newThreadId();
    const stub = threadStub(id);
    await createThread(id, { idle_compaction: IDLE, tools: [{ name: "lookup" }] });
    await turn(id, LARGE);
    expect(await scheduledOf(stub)).toBeDefined();
    const paused = await turn(id, "/call lookup {}");
    expect(paused.status).toBe("requires_action");
    // Waiting on a tool is not idle: nothing is scheduled.
    expect(await scheduledOf(stub)).toBeUndefined();
    // Even one scheduled for it does not compact it.
    await schedule(stub, { due_ms: Date.now() - 1, after_turn: paused.id });
    await runDurableObjectAlarm(stub);
    expect(await lastEndedTurn(id)).toMatchObject({ id: paused.id, status: "requires_action" });
  });

  it("a new turn before the due time reschedules it; the earlier schedule compacts nothing", async () => {
    const id = newThreadId();
    const stub = threadStub(id);
    await createThread(id, { idle_compaction: IDLE });
    const first = await turn(id, LARGE);
    const earlier = await scheduledOf(stub);
    const second = await turn(id, "one more");
    const later = await scheduledOf(stub);
    expect(later?.after_turn).toBe(second.id);
    expect(later?.due_ms).toBeGreaterThanOrEqual(earlier?.due_ms ?? Number.POSITIVE_INFINITY);
    // A schedule left from before the second turn, come due: stale, it does nothing.
    await schedule(stub, { due_ms: Date.now() - 1, after_turn: first.id });
    await runDurableObjectAlarm(stub);
    expect((await threadOf(id)).last_turn_id).toBe(second.id);
  });

  it("survives the instance: a new instance's alarm compacts", async () => {
    const id = newThreadId();
    const stub = threadStub(id);
    await createThread(id, { idle_compaction: IDLE });
    await turn(id, LARGE);
    await bringDue(stub);
    await evictDurableObject(stub);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await lastEndedTurn(id)).toMatchObject({ kind: "compaction", trigger: "idle" });
  });

  it("never fires for a model whose cache has no known lifetime (prompt_cache_ttl_s null)", async () => {
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input) => {
      const url = String(input instanceof Request ? input.url : input);
      if (!url.startsWith("https://openai.test/")) throw new Error(`unexpected fetch ${url}`);
      return new Response(responsesStream(answerEvents("noted")), {
        headers: { "content-type": "text/event-stream" },
      });
    });
    const id = newThreadId();
    const stub = threadStub(id);
    await createThread(id, { model: "gpt-uncached", idle_compaction: IDLE });
    expect((await turn(id, LARGE)).status).toBe("completed");
    expect(await scheduledOf(stub)).toBeUndefined();
    // The same thread on a model with a lifetime schedules one.
    await turn(id, "switch", { overrides: { model: "gpt-test" } });
    expect(await scheduledOf(stub)).toBeDefined();
  });

  it("emits thread.compacted with trigger idle to the tenant's endpoints", async () => {
    const { tenant, key } = await tenantWithKey();
    const endpoint = await createEndpoint(key, { events: ["thread.compacted"] });
    const received = receiver();
    const id = newThreadId();
    await tenantThread(key)(id, { idle_compaction: IDLE });
    await tenantTurn(key)(id, LARGE);
    const stub = await threadObjectOf(tenant.id, id);
    await bringDue(stub);
    await runDurableObjectAlarm(stub);
    await untilDelivered(key, endpoint.id, (d) => d[0]?.status === "delivered");
    const [event] = received.map((r) => verified(endpoint.secret, r));
    expect(event).toMatchObject({
      type: "thread.compacted",
      data: { thread_id: id, status: "completed", trigger: "idle" },
    });
  });

  it("refuses an invalid idle_compaction with 400, naming the field", async () => {
    const id = newThreadId();
    for (const idle of [
      { after_idle_s: 0, min_context_tokens: 1 },
      { after_idle_s: 1.5, min_context_tokens: 1 },
      { after_idle_s: 60, min_context_tokens: -1 },
      { after_idle_s: 86_401, min_context_tokens: 1 },
      { after_idle_s: 60 },
      { after_idle_s: 60, min_context_tokens: 1, every: 2 },
      "60s",
    ]) {
      const res = await post("/v1/threads", { id, idle_compaction: idle });
      expect(await json(res, 400)).toMatchObject({
        code: "invalid_request",
        errors: [{ path: expect.stringMatching(/^\/idle_compaction/) }],
      });
    }
    await createThread(id);
    const override = await post(`/v1/threads/${id}/turns`, {
      input: "hi",
      overrides: { idle_compaction: { after_idle_s: 0, min_context_tokens: 1 } },
    });
    expect(await json(override, 400)).toMatchObject({
      code: "invalid_request",
      errors: [{ path: expect.stringMatching(/^\/overrides\/idle_compaction/) }],
    });
  });
});

describe("a tenant's default idle compaction", () => {
  const patchTenant = (tenant: string, body: unknown) =>
    api("PATCH", `/v1/admin/tenants/${tenant}`, body, ADMIN_KEY);

  it("is shown on the tenant, set on create and patch, and refused when invalid", async () => {
    const { tenant } = await tenantWithKey();
    expect(tenant).toMatchObject({ thread_defaults: { idle_compaction: null } });
    const set = await json(
      await patchTenant(tenant.id, { thread_defaults: { idle_compaction: IDLE } }),
    );
    expect(set).toMatchObject({ thread_defaults: { idle_compaction: IDLE } });
    // A patch without thread_defaults keeps them.
    expect(await json(await patchTenant(tenant.id, { name: "acme" }))).toMatchObject({
      thread_defaults: { idle_compaction: IDLE },
    });
    const got = await json(
      await api("GET", `/v1/admin/tenants/${tenant.id}`, undefined, ADMIN_KEY),
    );
    expect(got).toMatchObject({ thread_defaults: { idle_compaction: IDLE } });
    for (const idle of [{ after_idle_s: 0, min_context_tokens: 1 }, { after_idle_s: 60 }]) {
      const refused = await patchTenant(tenant.id, { thread_defaults: { idle_compaction: idle } });
      expect(await json(refused, 400)).toMatchObject({
        code: "invalid_request",
        errors: [{ path: expect.stringMatching(/^\/thread_defaults\/idle_compaction/) }],
      });
    }
    const unknown = await patchTenant(tenant.id, { thread_defaults: { auto_compact: true } });
    expect(await json(unknown, 400)).toMatchObject({ code: "invalid_request" });
    // Nothing refused was stored.
    const after = await json(
      await api("GET", `/v1/admin/tenants/${tenant.id}`, undefined, ADMIN_KEY),
    );
    expect(after).toMatchObject({ thread_defaults: { idle_compaction: IDLE } });
  });

  it("compacts a large idle thread that sets nothing of its own", async () => {
    const { tenant, key } = await tenantWithKey({ thread_defaults: { idle_compaction: IDLE } });
    const id = newThreadId();
    await tenantThread(key)(id);
    const large = await tenantTurn(key)(id, LARGE);
    const stub = await threadObjectOf(tenant.id, id);
    expect(await scheduledOf(stub)).toMatchObject({ after_turn: large.id });
    await bringDue(stub);
    await runDurableObjectAlarm(stub);
    // The newest turn once it has ended.
    const newest = await vi.waitUntil(
      async () => {
        const turns = await json<{
          data: { id: string; kind: string; trigger?: string; status: string }[];
        }>(await api("GET", `/v1/threads/${id}/turns`, undefined, key));
        const first = turns.data[0];
        return first?.id !== large.id && first?.status !== "in_progress" ? first : undefined;
      },
      { timeout: 5_000, interval: 20 },
    );
    expect(newest).toMatchObject({ kind: "compaction", trigger: "idle", status: "completed" });
  });

  it("yields to the thread's own setting, and a thread's null turns it off", async () => {
    const { tenant, key } = await tenantWithKey({ thread_defaults: { idle_compaction: IDLE } });
    const own = newThreadId();
    await tenantThread(key)(own, {
      idle_compaction: { after_idle_s: 3_000, min_context_tokens: 2_000 },
    });
    await tenantTurn(key)(own, LARGE);
    const ended = Date.now();
    // Its own after_idle_s (3,000 s, past the 5-minute cache), not the default's 60 s.
    const scheduled = await scheduledOf(await threadObjectOf(tenant.id, own));
    expect(scheduled?.due_ms).toBeGreaterThanOrEqual(ended - 5_000 + 3_000_000);

    const off = newThreadId();
    await tenantThread(key)(off, { idle_compaction: null });
    await tenantTurn(key)(off, LARGE);
    expect(await scheduledOf(await threadObjectOf(tenant.id, off))).toBeUndefined();
  });

  it("applies to a turn a signed webhook started: the hook's tenant policy carries it", async () => {
    const { tenant, key } = await tenantWithKey({ thread_defaults: { idle_compaction: IDLE } });
    const hook = await createHook("standard", { input: "{{body.text}}" }, key);
    const accepted = await json<{ turn_id: string; thread_id: string }>(
      await signedDelivery(hook, { thread: "idle", text: LARGE }),
      202,
    );
    const turnUrl = `/v1/threads/${accepted.thread_id}/turns/${accepted.turn_id}`;
    await vi.waitUntil(
      async () =>
        (await json<Turn>(await api("GET", turnUrl, undefined, key))).status === "completed",
      { timeout: 5_000, interval: 20 },
    );
    const stub = await threadObjectOf(tenant.id, accepted.thread_id);
    await vi.waitUntil(async () => (await scheduledOf(stub))?.after_turn === accepted.turn_id, {
      timeout: 5_000,
      interval: 20,
    });
  });

  it("a change of the default reaches an existing thread at its next turn", async () => {
    const { tenant, key } = await tenantWithKey();
    const id = newThreadId();
    await tenantThread(key)(id);
    await tenantTurn(key)(id, LARGE);
    const stub = await threadObjectOf(tenant.id, id);
    expect(await scheduledOf(stub)).toBeUndefined();
    await json(await patchTenant(tenant.id, { thread_defaults: { idle_compaction: IDLE } }));
    const next = await tenantTurn(key)(id, "and this");
    expect(await scheduledOf(stub)).toMatchObject({ after_turn: next.id });
    await json(await patchTenant(tenant.id, { thread_defaults: { idle_compaction: null } }));
    await tenantTurn(key)(id, "and that");
    expect(await scheduledOf(stub)).toBeUndefined();
  });
});
