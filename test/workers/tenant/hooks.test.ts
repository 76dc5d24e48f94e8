/** Hooks and their delivery logs (`tenant/hooks.ts`) over a fresh tenant object's SQLite. */
import { describe, expect, it } from "vitest";
import { DELIVERY_LOG_RETENTION_MS, HookStore } from "../../../durable-objects/tenant/hooks.ts";
import { okValue } from "../helpers/results.ts";
import { DAY, entry, hookBody, START, withTenantStorage } from "../helpers/webhook-storage.ts";

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
