/**
 * The webhook stores of the `Tenant` object, each over a fresh tenant object's SQLite with a
 * clock the test moves: hooks and their delivery logs (`tenant/hooks.ts`), endpoints, their
 * subscriptions and delivery records (`tenant/endpoints.ts`), and the leases of deliveries under
 * way that the sweep sends again when they run out (`tenant/webhook-leases.ts`).
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { migrate } from "../../../durable-objects/common/migrations.ts";
import { sqlOf } from "../../../durable-objects/common/sql.ts";
import { EndpointStore, MAX_RECORDED_ATTEMPTS } from "../../../durable-objects/tenant/endpoints.ts";
import { DELIVERY_LOG_RETENTION_MS, HookStore } from "../../../durable-objects/tenant/hooks.ts";
import { TENANT_MIGRATIONS } from "../../../durable-objects/tenant/schema.ts";
import { DeliveryLeases } from "../../../durable-objects/tenant/webhook-leases.ts";
import type {
  CreateHookBody,
  DeliveryResource,
  RecordedAttempt,
  WebhookAttempt,
  WebhookEvent,
} from "../../../shared/api/index.ts";
import { okValue } from "../helpers/results.ts";
import { newTenantId } from "../helpers/tenancy.ts";

const START = Date.UTC(2026, 11, 1, 12);
const DAY = 24 * 60 * 60_000;
/** The sweep's grace as deployed (an attempt's 15 s twice, and the batch's 1 s). */
const GRACE = 31_000;

function withTenantStorage<T>(
  body: (parts: { sql: ReturnType<typeof sqlOf>; clock: { nowMs: () => number; at: number } }) => T,
): Promise<T> {
  return runInDurableObject(env.TENANT.getByName(newTenantId()), (_i, state) => {
    migrate(state.storage.sql, TENANT_MIGRATIONS);
    const clock = { at: START, nowMs: () => clock.at };
    return body({ sql: sqlOf(state.storage.sql), clock });
  });
}

const hookBody = (id?: string): CreateHookBody & { verify: { secret: string } } => ({
  ...(id ? { id } : {}),
  verify: { scheme: "github", secret: "s-1" },
  thread: "gh-{{body.issue.number}}",
  on_busy: "queue",
});

function entry(hookId: string, id: string, receivedAt: number, turnStatus: string | null) {
  return {
    object: "delivery",
    id,
    hook_id: hookId,
    thread_id: "t",
    status: "accepted",
    delivery_id: `d-${id}`,
    event: "push",
    received_at: new Date(receivedAt).toISOString(),
    duplicate_of: null,
    turn_id: "turn_1",
    turn_status: turnStatus,
    error: null,
  } as DeliveryResource;
}

describe("HookStore", () => {
  it("creates hooks (an id taken is refused), lists them by creation, deletes them with their log", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const hooks = new HookStore(sql, clock);
      const a = okValue(hooks.create({ body: hookBody("hook_a") }));
      const taken = hooks.create({ body: hookBody("hook_a") });
      clock.at += 1;
      const b = okValue(hooks.create({ body: hookBody() }));
      hooks.log([{ delivery: entry("hook_a", "dlv_1", clock.at, null), rev: 1 }]);
      const page = hooks.list({ limit: 1 });
      const rest = hooks.list({ limit: 1, cursor: page?.next_cursor ?? "" });
      return {
        a,
        taken: taken.ok ? taken.value : taken.error.code,
        b: b.id,
        pages: [page?.data.map((h) => h.id), rest?.data.map((h) => h.id), rest?.next_cursor],
        deleted: [hooks.delete("hook_a"), hooks.delete("hook_a")],
        log: sql`SELECT COUNT(*) AS n FROM tenant_hook_deliveries`.one().n,
        secretsStored: sql<{ body: string }>`SELECT body FROM tenant_hooks`
          .toArray()
          .some((row) => row.body.includes("s-1")),
      };
    });
    expect(result).toEqual({
      a: {
        object: "hook",
        id: "hook_a",
        name: null,
        verify: { scheme: "github" },
        thread: "gh-{{body.issue.number}}",
        input: null,
        on_busy: "queue",
        dedup: "body",
        thread_config: null,
        events: null,
        created_at: new Date(START).toISOString(),
        secret_rotated_at: null,
      },
      taken: "hook_exists",
      b: expect.stringMatching(/^hook_[A-Za-z0-9]{16}$/),
      pages: [["hook_a"], [result.b], null],
      deleted: [true, false],
      log: 0,
      secretsStored: false,
    });
  });

  it("a rotated secret verifies beside the new one for 24 hours, then no more", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const hooks = new HookStore(sql, clock);
      hooks.create({ body: hookBody("hook_r") });
      const before = hooks.target("hook_r");
      clock.at += 1_000;
      const rotated = hooks.rotate("hook_r", "s-2");
      const during = hooks.target("hook_r");
      clock.at += DAY;
      const after = hooks.target("hook_r");
      return {
        before: [before?.secrets, before?.previousUntil],
        rotatedAt: rotated?.secret_rotated_at,
        during: [during?.secrets, during?.previousUntil],
        after: [after?.secrets, after?.previousUntil],
        unknown: hooks.rotate("hook_nope", "x"),
      };
    });
    expect(result).toEqual({
      before: [["s-1"], null],
      rotatedAt: new Date(START + 1_000).toISOString(),
      during: [["s-2", "s-1"], START + 1_000 + DAY],
      after: [["s-2"], null],
      unknown: undefined,
    });
  });

  it("keeps a log entry's newest change, drops entries of unknown hooks, lists newest first, prunes after 7 days", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const hooks = new HookStore(sql, clock);
      hooks.create({ body: hookBody("hook_l") });
      const old = entry("hook_l", "dlv_old", START - DELIVERY_LOG_RETENTION_MS - 1, "completed");
      hooks.log([
        { delivery: old, rev: 1 },
        { delivery: entry("hook_l", "dlv_1", START, "completed"), rev: 2 },
        { delivery: entry("hook_l", "dlv_1", START, "in_progress"), rev: 1 },
        { delivery: entry("hook_l", "dlv_2", START + 5, "in_progress"), rev: 1 },
        { delivery: entry("hook_nope", "dlv_3", START, null), rev: 1 },
      ]);
      const page = hooks.deliveries("hook_l", { limit: 1 });
      const rest = hooks.deliveries("hook_l", { limit: 5, cursor: page?.next_cursor ?? "" });
      return {
        page: page?.data.map((d) => [d.id, d.turn_status]),
        rest: rest?.data.map((d) => [d.id, d.turn_status]),
        all: sql<{ id: string }>`SELECT id FROM tenant_hook_deliveries ORDER BY id`
          .toArray()
          .map((row) => row.id),
      };
    });
    expect(result).toEqual({
      page: [["dlv_2", "in_progress"]],
      rest: [["dlv_1", "completed"]],
      all: ["dlv_1", "dlv_2"],
    });
  });
});

const attempt = (
  status: number | null,
  error: string | null,
  nextRetryAt: number | null = null,
): WebhookAttempt => ({
  at: new Date(START).toISOString(),
  status_code: status,
  error,
  duration_ms: 3,
  next_retry_at: nextRetryAt === null ? null : new Date(nextRetryAt).toISOString(),
});

function recorded(
  endpointId: string,
  webhookId: string,
  status: RecordedAttempt["status"],
  tried: WebhookAttempt | null,
  gone = false,
  handoff = 1,
): RecordedAttempt {
  return {
    message: {
      endpointId,
      webhookId,
      type: "turn.completed",
      threadId: "t",
      turnId: "turn_1",
      createdAt: new Date(START).toISOString(),
      handoff,
    },
    attempt: tried,
    status,
    ...(gone ? { gone } : {}),
  };
}

describe("EndpointStore", () => {
  it("subscriptions follow each change: enabled endpoints only, with their events", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const endpoints = new EndpointStore(sql, clock, new DeliveryLeases(sql, clock, GRACE));
      const a = okValue(
        endpoints.create({
          url: "https://a.test/",
          events: ["turn.completed"],
          description: null,
          secret: "whsec_a",
        }),
      );
      const b = okValue(
        endpoints.create({
          url: "https://b.test/",
          events: ["turn.failed", "hook.failed"],
          description: "b",
          secret: "whsec_b",
        }),
      );
      const both = endpoints.subscriptions();
      endpoints.patch(a.id, { disabled: true });
      const afterDisable = endpoints.subscriptions();
      endpoints.patch(b.id, { events: ["thread.deleted"] });
      const afterPatch = endpoints.subscriptions();
      endpoints.delete(b.id);
      return {
        ids: [a.id, b.id],
        both,
        afterDisable,
        afterPatch,
        afterDelete: endpoints.subscriptions(),
      };
    });
    const [a, b] = result.ids;
    expect(result).toEqual({
      ids: result.ids,
      both: {
        endpoints: [
          { id: a, events: ["turn.completed"] },
          { id: b, events: ["turn.failed", "hook.failed"] },
          // By id in code-unit order, as SQLite's binary collation sorts (not the locale's).
        ].sort((x, y) => (String(x.id) < String(y.id) ? -1 : 1)),
      },
      afterDisable: { endpoints: [{ id: b, events: ["turn.failed", "hook.failed"] }] },
      afterPatch: { endpoints: [{ id: b, events: ["thread.deleted"] }] },
      afterDelete: { endpoints: [] },
    });
  });

  it("records attempts: a delivered event stays delivered, attempts are capped, 410 disables, gone endpoints drop them", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const endpoints = new EndpointStore(sql, clock, new DeliveryLeases(sql, clock, GRACE));
      const e = okValue(
        endpoints.create({
          url: "https://e.test/",
          events: ["turn.completed"],
          description: null,
          secret: "whsec_e",
        }),
      );
      endpoints.rotate(e.id, "whsec_e2");
      const targetsBefore = endpoints.targets([
        { webhookId: "msg_1", endpointId: e.id, handoff: 1 },
        { webhookId: "msg_x", endpointId: "we_gone", handoff: 1 },
      ]);
      endpoints.record([recorded(e.id, "msg_1", "pending", attempt(500, "http_500"))]);
      endpoints.record([recorded(e.id, "msg_1", "delivered", attempt(200, null))]);
      // A late copy of the message failed after it was delivered.
      endpoints.record([recorded(e.id, "msg_1", "failed", attempt(null, "timeout"))]);
      for (let i = 0; i < MAX_RECORDED_ATTEMPTS + 5; i++) {
        endpoints.record([recorded(e.id, "msg_2", "pending", attempt(503, "http_503"))]);
      }
      endpoints.record([recorded(e.id, "msg_3", "failed", attempt(410, "http_410"), true)]);
      endpoints.record([recorded("we_gone", "msg_4", "delivered", attempt(200, null))]);
      const list = endpoints.deliveries(e.id, { limit: 10 });
      return {
        targetsBefore,
        targetsAfter: endpoints.targets([{ webhookId: "msg_1", endpointId: e.id, handoff: 1 }]),
        statuses: list?.data.map((d) => [d.id, d.status, d.attempts.length]).sort(),
        endpoint: endpoints.get(e.id),
        subscriptions: endpoints.subscriptions(),
      };
    });
    expect(result.targetsBefore).toEqual([
      {
        webhookId: "msg_1",
        endpoint: { url: "https://e.test/", secrets: ["whsec_e2", "whsec_e"], disabled: false },
        delivered: false,
        superseded: false,
        attempts: 0,
      },
      { webhookId: "msg_x", endpoint: null, delivered: false, superseded: false, attempts: 0 },
    ]);
    expect(result.targetsAfter[0]).toMatchObject({ delivered: true, attempts: 3 });
    expect(result.statuses).toEqual([
      ["msg_1", "delivered", 3],
      ["msg_2", "pending", MAX_RECORDED_ATTEMPTS],
      ["msg_3", "failed", 1],
    ]);
    expect(result.endpoint).toMatchObject({ disabled: true, disabled_reason: "gone" });
    expect(result.subscriptions).toEqual({ endpoints: [] });
  });
});

const event = (endpointId: string, webhookId: string): WebhookEvent => ({
  tenant: "acme",
  jurisdiction: null,
  endpointId,
  webhookId,
  type: "turn.completed",
  threadId: "t",
  turnId: "turn_1",
  createdAt: new Date(START).toISOString(),
  payload: `{"id":"${webhookId}"}`,
});

/** A fresh tenant's endpoint store and leases, with one endpoint. */
function leased(sql: ReturnType<typeof sqlOf>, clock: { nowMs: () => number }) {
  const leases = new DeliveryLeases(sql, clock, GRACE);
  const endpoints = new EndpointStore(sql, clock, leases);
  const { id } = okValue(
    endpoints.create({
      url: "https://e.test/",
      events: ["turn.completed"],
      description: null,
      secret: "whsec_e",
    }),
  );
  const statuses = () =>
    endpoints.deliveries(id, { limit: 10 })?.data.map((d) => [d.id, d.status, d.attempts.length]);
  return { leases, endpoints, id, statuses };
}

describe("DeliveryLeases", () => {
  it("a delivery accepted is pending and in flight for the grace; a repeated hand-off adds nothing; the sweep takes the oldest expired first, a batch at a time", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const { leases, endpoints, id, statuses } = leased(sql, clock);
      const first = endpoints.accept([event(id, "msg_1"), event("we_gone", "msg_x")]);
      clock.at += 1;
      endpoints.accept([event(id, "msg_2")]);
      clock.at += 1;
      const repeated = endpoints.accept([event(id, "msg_1"), event(id, "msg_3")]);
      const expiresIn = (leases.nextExpiry() ?? 0) - START;
      clock.at = START + GRACE - 1;
      const before = leases.takeExpired(10);
      clock.at = START + GRACE + 2;
      const batches = [leases.takeExpired(2), leases.takeExpired(2)];
      return {
        first: first.map((m) => [m.webhookId, m.handoff, m.payload]),
        repeated: repeated.map((m) => m.webhookId),
        listed: statuses()?.sort(),
        expiresIn,
        before,
        batches: batches.map((batch) => batch.map((m) => [m.webhookId, m.handoff])),
      };
    });
    expect(result).toEqual({
      first: [["msg_1", 1, '{"id":"msg_1"}']],
      repeated: ["msg_3"],
      listed: [
        ["msg_1", "pending", 0],
        ["msg_2", "pending", 0],
        ["msg_3", "pending", 0],
      ],
      expiresIn: GRACE,
      before: [],
      batches: [
        [
          ["msg_1", 2],
          ["msg_2", 2],
        ],
        [["msg_3", 2]],
      ],
    });
  });

  it("an attempt holds the lease for the grace, a failed one until its retry is due and the grace, an ended one ends it", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const { leases, endpoints, id } = leased(sql, clock);
      endpoints.accept([event(id, "msg_1")]);
      // Its message was slow: the attempt begins just before the lease runs out.
      clock.at += GRACE - 1;
      endpoints.targets([{ webhookId: "msg_1", endpointId: id, handoff: 1 }]);
      clock.at += 1;
      const attempting = leases.takeExpired(10);
      // It fails, asking for a retry in 5 minutes.
      const retryAt = clock.at + 300_000;
      endpoints.record([recorded(id, "msg_1", "pending", attempt(500, "http_500", retryAt))]);
      clock.at = retryAt + GRACE - 1;
      const retryDue = leases.takeExpired(10);
      clock.at += 1;
      // The retry's message is lost: sent again.
      const retryLost = leases.takeExpired(10).map((m) => [m.webhookId, m.handoff]);
      endpoints.record([recorded(id, "msg_1", "delivered", attempt(200, null), false, 2)]);
      return { attempting, retryDue, retryLost, after: leases.nextExpiry() };
    });
    expect(result).toEqual({
      attempting: [],
      retryDue: [],
      retryLost: [["msg_1", 2]],
      after: null,
    });
  });

  it("hand-offs of the sweep back off; a superseded one's message is dropped, its attempts move nothing but a delivery", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const { leases, endpoints, id, statuses } = leased(sql, clock);
      endpoints.accept([event(id, "msg_1")]);
      const leaseEnds: number[] = [];
      for (let i = 0; i < 3; i++) {
        const ends = leases.nextExpiry() ?? 0;
        leaseEnds.push(ends - clock.at);
        clock.at = ends;
        leases.takeExpired(10);
      }
      // The first two hand-offs' messages arrive late.
      const [late] = endpoints.targets([{ webhookId: "msg_1", endpointId: id, handoff: 2 }]);
      const leaseAfterLate = (leases.nextExpiry() ?? 0) - clock.at;
      endpoints.record([recorded(id, "msg_1", "failed", attempt(500, "http_500"), false, 1)]);
      const afterLateFailure = [statuses(), leases.nextExpiry() === null];
      endpoints.record([recorded(id, "msg_1", "delivered", attempt(200, null), false, 2)]);
      return {
        leaseEnds,
        late,
        leaseAfterLate,
        afterLateFailure,
        afterLateDelivery: [statuses(), leases.nextExpiry()],
      };
    });
    expect(result).toEqual({
      // The first hand-off's grace, then the grace and 2 s, then the grace and 4 s.
      leaseEnds: [GRACE, GRACE + 2_000, GRACE + 4_000],
      late: expect.objectContaining({ superseded: true, delivered: false }),
      leaseAfterLate: GRACE + 8_000,
      afterLateFailure: [[["msg_1", "pending", 1]], false],
      afterLateDelivery: [[["msg_1", "delivered", 2]], null],
    });
  });
});
