/** The leases of deliveries under way, which the sweep sends again when they run out (`tenant/webhook-leases.ts`). */
import { describe, expect, it } from "vitest";
import {
  attempt,
  event,
  GRACE,
  leased,
  recorded,
  START,
  withTenantStorage,
} from "../helpers/webhook-storage.ts";

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
