import { describe, expect, it } from "vitest";
import type { HookTarget } from "../../../shared/api/index.ts";
import { HOOK_CACHE_TTL_MS, HookCache } from "../../../worker/hook-cache.ts";

const target = (previousUntil: number | null): HookTarget =>
  ({ hook: { id: "hook_1" }, secrets: ["s"], previousUntil, webhooks: { endpoints: [] } }) as never;

describe("the isolate's hook cache", () => {
  it("keeps a hook for 30 s after it was asked for, then reads it again", () => {
    const clock = { at: 1_000 };
    const cache = new HookCache({ nowMs: () => clock.at });
    cache.set("g:local:hook_1", target(null), 1_000);
    clock.at = 1_000 + HOOK_CACHE_TTL_MS - 1;
    expect(cache.get("g:local:hook_1")?.fetchedAt).toBe(1_000);
    clock.at = 1_000 + HOOK_CACHE_TTL_MS;
    expect(cache.get("g:local:hook_1")).toBe(undefined);
  });

  it("drops a hook sooner when its previous secret stops verifying before the 30 s", () => {
    const clock = { at: 0 };
    const cache = new HookCache({ nowMs: () => clock.at });
    cache.set("k", target(10_000), 0);
    clock.at = 9_999;
    expect(cache.get("k")).not.toBe(undefined);
    clock.at = 10_000;
    expect(cache.get("k")).toBe(undefined);
  });

  it("forgets a hook deleted or rotated through this isolate at once", () => {
    const cache = new HookCache({ nowMs: () => 0 });
    cache.set("k", target(null), 0);
    cache.forget("k");
    expect(cache.get("k")).toBe(undefined);
  });
});
