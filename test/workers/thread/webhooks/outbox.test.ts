/**
 * The thread's outbox (`durable-objects/thread/webhooks/outbox.ts`) over a Thread object's SQLite, with
 * a clock and tenant the test controls: nothing written for an event no endpoint wants, one row
 * per subscribed endpoint handed to the tenant, rows written unresolved when the subscriptions it
 * knows are older than their bound (10 s) and resolved against the tenant's at the hand-off, a
 * failed hand-off kept and retried, and each turn's end mapped to its event.
 */
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { AlarmSchedule } from "../../../../durable-objects/common/alarms.ts";
import type { TurnRow } from "../../../../durable-objects/thread/storage/meta-store.ts";
import { sqlOf } from "../../../../durable-objects/thread/storage/sql.ts";
import {
  SUBSCRIPTIONS_TTL_MS,
  WebhookOutbox,
} from "../../../../durable-objects/thread/webhooks/outbox.ts";
import type {
  DeliveryResource,
  TenantRpc,
  WebhookEvent,
  WebhookSubscriptions,
} from "../../../../shared/api/index.ts";
import { newThreadId, threadStub } from "../../helpers/api.ts";

interface Harness {
  outbox: WebhookOutbox;
  clock: { at: number };
  sent: WebhookEvent[];
  asked: () => number;
  rows: () => { endpoint_id: string | null }[];
  settle: () => Promise<void>;
  failHandOffs: (fail: boolean) => void;
  alarm: () => Promise<number | null>;
}

const SUBSCRIBED: WebhookSubscriptions = {
  endpoints: [
    { id: "we_a", events: ["turn.completed", "turn.failed"] },
    { id: "we_b", events: ["turn.failed", "hook.failed"] },
  ],
};

/** Runs `body` in a fresh Thread object with an outbox whose queue and tenant are fakes. */
function withOutbox<T>(
  tenantAnswers: WebhookSubscriptions,
  body: (h: Harness) => Promise<T>,
): Promise<T> {
  return runInDurableObject(threadStub(newThreadId()), async (_i, state) => {
    const sql = sqlOf(state.storage.sql);
    const clock = { at: Date.UTC(2026, 11, 1, 12), nowMs: () => clock.at };
    const sent: WebhookEvent[] = [];
    let failing = false;
    let asked = 0;
    const work: Promise<unknown>[] = [];
    const tenant = {
      webhookSubscriptions: async () => {
        asked += 1;
        return { ok: true, value: tenantAnswers };
      },
      enqueueWebhooks: async (events: WebhookEvent[]) => {
        if (failing) throw new Error("the tenant is unreachable");
        sent.push(...events);
        return { ok: true, value: null };
      },
    } as unknown as TenantRpc;
    const alarms = new AlarmSchedule(state.storage, clock);
    const outbox = new WebhookOutbox({
      sql,
      storage: state.storage,
      clock,
      alarms,
      name: { tenant: "acme", incarnation: null, threadId: "t1" },
      jurisdiction: () => null,
      tenant: () => tenant,
      waitUntil: (promise) => {
        work.push(promise);
      },
    });
    return body({
      outbox,
      clock,
      sent,
      asked: () => asked,
      rows: () =>
        sql.tables.ifExists("spindle_outbox", [], () =>
          sql<{ endpoint_id: string | null }>`SELECT endpoint_id FROM spindle_outbox`.toArray(),
        ),
      settle: async () => {
        while (work.length > 0) await work.shift();
      },
      failHandOffs: (fail) => {
        failing = fail;
      },
      alarm: () => state.storage.getAlarm(),
    });
  });
}

const row = (status: TurnRow["status"], extra: Partial<TurnRow> = {}): TurnRow => ({
  id: "turn_1",
  ordinal: 3,
  kind: "turn",
  status,
  first_seq: 3,
  last_seq: 9,
  pending_calls: [],
  usage: null,
  error: null,
  ...extra,
});

describe("WebhookOutbox", () => {
  it("writes nothing for an event no endpoint wants, while the subscriptions it knows are fresh", async () => {
    const result = await withOutbox(SUBSCRIBED, async (h) => {
      h.outbox.learn(SUBSCRIBED, h.clock.at);
      h.outbox.record("thread.created");
      h.outbox.turnEnded(row("interrupted"), undefined);
      await h.settle();
      return { rows: h.rows(), sent: h.sent, asked: h.asked() };
    });
    expect(result).toEqual({ rows: [], sent: [], asked: 0 });
  });

  it("writes one row per endpoint that wants the event and hands each to the tenant", async () => {
    const result = await withOutbox(SUBSCRIBED, async (h) => {
      h.outbox.learn(SUBSCRIBED, h.clock.at);
      h.outbox.turnEnded(
        row("failed", { error: { code: "internal", message: "boom" } }),
        undefined,
      );
      const written = h.rows().map((r) => r.endpoint_id);
      await h.settle();
      return { written, sent: h.sent, rows: h.rows() };
    });
    expect(result.written.sort()).toEqual(["we_a", "we_b"]);
    expect(result.rows).toEqual([]);
    const payload = {
      type: "turn.failed",
      timestamp: "2026-12-01T12:00:00.000Z",
      data: {
        thread_id: "t1",
        turn_id: "turn_1",
        status: "failed",
        usage: null,
        error: { code: "internal", message: "boom" },
        sequence: 1,
      },
    };
    expect(
      result.sent
        .map(({ webhookId, payload: text, ...rest }) => ({
          ...rest,
          id: webhookId.startsWith("msg_"),
          payload: JSON.parse(text) as unknown,
        }))
        .sort((x, y) => x.endpointId.localeCompare(y.endpointId)),
    ).toEqual(
      ["we_a", "we_b"].map((endpointId) => ({
        tenant: "acme",
        jurisdiction: null,
        incarnation: null,
        endpointId,
        id: true,
        type: "turn.failed",
        threadId: "t1",
        turnId: "turn_1",
        createdAt: "2026-12-01T12:00:00.000Z",
        payload,
      })),
    );
    expect(result.sent[0]?.webhookId).not.toBe(result.sent[1]?.webhookId);
  });

  it("with subscriptions older than their bound (10 s), writes the event unresolved and resolves it against the tenant's", async () => {
    const result = await withOutbox(SUBSCRIBED, async (h) => {
      h.outbox.learn({ endpoints: [] }, h.clock.at);
      h.clock.at += SUBSCRIPTIONS_TTL_MS + 1;
      h.outbox.turnEnded(row("completed"), undefined);
      const written = h.rows().map((r) => r.endpoint_id);
      await h.settle();
      // Learned with the resolution: fresh again, so the next event is written resolved.
      h.outbox.turnEnded(row("completed", { id: "turn_2" }), undefined);
      const next = h.rows().map((r) => r.endpoint_id);
      await h.settle();
      return { written, next, sent: h.sent.map((m) => [m.endpointId, m.turnId]), asked: h.asked() };
    });
    expect(result).toEqual({
      written: [null],
      next: ["we_a"],
      sent: [
        ["we_a", "turn_1"],
        ["we_a", "turn_2"],
      ],
      asked: 1,
    });
  });

  it("keeps rows whose hand-off failed, keeps an alarm due, and hands them off on the next try", async () => {
    const result = await withOutbox(SUBSCRIBED, async (h) => {
      const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
      // An alarm in the past would fire at once: this test's clock is the real one.
      h.clock.at = Date.now();
      h.outbox.learn(SUBSCRIBED, h.clock.at);
      h.failHandOffs(true);
      h.outbox.turnEnded(row("completed"), undefined);
      await h.settle();
      const kept = h.rows().length;
      const alarm = await h.alarm();
      h.failHandOffs(false);
      await h.outbox.repair();
      warn.mockRestore();
      return { kept, alarmIn: alarm === null ? null : alarm - h.clock.at, sent: h.sent.length };
    });
    expect(result).toEqual({ kept: 1, alarmIn: 2_000, sent: 1 });
  });

  it("maps each turn's end to its event: compactions, pauses with their calls, a delivery's failure", async () => {
    const all: WebhookSubscriptions = {
      endpoints: [
        {
          id: "we_all",
          events: [
            "turn.completed",
            "turn.requires_action",
            "turn.failed",
            "turn.interrupted",
            "thread.compacted",
            "hook.failed",
          ],
        },
      ],
    };
    const result = await withOutbox(all, async (h) => {
      h.outbox.learn(all, h.clock.at);
      h.outbox.turnEnded(row("completed", { kind: "compaction", trigger: "idle" }), undefined);
      h.outbox.turnEnded(row("failed", { kind: "compaction" }), undefined);
      const call = { type: "function_call", name: "lookup", arguments: "{}", call_id: "call_1" };
      h.outbox.turnEnded(row("requires_action", { pending_calls: [call] as never }), undefined);
      const delivery = { id: "dlv_1", hook_id: "hook_1" } as DeliveryResource;
      h.outbox.turnEnded(row("failed", { error: { code: "internal", message: "x" } }), delivery);
      h.outbox.turnEnded(row("completed"), delivery);
      await h.settle();
      return h.sent.map((m) => JSON.parse(m.payload) as { type: string; data: unknown });
    });
    expect(result.map((e) => e.type)).toEqual([
      "thread.compacted",
      "turn.failed",
      "turn.requires_action",
      "turn.failed",
      "hook.failed",
      "turn.completed",
    ]);
    expect(result[0]?.data).toMatchObject({ status: "completed", trigger: "idle" });
    expect(result[2]?.data).toMatchObject({
      pending_calls: [{ call_id: "call_1", name: "lookup" }],
    });
    expect(result[4]?.data).toMatchObject({
      turn_id: "turn_1",
      status: "failed",
      hook_id: "hook_1",
      delivery_id: "dlv_1",
      sequence: 5,
    });
  });
});
