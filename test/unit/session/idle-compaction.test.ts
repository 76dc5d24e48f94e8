import { describe, expect, it } from "vitest";
import {
  idleCompactionDueMs,
  idleCompactionMarginMs,
  idleCompactionOf,
} from "../../../shared/session/index.ts";

const START = Date.UTC(2026, 11, 3, 12);

describe("idleCompactionDueMs", () => {
  it("fires 30 s before a 5-minute cache expires, counted from the last request's start", () => {
    const due = idleCompactionDueMs({
      lastRequestStartMs: START,
      idleSinceMs: START + 20_000,
      promptCacheTtlS: 300,
      afterIdleS: 60,
    });
    expect(due).toBe(START + 270_000);
  });

  it("keeps a tenth of a short lifetime as its margin", () => {
    expect(idleCompactionMarginMs(300_000)).toBe(30_000);
    expect(idleCompactionMarginMs(3_600_000)).toBe(30_000);
    expect(idleCompactionMarginMs(60_000)).toBe(6_000);
    const due = idleCompactionDueMs({
      lastRequestStartMs: START,
      idleSinceMs: START + 1_000,
      promptCacheTtlS: 60,
      afterIdleS: 5,
    });
    expect(due).toBe(START + 54_000);
  });

  it("never fires before the thread has been idle after_idle_s, even past the cache's expiry", () => {
    const timing = {
      lastRequestStartMs: START,
      idleSinceMs: START + 200_000,
      promptCacheTtlS: 300,
    };
    // Idle from 200 s: 100 s of idleness comes at 300 s, after the 270 s mark (the cache is cold).
    expect(idleCompactionDueMs({ ...timing, afterIdleS: 100 })).toBe(START + 300_000);
    expect(idleCompactionDueMs({ ...timing, afterIdleS: 70 })).toBe(START + 270_000);
    expect(idleCompactionDueMs({ ...timing, afterIdleS: 3_600 })).toBe(START + 3_800_000);
  });

  it("never fires for a model whose cache has no known lifetime", () => {
    const due = idleCompactionDueMs({
      lastRequestStartMs: START,
      idleSinceMs: START,
      promptCacheTtlS: null,
      afterIdleS: 1,
    });
    expect(due).toBeUndefined();
  });
});

describe("idleCompactionOf", () => {
  const own = { after_idle_s: 600, min_context_tokens: 10_000 };
  const tenant = { after_idle_s: 60, min_context_tokens: 2_000 };

  it("takes the thread's own setting over the tenant's default", () => {
    expect(idleCompactionOf({ idle_compaction: own }, tenant)).toEqual(own);
  });

  it("takes the tenant's default where the thread sets nothing, and none without one", () => {
    expect(idleCompactionOf({}, tenant)).toEqual(tenant);
    expect(idleCompactionOf({}, null)).toBeNull();
  });

  it("is off where the thread set null, whatever the tenant's default", () => {
    expect(idleCompactionOf({ idle_compaction: null }, tenant)).toBeNull();
  });
});
