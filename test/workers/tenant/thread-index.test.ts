/** The `Tenant` object's thread index (`tenant/thread-index.ts`) over a fresh tenant object's SQLite. */
import { describe, expect, it } from "vitest";
import { RESERVATION_MS, ThreadIndex } from "../../../durable-objects/tenant/thread-index.ts";
import type { ThreadResource } from "../../../shared/api/index.ts";
import { sync, threadAt, withTenantStorage } from "../helpers/tenant-storage.ts";

describe("ThreadIndex", () => {
  it("applies a push unless a newer one was applied, and a null thread drops the entry", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const index = new ThreadIndex(sql, clock);
      const ids = () =>
        (
          index.list({ limit: 10, order: "desc" }) as { value: { data: ThreadResource[] } }
        ).value.data.map((t) => [t.id, t.updated_at]);
      index.apply(sync("t1", 2, threadAt("t1", "2026-12-01T10:00:00.000Z")));
      index.apply(sync("t1", 1, threadAt("t1", "2026-12-01T09:00:00.000Z")));
      const afterLate = ids();
      index.apply(sync("t1", 3, null));
      const afterDelete = ids();
      index.apply(sync("t1", 2, threadAt("t1", "2026-12-01T11:00:00.000Z")));
      return { afterLate, afterDelete, afterStale: ids() };
    });
    expect(result).toEqual({
      afterLate: [["t1", "2026-12-01T10:00:00.000Z"]],
      afterDelete: [],
      afterStale: [],
    });
  });

  it("pages by updated_at then id, either way, with status and metadata filters", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const index = new ThreadIndex(sql, clock);
      const at = (n: number) => `2026-12-01T10:00:0${n}.000Z`;
      index.apply(sync("a", 1, threadAt("a", at(1), { metadata: { team: "x" } })));
      index.apply(sync("b", 1, threadAt("b", at(2), { status: "running" })));
      index.apply(sync("c", 1, threadAt("c", at(2), { metadata: { team: "x" } })));
      index.apply(sync("d", 1, threadAt("d", at(3))));
      const all = (order: "asc" | "desc") => {
        const seen: string[] = [];
        let cursor: string | undefined;
        for (;;) {
          const page = index.list({ limit: 1, order, ...(cursor ? { cursor } : {}) });
          if (!page.ok) return page;
          seen.push(...page.value.data.map((t) => t.id));
          if (page.value.next_cursor === null) return seen;
          cursor = page.value.next_cursor;
        }
      };
      const ids = (q: Parameters<ThreadIndex["list"]>[0]) => {
        const page = index.list(q);
        return page.ok ? page.value.data.map((t) => t.id) : page;
      };
      return {
        desc: all("desc"),
        asc: all("asc"),
        running: ids({ limit: 10, order: "desc", status: "running" }),
        team: ids({ limit: 10, order: "desc", metadata: { team: "x" } }),
        none: ids({ limit: 10, order: "desc", metadata: { team: "x", other: "y" } }),
      };
    });
    expect(result).toEqual({
      desc: ["d", "c", "b", "a"],
      asc: ["a", "b", "c", "d"],
      running: ["b"],
      team: ["c", "a"],
      none: [],
    });
  });

  it("reservations count under max_threads until their thread pushes, or for a minute", async () => {
    const result = await withTenantStorage(({ sql, clock }) => {
      const index = new ThreadIndex(sql, clock);
      const code = (r: { ok: boolean; error?: { quota?: string } }) =>
        r.ok ? "ok" : r.error?.quota;
      const first = code(index.reserve("t1", 2));
      const second = code(index.reserve("t2", 2));
      const third = code(index.reserve("t3", 2));
      const again = code(index.reserve("t1", 2));
      index.apply(sync("t1", 1, threadAt("t1", "2026-12-01T10:00:00.000Z")));
      clock.at += RESERVATION_MS;
      const afterExpiry = code(index.reserve("t3", 2));
      const listed = index.list({ limit: 10, order: "desc" });
      return {
        first,
        second,
        third,
        again,
        afterExpiry,
        listed: listed.ok ? listed.value.data.map((t) => t.id) : listed,
      };
    });
    expect(result).toEqual({
      first: "ok",
      second: "ok",
      third: "max_threads",
      again: "ok",
      afterExpiry: "ok",
      listed: ["t1"],
    });
  });
});
