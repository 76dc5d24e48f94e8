import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  LiveThread,
  type StorageParts,
  storagePartsOf,
} from "../../../durable-objects/thread/live-thread.ts";
import {
  historyPage,
  queuedTurnResource,
  threadResource,
  turnResource,
} from "../../../durable-objects/thread/resources.ts";
import type { TurnRow } from "../../../durable-objects/thread/storage/meta-store.ts";
import type { Env } from "../../../env.ts";
import { ZERO_THREAD_USAGE } from "../../../shared/api/index.ts";
import type { MessageItem } from "../../../shared/protocol/index.ts";
import { newThreadId, threadStub } from "../helpers/api.ts";

/** The test worker's environment as the production code types it (its THREAD is typed here). */
const spindleEnv = env as unknown as Env;

/** Runs `body` with a new thread (at `/repo`) in a fresh object, over its real SQLite and R2. */
function withThread<T>(
  body: (live: LiveThread, parts: StorageParts, threadId: string) => Promise<T> | T,
): Promise<T> {
  const threadId = newThreadId();
  return runInDurableObject(threadStub(threadId), (_instance, state) => {
    const parts = storagePartsOf(state, spindleEnv);
    const live = LiveThread.create(
      parts,
      { tenant: "local", threadId, config: { cwd: "/repo" } },
      () => {},
    );
    return body(live, parts, threadId);
  });
}

const user = (text: string): MessageItem => ({
  type: "message",
  role: "user",
  content: [{ type: "input_text", text }],
});

/** A turn row over lines `first`-`last`, in `status`. */
const row = (
  id: string,
  status: TurnRow["status"],
  first: number,
  last: number,
  extra: Partial<TurnRow> = {},
): TurnRow => ({
  id,
  ordinal: first,
  kind: "turn",
  status,
  first_seq: first,
  last_seq: last,
  pending_calls: [],
  usage: null,
  error: null,
  ...extra,
});

const PENDING_CALL = {
  type: "function_call" as const,
  name: "lookup",
  arguments: "{}",
  call_id: "call_1",
};

describe("threadResource: the thread as the API shows it", () => {
  it("is idle with no task running and no turn waiting, with the thread's config and identity", async () => {
    const result = await withThread((live, _parts, threadId) => ({
      threadId,
      resource: threadResource(live, false),
      meta: { created_at: live.meta.created_at, updated_at: live.meta.updated_at },
    }));
    expect(result.resource).toEqual({
      object: "thread",
      id: result.threadId,
      status: "idle",
      config: {
        model: "spindle-local",
        provider: "local",
        permissions: {
          sandbox: "workspace-write",
          approval_policy: "on-request",
          writable_roots: [],
          network_access: false,
        },
        environments: [{ id: "local", cwd: "/repo" }],
        timezone: "UTC",
        context_sections: {},
        tools: [],
        truncation: { tokens: 10_000 },
      },
      turn_count: 0,
      token_usage: null,
      usage: { ...ZERO_THREAD_USAGE, cache_hit_ratio: null },
      metadata: {},
      created_at: result.meta.created_at,
      updated_at: result.meta.updated_at,
      forked_from: null,
      imported_from: null,
      warnings: [],
    });
    expect(Date.parse(result.meta.created_at)).not.toBeNaN();
  });

  it("is running while a task runs, whatever its last turn is", async () => {
    const statuses = await withThread((live, parts) => {
      const idle = threadResource(live, true).status;
      parts.meta.putTurn(row("turn_p", "requires_action", 3, 5, { pending_calls: [PENDING_CALL] }));
      return [idle, threadResource(live, true).status];
    });
    expect(statuses).toEqual(["running", "running"]);
  });

  it("is requires_action when its last turn waits for tool outputs, idle once it is answered", async () => {
    const statuses = await withThread((live, parts) => {
      parts.meta.putTurn(row("turn_1", "completed", 3, 4));
      const afterCompleted = threadResource(live, false).status;
      parts.meta.putTurn(row("turn_2", "requires_action", 5, 6, { pending_calls: [PENDING_CALL] }));
      const paused = threadResource(live, false).status;
      parts.meta.putTurn(row("turn_2", "completed", 5, 8));
      const answered = threadResource(live, false).status;
      return { afterCompleted, paused, answered };
    });
    expect(statuses).toEqual({
      afterCompleted: "idle",
      paused: "requires_action",
      answered: "idle",
    });
  });

  it("an earlier paused turn does not count: only the last turn is looked at", async () => {
    const status = await withThread((live, parts) => {
      parts.meta.putTurn(row("turn_1", "requires_action", 3, 4, { pending_calls: [PENDING_CALL] }));
      parts.meta.putTurn(row("turn_2", "interrupted", 5, 6));
      return threadResource(live, false).status;
    });
    expect(status).toBe("idle");
  });
});

describe("queuedTurnResource: a turn accepted and not begun", () => {
  it("is an in_progress turn with nothing recorded", () => {
    expect(queuedTurnResource("t_1", "turn_q")).toEqual({
      object: "turn",
      id: "turn_q",
      thread_id: "t_1",
      kind: "turn",
      status: "in_progress",
      items: [],
      pending_calls: [],
      usage: null,
      error: null,
    });
  });
});

describe("turnResource: a turn's resource, its items read back from its lines", () => {
  it("reads the response items of its lines from SQLite", async () => {
    const result = await withThread(async (live) => {
      const first = live.log.lastSeq + 1;
      const injected = live.session.inject([user("one"), user("two")]);
      const resource = await turnResource(
        live,
        row("turn_1", "completed", first, live.log.lastSeq, { kind: undefined }),
      );
      return { injected, resource, threadId: live.meta.id };
    });
    expect(result.resource).toEqual({
      object: "turn",
      id: "turn_1",
      thread_id: result.threadId,
      // A row written before kinds is a user turn.
      kind: "turn",
      status: "completed",
      items: result.injected,
      pending_calls: [],
      usage: null,
      error: null,
    });
    expect(result.injected).toHaveLength(2);
  });

  it("reads lines that left SQLite back from their R2 segment", async () => {
    const result = await withThread(async (live) => {
      const first = live.log.lastSeq + 1;
      const injected = live.session.inject([user("one"), user("two"), user("three")]);
      const last = live.log.lastSeq;
      await live.segments.flush();
      live.log.deleteThrough(last - 1);
      const stillInSqlite = live.log.rawAfter(0).map((l) => l.seq);
      const resource = await turnResource(live, row("turn_1", "completed", first, last));
      return { injected, items: resource.items, stillInSqlite, last };
    });
    expect(result.stillInSqlite).toEqual([result.last]);
    expect(result.items).toEqual(result.injected);
  });

  it("uses the items it is given instead of reading lines, and has none for an empty range", async () => {
    const result = await withThread(async (live) => {
      const given = await turnResource(live, row("turn_1", "completed", 1, 2), [user("given")]);
      const empty = await turnResource(live, row("turn_2", "in_progress", 5, 4));
      return { given: given.items, empty: empty.items };
    });
    expect(result).toEqual({ given: [user("given")], empty: [] });
  });
});

const INVALID_CURSOR = {
  ok: false,
  error: {
    code: "invalid_request",
    detail: "The cursor is invalid or the history was rewritten since.",
    errors: [{ path: "cursor", message: "unknown or expired cursor" }],
  },
};

describe("historyPage: live history in pages", () => {
  it("pages through the whole history with next_cursor, the last page without one", async () => {
    const result = await withThread((live) => {
      const injected = live.session.inject(["a", "b", "c", "d", "e"].map(user));
      const pages = [];
      let cursor: string | undefined;
      do {
        const page = historyPage(live, { limit: 2, ...(cursor ? { cursor } : {}) });
        if (!page.ok) return { injected, pages, failed: page };
        pages.push(page.value);
        cursor = page.value.next_cursor ?? undefined;
      } while (cursor);
      return { injected, pages };
    });
    const [a, b, c, d, e] = result.injected;
    expect(result).toEqual({
      injected: [a, b, c, d, e],
      pages: [
        { object: "list", data: [a, b], next_cursor: expect.any(String) },
        { object: "list", data: [c, d], next_cursor: expect.any(String) },
        { object: "list", data: [e], next_cursor: null },
      ],
    });
  });

  it("answers an empty history with one empty page, and a limit past the end with all of it", async () => {
    const result = await withThread((live) => {
      const empty = historyPage(live, { limit: 10 });
      const injected = live.session.inject([user("only")]);
      return { empty, all: historyPage(live, { limit: 1000 }), injected };
    });
    expect(result).toEqual({
      empty: { ok: true, value: { object: "list", data: [], next_cursor: null } },
      all: { ok: true, value: { object: "list", data: result.injected, next_cursor: null } },
      injected: [expect.objectContaining({ type: "message", role: "user" })],
    });
  });

  it("answers a cursor it cannot read as invalid_request at `cursor`", async () => {
    const results = await withThread((live) => {
      live.session.inject(["a", "b", "c"].map(user));
      return [
        "not base64 at all!",
        btoa("not json"),
        btoa("[0, 1]"),
        btoa(JSON.stringify({ v: 0 })),
        btoa(JSON.stringify({ v: 0, i: -1 })),
        btoa(JSON.stringify({ v: 0, i: 1.5 })),
        btoa(JSON.stringify({ v: "0", i: 1 })),
        // Past the end of history.
        btoa(JSON.stringify({ v: 0, i: 4 })),
      ].map((cursor) => historyPage(live, { limit: 2, cursor }));
    });
    expect(results).toEqual(Array.from({ length: 8 }, () => INVALID_CURSOR));
  });

  it("refuses a cursor made before a rewrite of history (a rollback)", async () => {
    const result = await withThread((live) => {
      live.session.inject(["a", "b", "c", "d"].map(user));
      const first = historyPage(live, { limit: 1 });
      const cursor = first.ok ? (first.value.next_cursor ?? undefined) : undefined;
      live.session.recordRollback(1);
      return { hadCursor: cursor !== undefined, next: historyPage(live, { limit: 1, cursor }) };
    });
    expect(result).toEqual({ hadCursor: true, next: INVALID_CURSOR });
  });

  it("keeps a cursor valid across a reload, a rewrite before it included", async () => {
    const result = await withThread(async (live, parts) => {
      live.session.inject(["a", "b", "c", "d"].map(user));
      live.session.recordRollback(1);
      const kept = live.session.history.slice(0, live.session.history.length);
      const first = historyPage(live, { limit: 2 });
      const cursor = first.ok ? (first.value.next_cursor ?? undefined) : undefined;
      const reloaded = await LiveThread.load(parts);
      if (!reloaded) throw new Error("no thread to reload");
      return {
        kept,
        rewrites: [live.rewrites, reloaded.rewrites],
        first,
        next: historyPage(reloaded, { limit: 2, cursor }),
      };
    });
    expect(result.kept.map((item) => (item as MessageItem).content)).toEqual(
      ["a", "b", "c"].map((text) => [{ type: "input_text", text }]),
    );
    expect(result).toEqual({
      kept: result.kept,
      rewrites: [1, 1],
      first: {
        ok: true,
        value: { object: "list", data: result.kept.slice(0, 2), next_cursor: expect.any(String) },
      },
      next: { ok: true, value: { object: "list", data: result.kept.slice(2), next_cursor: null } },
    });
  });
});
