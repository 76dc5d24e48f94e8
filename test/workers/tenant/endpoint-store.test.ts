/** Webhook endpoints, their subscriptions and delivery records (`tenant/endpoints.ts`). */
import { describe, expect, it } from "vitest";
import { EndpointStore, MAX_RECORDED_ATTEMPTS } from "../../../durable-objects/tenant/endpoints.ts";
import { DeliveryLeases } from "../../../durable-objects/tenant/webhook-leases.ts";
import { okValue } from "../helpers/results.ts";
import { attempt, GRACE, recorded, withTenantStorage } from "../helpers/webhook-storage.ts";

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
