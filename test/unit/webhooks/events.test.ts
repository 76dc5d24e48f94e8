import { describe, expect, it } from "vitest";
import {
  DELIVERY_TIMEOUT_MS,
  deliveryTimeoutMs,
  eventPayload,
  MAX_ATTEMPTS,
  retryDelaySeconds,
  WEBHOOK_PAYLOAD_MAX_BYTES,
} from "../../../shared/webhooks/index.ts";

const data = {
  thread_id: "t1",
  turn_id: "turn_1",
  status: "requires_action",
  usage: null,
  sequence: 3,
};

describe("the retry schedule", () => {
  it("waits 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: eight attempts", () => {
    const waits = Array.from({ length: MAX_ATTEMPTS }, (_, i) => retryDelaySeconds(i + 1));
    expect(waits).toEqual([5, 300, 1800, 7200, 18000, 36000, 36000, undefined]);
  });

  it("is compressed by a scale, in whole seconds", () => {
    expect([retryDelaySeconds(1, 0), retryDelaySeconds(2, 0.01), retryDelaySeconds(8, 0)]).toEqual([
      0,
      3,
      undefined,
    ]);
  });
});

describe("an attempt's bound", () => {
  it("is SPINDLE_WEBHOOK_TIMEOUT_MS when it is a positive number, else 15 s", () => {
    expect(["1000", "2500.5", undefined, "", "0", "-5", "soon"].map(deliveryTimeoutMs)).toEqual([
      1000,
      2500.5,
      ...Array(5).fill(DELIVERY_TIMEOUT_MS),
    ]);
    expect(DELIVERY_TIMEOUT_MS).toBe(15_000);
  });
});

describe("event payloads", () => {
  it("are {type, timestamp, data}", () => {
    expect(
      JSON.parse(eventPayload("turn.requires_action", "2026-12-01T00:00:00.000Z", data)),
    ).toEqual({ type: "turn.requires_action", timestamp: "2026-12-01T00:00:00.000Z", data });
  });

  it("stay within 20 KB: an error message is cut, pending calls that do not fit are left out", () => {
    const calls = Array.from({ length: 2000 }, (_, i) => ({
      call_id: `call_${i}`,
      name: "lookup",
    }));
    const body = eventPayload("turn.requires_action", "2026-12-01T00:00:00.000Z", {
      ...data,
      pending_calls: calls,
      error: { code: "internal", message: "e".repeat(50_000) },
    });
    const parsed = JSON.parse(body) as {
      data: {
        pending_calls: unknown[];
        pending_calls_truncated: boolean;
        error: { message: string };
      };
    };
    expect(new TextEncoder().encode(body).length).toBeLessThanOrEqual(WEBHOOK_PAYLOAD_MAX_BYTES);
    expect(parsed.data.error.message).toHaveLength(1000);
    expect(parsed.data.pending_calls_truncated).toBe(true);
    expect(parsed.data.pending_calls).toEqual(calls.slice(0, parsed.data.pending_calls.length));
  });
});
