import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { afterEach, describe, expect, it, type MockInstance, vi } from "vitest";
import { api, importRollout, json, newThreadId, readSse } from "../helpers/api.ts";
import { responsesStream } from "../helpers/openai.ts";
import { ADMIN_KEY, createKey, tenantWithKey, threadObjectOf } from "../helpers/tenancy.ts";

/*
 * Model-based test of the usage ledger (design §11, §15 invariant 13): random sequences of what
 * clients and the platform mix (turns on the local and the remote model, tool calls and their
 * outputs, manual compactions, provider failures, interrupted and lost turns, evictions, forks,
 * imports, rollbacks, restores, deletes and re-creates, keyed retries, pushes to the tenant that
 * fail, alarms, the tenant itself deleted and its id created again). After each step the thread's own totals equal the sum of its own turns' usage;
 * at checks (and at the end), with pushes working, the tenant's ledger equals those sums for every
 * thread id ever used, including threads deleted since, and its day and model groupings sum to the
 * same totals.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

const COUNTS = [
  "input_tokens",
  "cached_input_tokens",
  "output_tokens",
  "reasoning_tokens",
  "requests",
  "turns",
] as const;
type Counts = Record<(typeof COUNTS)[number], number>;
const zero = (): Counts => Object.fromEntries(COUNTS.map((c) => [c, 0])) as Counts;
const add = (a: Counts, b: Counts): Counts =>
  Object.fromEntries(COUNTS.map((c) => [c, a[c] + b[c]])) as Counts;

interface Model {
  /** Thread ids in use (index into this list), with what their earlier incarnations used. */
  ids: string[];
  pending: Map<string, { turn: string; call: string }>;
  pushesDown: boolean;
}

interface Real {
  key: string;
  tenant: string;
  /** Per thread id: the usage of its deleted incarnations, and the turns a fork or import copied. */
  deleted: Map<string, Counts>;
  inherited: Map<string, Set<string>>;
  outage: MockInstance | undefined;
}

const REMOTE_MODEL = "gpt-test";

/** The Responses stand-in: each answer reports usage of its own, with cached and reasoning tokens. */
function remoteModel(): { fail: { next: boolean } } {
  let served = 0;
  const fail = { next: false };
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input) => {
    const url = String(input instanceof Request ? input.url : input);
    if (!url.startsWith("https://openai.test/")) throw new Error(`unexpected fetch ${url}`);
    if (fail.next) {
      fail.next = false;
      return new Response(JSON.stringify({ error: { message: "bad request" } }), { status: 400 });
    }
    served += 1;
    const text = `Upstream answer ${served}`;
    const events = [
      { type: "response.output_text.delta", delta: text },
      {
        type: "response.output_item.done",
        item: {
          type: "message",
          id: `msg_${served}`,
          role: "assistant",
          content: [{ type: "output_text", text }],
        },
      },
      {
        type: "response.completed",
        response: {
          usage: {
            input_tokens: 40 + served,
            input_tokens_details: { cached_tokens: served % 7 },
            output_tokens: 2 + (served % 4),
            output_tokens_details: { reasoning_tokens: served % 3 },
            total_tokens: 42 + served + (served % 4),
          },
        },
      },
    ];
    return new Response(responsesStream(events), {
      headers: { "content-type": "text/event-stream" },
    });
  });
  return { fail };
}

const call = (
  r: Real,
  method: string,
  path: string,
  body?: unknown,
  extra?: Record<string, string>,
) => api(method, path, body, r.key, extra);
const threadObject = (r: Real, id: string) => threadObjectOf(r.tenant, id);

/** The task ids of a thread's rollout, and its own provider requests (token_count lines). */
async function rolloutOf(r: Real, id: string) {
  const text = await (await call(r, "GET", `/v1/threads/${id}/rollout`)).text();
  const lines = text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as { type: string; payload: Record<string, unknown> });
  const copied = Number(lines[0]?.payload.spindle_copied_lines ?? 0);
  const own = lines.slice(1 + copied);
  return {
    tasks: lines.flatMap((l) =>
      l.type === "event_msg" && l.payload.type === "task_started"
        ? [String(l.payload.turn_id)]
        : [],
    ),
    ownRequests: own.filter(
      (l) => l.type === "event_msg" && l.payload.type === "token_count" && l.payload.info !== null,
    ).length,
  };
}

/** A thread's own usage as its turns report it, and as the thread itself reports it. */
async function ownUsage(
  r: Real,
  id: string,
): Promise<{ turns: Counts; thread: Counts } | undefined> {
  const res = await call(r, "GET", `/v1/threads/${id}`);
  if (res.status === 404) return undefined;
  const { usage } = await json<{ usage: Counts & { cache_hit_ratio: number | null } }>(res);
  const { cache_hit_ratio: ratio, ...thread } = usage;
  expect(ratio).toBe(ratioOf(thread));
  const { tasks, ownRequests } = await rolloutOf(r, id);
  const inherited = r.inherited.get(id) ?? new Set();
  let sum = zero();
  for (const turn of tasks.filter((t) => !inherited.has(t))) {
    const got = await json<{ usage: Record<string, number> | null }>(
      await call(r, "GET", `/v1/threads/${id}/turns/${turn}`),
    );
    if (got.usage === null) continue;
    sum = add(sum, {
      input_tokens: got.usage.input_tokens ?? 0,
      cached_input_tokens: got.usage.cached_input_tokens ?? 0,
      output_tokens: got.usage.output_tokens ?? 0,
      reasoning_tokens: got.usage.reasoning_output_tokens ?? 0,
      requests: 0,
      turns: 1,
    });
  }
  sum.requests = ownRequests;
  return { turns: sum, thread };
}

/** The `cache_hit_ratio` the API derives from counts. */
function ratioOf(c: Counts): number | null {
  return c.input_tokens > 0 ? Math.min(1, c.cached_input_tokens / c.input_tokens) : null;
}

/** What must hold after every step: each thread's totals are its turns' usage. */
async function checkThreads(m: Model, r: Real): Promise<void> {
  for (const id of m.ids) {
    const usage = await ownUsage(r, id);
    if (usage) expect({ id, ...usage.thread }).toEqual({ id, ...usage.turns });
  }
}

/** With pushes working: the tenant's ledger is every thread's totals, deleted ones included. */
async function checkLedger(m: Model, r: Real): Promise<void> {
  const expected = new Map<string, Counts>();
  for (const id of new Set([...m.ids, ...r.deleted.keys()])) {
    const now = await ownUsage(r, id);
    const total = add(r.deleted.get(id) ?? zero(), now?.thread ?? zero());
    if (total.requests > 0) expected.set(id, total);
  }
  const all = [...expected.values()].reduce(add, zero());
  const bucketsOf = async (group: string) =>
    (
      await json<{ data: (Counts & { bucket: string })[] }>(
        await call(r, "GET", `/v1/usage?group_by=${group}&limit=1000`),
      )
    ).data;
  const counts = ({
    bucket: _,
    object: __,
    cache_hit_ratio: ratio,
    ...rest
  }: Counts & { bucket: string; object?: string; cache_hit_ratio?: number | null }) => {
    expect(ratio).toBe(ratioOf(rest));
    return rest;
  };
  await vi.waitFor(
    async () => {
      for (const id of new Set([...m.ids, ...r.deleted.keys()])) {
        await runDurableObjectAlarm(await threadObject(r, id));
      }
      const byThread = await bucketsOf("thread");
      expect(Object.fromEntries(byThread.map((b) => [b.bucket, counts(b)]))).toEqual(
        Object.fromEntries(expected),
      );
      const byModel = await bucketsOf("model");
      expect(byModel.map(counts).reduce(add, zero())).toEqual(all);
      const byDay = await bucketsOf("day");
      expect(byDay.map(counts).reduce(add, zero())).toEqual(all);
    },
    { timeout: 10_000, interval: 50 },
  );
}

abstract class Step implements fc.AsyncCommand<Model, Real> {
  constructor(readonly at: number) {}
  check(_m: Readonly<Model>): boolean {
    return true;
  }
  protected id(m: Model): string {
    return m.ids[this.at % m.ids.length] as string;
  }
  async run(m: Model, r: Real): Promise<void> {
    await this.act(m, r, this.id(m));
    await checkThreads(m, r);
  }
  abstract act(m: Model, r: Real, id: string): Promise<void>;
  abstract toString(): string;
}

class TurnStep extends Step {
  constructor(
    at: number,
    readonly remote: boolean,
  ) {
    super(at);
  }
  async act(m: Model, r: Real, id: string) {
    const model = this.remote ? REMOTE_MODEL : "spindle-local";
    const turn = await json<{ status: string }>(
      await call(r, "POST", `/v1/threads/${id}/turns`, {
        input: "hello there",
        overrides: { model },
      }),
    );
    expect(turn.status).toBe("completed");
    m.pending.delete(id);
  }
  toString = () => `turn(${this.at}, ${this.remote ? "remote" : "local"})`;
}

class FailingTurnStep extends Step {
  constructor(
    at: number,
    readonly fail: { next: boolean },
  ) {
    super(at);
  }
  async act(m: Model, r: Real, id: string) {
    this.fail.next = true;
    const turn = await json<{ status: string }>(
      await call(r, "POST", `/v1/threads/${id}/turns`, {
        input: "fail",
        overrides: { model: REMOTE_MODEL },
      }),
    );
    expect(turn.status).toBe("failed");
    m.pending.delete(id);
  }
  toString = () => `failing turn(${this.at})`;
}

class CallStep extends Step {
  async act(m: Model, r: Real, id: string) {
    const turn = await json<{ id: string; status: string; pending_calls: { call_id: string }[] }>(
      await call(r, "POST", `/v1/threads/${id}/turns`, {
        input: "/call lookup {}",
        overrides: { model: "spindle-local" },
      }),
    );
    expect(turn.status).toBe("requires_action");
    m.pending.set(id, { turn: turn.id, call: turn.pending_calls[0]?.call_id ?? "" });
  }
  toString = () => `call(${this.at})`;
}

class OutputsStep extends Step {
  override check(m: Readonly<Model>) {
    return m.pending.has(m.ids[this.at % m.ids.length] as string);
  }
  async act(m: Model, r: Real, id: string) {
    const pending = m.pending.get(id);
    if (!pending) return;
    const items = [{ type: "function_call_output", call_id: pending.call, output: "found" }];
    const turn = await json<{ status: string }>(
      await call(r, "POST", `/v1/threads/${id}/turns/${pending.turn}/outputs`, { items }),
    );
    expect(turn.status).toBe("completed");
    m.pending.delete(id);
  }
  toString = () => `outputs(${this.at})`;
}

class CompactStep extends Step {
  async act(m: Model, r: Real, id: string) {
    const turn = await json<{ status: string }>(await call(r, "POST", `/v1/threads/${id}/compact`));
    expect(turn.status).toBe("completed");
    m.pending.delete(id);
  }
  toString = () => `compact(${this.at})`;
}

/** A slow turn ended by an interrupt, or by its instance going away. */
class CutTurnStep extends Step {
  constructor(
    at: number,
    readonly how: "interrupt" | "lost",
  ) {
    super(at);
  }
  async act(m: Model, r: Real, id: string) {
    const started = await readSse(
      await call(r, "POST", `/v1/threads/${id}/turns`, {
        input: "/slow 30 slowly",
        stream: true,
        overrides: { model: "spindle-local" },
      }),
      (frames) =>
        frames.some((f) => f.event === "turn.started" && f.data.includes('"kind":"turn"')),
    );
    const turnId = (JSON.parse(started.at(-1)?.data ?? "{}") as { turn_id: string }).turn_id;
    if (this.how === "interrupt") {
      await json(await call(r, "POST", `/v1/threads/${id}/turns/${turnId}/interrupt`));
    } else {
      await runInDurableObject(await threadObject(r, id), (_i, state) => state.abort("lost")).catch(
        () => undefined,
      );
    }
    const turn = await json<{ status: string }>(
      await call(r, "GET", `/v1/threads/${id}/turns/${turnId}`),
    );
    expect(turn.status).toBe("interrupted");
    m.pending.delete(id);
  }
  toString = () => `cut turn(${this.at}, ${this.how})`;
}

class EvictStep extends Step {
  async act(_m: Model, r: Real, id: string) {
    await evictDurableObject(await threadObject(r, id));
  }
  toString = () => `evict(${this.at})`;
}

class AlarmStep extends Step {
  async act(_m: Model, r: Real, id: string) {
    await runDurableObjectAlarm(await threadObject(r, id));
  }
  toString = () => `alarm(${this.at})`;
}

class RollbackStep extends Step {
  async act(m: Model, r: Real, id: string) {
    const res = await call(r, "POST", `/v1/threads/${id}/rollback`, { turns: 1 });
    expect([200, 400]).toContain(res.status);
    await res.text();
    m.pending.delete(id);
  }
  toString = () => `rollback(${this.at})`;
}

class RestoreStep extends Step {
  async act(_m: Model, r: Real, id: string) {
    await runDurableObjectAlarm(await threadObject(r, id));
    await json(await call(r, "POST", `/v1/threads/${id}/restore`));
  }
  toString = () => `restore(${this.at})`;
}

/** A keyed turn sent twice: counted once. */
class KeyedTurnStep extends Step {
  async act(m: Model, r: Real, id: string) {
    const key = { "idempotency-key": `k-${crypto.randomUUID()}` };
    const body = { input: "keyed", overrides: { model: REMOTE_MODEL } };
    const first = await json<{ id: string }>(
      await call(r, "POST", `/v1/threads/${id}/turns`, body, key),
    );
    const again = await json<{ id: string }>(
      await call(r, "POST", `/v1/threads/${id}/turns`, body, key),
    );
    expect(again.id).toBe(first.id);
    m.pending.delete(id);
  }
  toString = () => `keyed turn twice(${this.at})`;
}

/** A fork or an import: a new thread, whose copied turns are not its own. */
class CopyStep extends Step {
  constructor(
    at: number,
    readonly how: "fork" | "import",
  ) {
    super(at);
  }
  override check(m: Readonly<Model>) {
    return m.ids.length < 4 && !m.pending.has(m.ids[this.at % m.ids.length] as string);
  }
  async act(m: Model, r: Real, id: string) {
    const copy = newThreadId();
    if (this.how === "fork") {
      await json(await call(r, "POST", `/v1/threads/${id}/fork`, { id: copy }), 201);
    } else {
      const exported = await (await call(r, "GET", `/v1/threads/${id}/rollout`)).text();
      await json(await importRollout(copy, exported, {}, { key: r.key }), 201);
    }
    r.inherited.set(copy, new Set((await rolloutOf(r, copy)).tasks));
    m.ids.push(copy);
  }
  toString = () => `${this.how}(${this.at})`;
}

/** Delete, then create again under the same id: the old usage stays in the ledger. */
class DeleteRecreateStep extends Step {
  async act(m: Model, r: Real, id: string) {
    const usage = await ownUsage(r, id);
    r.deleted.set(id, add(r.deleted.get(id) ?? zero(), usage?.thread ?? zero()));
    expect((await call(r, "DELETE", `/v1/threads/${id}`)).status).toBe(204);
    await json(await call(r, "POST", "/v1/threads", { id, tools: [{ name: "lookup" }] }), 201);
    r.inherited.delete(id);
    m.pending.delete(id);
  }
  toString = () => `delete + create(${this.at})`;
}

/**
 * The tenant deleted and its id created again (invariant 19): the new incarnation's ledger
 * starts empty, its key sees none of the old threads, and the old key is refused.
 */
class TenantRecreateStep implements fc.AsyncCommand<Model, Real> {
  check = (m: Readonly<Model>) => !m.pushesDown;
  async run(m: Model, r: Real) {
    expect(
      (await api("DELETE", `/v1/admin/tenants/${r.tenant}`, undefined, ADMIN_KEY)).status,
    ).toBe(202);
    const object = env.TENANT.get(env.TENANT.idFromName(r.tenant));
    await vi.waitFor(
      async () => {
        await runDurableObjectAlarm(object);
        expect(
          (await api("GET", `/v1/admin/tenants/${r.tenant}`, undefined, ADMIN_KEY)).status,
        ).toBe(404);
      },
      { timeout: 10_000, interval: 50 },
    );
    const oldKey = r.key;
    await json(await api("POST", "/v1/admin/tenants", { id: r.tenant }, ADMIN_KEY), 201);
    r.key = (await createKey(r.tenant)).key;
    expect((await api("GET", "/v1/threads", undefined, oldKey)).status).toBe(401);
    const listed = await json<{ data: unknown[] }>(await call(r, "GET", "/v1/threads"));
    expect(listed.data).toEqual([]);
    const usage = await json<{ data: unknown[] }>(
      await call(r, "GET", "/v1/usage?group_by=thread"),
    );
    expect(usage.data).toEqual([]);
    for (const id of m.ids) expect((await call(r, "GET", `/v1/threads/${id}`)).status).toBe(404);
    const first = newThreadId();
    await json(
      await call(r, "POST", "/v1/threads", { id: first, tools: [{ name: "lookup" }] }),
      201,
    );
    m.ids = [first];
    m.pending.clear();
    r.deleted.clear();
    r.inherited.clear();
  }
  toString = () => "delete the tenant and create its id again";
}

/**
 * Pushes to the tenant start or stop failing: not reaching it (`fails`), or applied there with
 * the answer lost on the way back (`answer lost`), so the thread pushes the same entries again.
 */
class OutageStep implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kind: "fails" | "answer lost") {}
  check = () => true;
  async run(m: Model, r: Real) {
    if (m.pushesDown) {
      r.outage?.mockRestore();
      r.outage = undefined;
    } else {
      const real = env.TENANT.getByName.bind(env.TENANT);
      r.outage = vi.spyOn(env.TENANT, "getByName").mockImplementation((name: string) => {
        const stub = real(name);
        return new Proxy(stub, {
          get: (target, prop, receiver) => {
            const value = Reflect.get(target, prop, receiver);
            if (prop !== "sync") return value;
            return async (...args: unknown[]) => {
              if (this.kind === "answer lost") {
                await (value as (...a: unknown[]) => Promise<unknown>)(...args);
              }
              throw new Error(`push: ${this.kind}`);
            };
          },
        });
      });
    }
    m.pushesDown = !m.pushesDown;
  }
  toString = () => `toggle push outage (${this.kind})`;
}

class LedgerCheckStep implements fc.AsyncCommand<Model, Real> {
  check = (m: Readonly<Model>) => !m.pushesDown;
  async run(m: Model, r: Real) {
    await checkLedger(m, r);
  }
  toString = () => "check the ledger";
}

function commands(fail: { next: boolean }) {
  const at = fc.nat({ max: 7 });
  return [
    fc.tuple(at, fc.boolean()).map(([i, remote]) => new TurnStep(i, remote)),
    at.map((i) => new FailingTurnStep(i, fail)),
    at.map((i) => new CallStep(i)),
    at.map((i) => new OutputsStep(i)),
    at.map((i) => new CompactStep(i)),
    fc
      .tuple(at, fc.constantFrom("interrupt" as const, "lost" as const))
      .map(([i, how]) => new CutTurnStep(i, how)),
    at.map((i) => new EvictStep(i)),
    at.map((i) => new AlarmStep(i)),
    at.map((i) => new RollbackStep(i)),
    at.map((i) => new RestoreStep(i)),
    at.map((i) => new KeyedTurnStep(i)),
    fc
      .tuple(at, fc.constantFrom("fork" as const, "import" as const))
      .map(([i, how]) => new CopyStep(i, how)),
    at.map((i) => new DeleteRecreateStep(i)),
    fc.constant(new TenantRecreateStep()),
    fc.constantFrom("fails" as const, "answer lost" as const).map((kind) => new OutageStep(kind)),
    fc.constant(new LedgerCheckStep()),
  ];
}

describe("the usage ledger under random operations", () => {
  it("equals the turns' usage for every thread, deleted ones included, whatever happened", async () => {
    const { fail } = remoteModel();
    await fc.assert(
      fc.asyncProperty(
        fc.commands(commands(fail), { maxCommands: 25, size: "max" }),
        async (cmds) => {
          const { tenant, key } = await tenantWithKey();
          const real: Real = {
            key,
            tenant: tenant.id,
            deleted: new Map(),
            inherited: new Map(),
            outage: undefined,
          };
          const first = newThreadId();
          await json(
            await call(real, "POST", "/v1/threads", { id: first, tools: [{ name: "lookup" }] }),
            201,
          );
          const model: Model = { ids: [first], pending: new Map(), pushesDown: false };
          try {
            await fc.asyncModelRun(() => ({ model, real }), cmds);
          } finally {
            real.outage?.mockRestore();
            real.outage = undefined;
          }
          model.pushesDown = false;
          await checkThreads(model, real);
          await checkLedger(model, real);
        },
      ),
      { numRuns: 15 },
    );
  }, 600_000);
});
