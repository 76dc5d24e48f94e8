import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { CheckpointStore } from "../../../../durable-objects/thread/storage/checkpoint-store.ts";
import { IdempotencyKeys } from "../../../../durable-objects/thread/storage/idempotency-keys.ts";
import { MetaStore } from "../../../../durable-objects/thread/storage/meta-store.ts";
import {
  clearRolloutState,
  migrateThread,
} from "../../../../durable-objects/thread/storage/schema.ts";
import { sqlOf } from "../../../../durable-objects/thread/storage/sql.ts";
import { TurnQueue } from "../../../../durable-objects/thread/tasks/turn-queue.ts";
import { createCheckpoint } from "../../../../shared/rollout/index.ts";
import { api, DEV_KEY, json, newThreadId, threadStub } from "../../helpers/api.ts";

const clock = { nowMs: () => Date.UTC(2026, 11, 1) };

/** The object's own tables and indexes (not SQLite's or the runtime's), with their SQL. */
const schemaOf = (storage: SqlStorage) =>
  storage
    .exec<{ type: string; name: string; sql: string | null }>(
      "SELECT type, name, sql FROM sqlite_master WHERE name LIKE 'spindle%' OR name LIKE 'sqlite_%' ORDER BY name",
    )
    .toArray();

/** The tables a new object creates. */
const EVERY_THREAD = new Set([
  "spindle_events",
  "spindle_meta",
  "spindle_rollout",
  "spindle_schema",
  "spindle_segments",
  "spindle_sync",
  "spindle_turns",
  "spindle_usage",
]);

const queued = (turnId: string, text = turnId) => ({
  turnId,
  content: [{ type: "input_text" as const, text }],
});

/** The tables as steps 1-7 created them before they took their present forms (schema version 7). */
const OLDER_LAYOUT: string = `
CREATE TABLE spindle_schema (version INTEGER NOT NULL);
INSERT INTO spindle_schema (version) VALUES (7);
CREATE TABLE spindle_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE spindle_rollout (seq INTEGER NOT NULL, part INTEGER NOT NULL, line TEXT NOT NULL, PRIMARY KEY (seq, part));
CREATE TABLE spindle_checkpoint (chunk INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE spindle_segments (first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, r2_key TEXT NOT NULL, bytes INTEGER NOT NULL, sha256 TEXT NOT NULL, state TEXT NOT NULL);
CREATE TABLE spindle_turns (turn_id TEXT PRIMARY KEY, ordinal INTEGER NOT NULL, body TEXT NOT NULL);
CREATE INDEX spindle_turns_ordinal ON spindle_turns (ordinal);
CREATE TABLE spindle_events (seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, body TEXT NOT NULL);
CREATE TABLE spindle_queue (position INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL);
CREATE TABLE spindle_checkpoint_items (grp INTEGER NOT NULL, part INTEGER NOT NULL, first INTEGER NOT NULL, count INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (grp, part));
CREATE TABLE spindle_parts (kind TEXT NOT NULL, key TEXT NOT NULL, part INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, key, part));
CREATE TABLE spindle_idempotency (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, turn_id TEXT, event_seq INTEGER NOT NULL, at INTEGER NOT NULL);
CREATE TABLE spindle_checkpoint_runs (grp INTEGER NOT NULL, part INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (grp, part));
CREATE TABLE spindle_sync (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE spindle_usage (incarnation TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (incarnation, seq));`;

/** The older layout after the older form of step 8 (schema version 8): the webhook tables too. */
const OLDER_LAYOUT_WITH_WEBHOOKS: string = `${OLDER_LAYOUT.replace("VALUES (7)", "VALUES (8)")}
CREATE TABLE spindle_deliveries (id TEXT PRIMARY KEY, hook_id TEXT NOT NULL, delivery_id TEXT NOT NULL, status TEXT NOT NULL, received_at INTEGER NOT NULL, turn_id TEXT, final INTEGER NOT NULL DEFAULT 0, rev INTEGER NOT NULL, pushed_rev INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL);
CREATE INDEX spindle_deliveries_key ON spindle_deliveries (hook_id, delivery_id);
CREATE INDEX spindle_deliveries_turn ON spindle_deliveries (turn_id);
CREATE INDEX spindle_deliveries_received ON spindle_deliveries (received_at);
CREATE INDEX spindle_deliveries_unpushed ON spindle_deliveries (received_at) WHERE pushed_rev < rev;
CREATE TABLE spindle_outbox (id TEXT PRIMARY KEY, endpoint_id TEXT, created_at INTEGER NOT NULL, body TEXT NOT NULL);`;

describe("the Thread's tables", () => {
  it("a new object holds only the tables every thread needs: one b-tree each, no autoindex or sequence", async () => {
    const schema = await runInDurableObject(threadStub(newThreadId()), (_i, state) =>
      schemaOf(state.storage.sql).map(({ type, name, sql }) => ({
        type,
        name,
        withoutRowid: sql?.endsWith("WITHOUT ROWID") ?? false,
      })),
    );
    expect(schema).toEqual([
      { type: "table", name: "spindle_events", withoutRowid: false },
      { type: "table", name: "spindle_meta", withoutRowid: true },
      { type: "table", name: "spindle_rollout", withoutRowid: true },
      { type: "table", name: "spindle_schema", withoutRowid: false },
      { type: "table", name: "spindle_segments", withoutRowid: false },
      { type: "table", name: "spindle_sync", withoutRowid: true },
      { type: "table", name: "spindle_turns", withoutRowid: true },
      { type: "table", name: "spindle_usage", withoutRowid: true },
    ]);
  });

  it("the others appear on first use, and reads before it find nothing", async () => {
    const result = await runInDurableObject(threadStub(newThreadId()), (_i, state) => {
      const sql = sqlOf(state.storage.sql);
      const queue = new TurnQueue(sql);
      const keys = new IdempotencyKeys(sql, clock);
      const checkpoints = new CheckpointStore(sql, state.storage);
      const before = {
        queued: queue.peek(),
        key: keys.find("k"),
        checkpoint: checkpoints.load(),
        parts: new MetaStore(sql).get("missing"),
      };
      keys.prune();
      checkpoints.clear();
      clearRolloutState(state.storage.sql);
      const untouched = schemaOf(state.storage.sql).length;
      queue.push(queued("turn_q"));
      keys.record("k", "fp", "turn_q", 3);
      checkpoints.save(
        createCheckpoint([], { truncation: { mode: "tokens", limit: 10_000 }, lastSeq: 0 }),
      );
      new MetaStore(sql).put("long", "x".repeat(600_000));
      return {
        before,
        untouched,
        created: schemaOf(state.storage.sql)
          .map((t) => t.name)
          .filter((name) => !EVERY_THREAD.has(name)),
        after: {
          queued: queue.peek(),
          key: keys.find("k")?.turnId,
          long: new MetaStore(sql).get("long"),
        },
      };
    });
    expect(result.before).toEqual({
      queued: undefined,
      key: undefined,
      checkpoint: undefined,
      parts: undefined,
    });
    expect(result.untouched).toBe(EVERY_THREAD.size);
    expect(result.created).toEqual([
      "spindle_checkpoint",
      "spindle_checkpoint_items",
      "spindle_checkpoint_runs",
      "spindle_idempotency",
      "spindle_parts",
      "spindle_queue",
      "sqlite_autoindex_spindle_checkpoint_items_1",
      "sqlite_autoindex_spindle_parts_1",
    ]);
    expect(result.after).toEqual({
      queued: queued("turn_q"),
      key: "turn_q",
      long: "x".repeat(600_000),
    });
  });

  it("a table that a rolled-back transaction created reads as empty, and the next write creates it again", async () => {
    const result = await runInDurableObject(threadStub(newThreadId()), (_i, state) => {
      const sql = sqlOf(state.storage.sql);
      const queue = new TurnQueue(sql);
      try {
        state.storage.transactionSync(() => {
          queue.push(queued("turn_lost"));
          throw new Error("rolled back");
        });
      } catch {
        // As a failed restore or import.
      }
      const exists = state.storage.sql
        .exec("SELECT name FROM sqlite_master WHERE name = 'spindle_queue'")
        .toArray().length;
      const fresh = new TurnQueue(sql);
      const before = fresh.peek();
      fresh.push(queued("turn_kept"));
      return { exists, before, after: new TurnQueue(sql).peek() };
    });
    expect(result).toEqual({ exists: 0, before: undefined, after: queued("turn_kept") });
  });

  it("a queue position is given again once the queue is empty, without the parts of the turn it held", async () => {
    const result = await runInDurableObject(threadStub(newThreadId()), (_i, state) => {
      const sql = sqlOf(state.storage.sql);
      const queue = new TurnQueue(sql);
      queue.push(queued("turn_long", "y".repeat(700_000)));
      const long = queue.shift();
      queue.push(queued("turn_a"));
      queue.push(queued("turn_b"));
      const positions = sql<{
        position: number;
      }>`SELECT position FROM spindle_queue ORDER BY position`
        .toArray()
        .map((r) => r.position);
      const parts = sql<{ n: number }>`SELECT COUNT(*) AS n FROM spindle_parts`.one().n;
      return {
        long: long?.content[0]?.type === "input_text" ? long.content[0].text.length : 0,
        positions,
        parts,
        order: [queue.shift()?.turnId, queue.shift()?.turnId],
      };
    });
    expect(result).toEqual({
      long: 700_000,
      positions: [1, 2],
      parts: 0,
      order: ["turn_a", "turn_b"],
    });
  });

  it.each([
    ["7", OLDER_LAYOUT],
    ["8", OLDER_LAYOUT_WITH_WEBHOOKS],
  ])(
    "a database of the older layout at version %s (rowids, every table at once) is read and written the same",
    async (_version, layout) => {
      const result = await runInDurableObject(threadStub(newThreadId()), (_i, state) => {
        const storage = state.storage.sql;
        for (const { name } of schemaOf(storage).filter((t) => t.type === "table")) {
          storage.exec(`DROP TABLE ${name}`);
        }
        storage.exec(layout);
        migrateThread(storage);
        const sql = sqlOf(storage);
        const meta = new MetaStore(sql);
        const queue = new TurnQueue(sql);
        const keys = new IdempotencyKeys(sql, clock);
        meta.put("thread", { id: "t" });
        const row = {
          id: "turn_1",
          ordinal: 3,
          kind: "turn" as const,
          status: "completed" as const,
          first_seq: 3,
          last_seq: 9,
          pending_calls: [],
          usage: null,
          error: null,
        };
        meta.putTurn(row);
        queue.push(queued("turn_q"));
        keys.record("k", "fp", null, 1);
        const read = {
          thread: meta.thread(),
          turn: meta.turn("turn_1"),
          last: meta.lastTurn(),
          queued: queue.peek(),
          key: keys.find("k")?.fingerprint,
        };
        clearRolloutState(storage);
        return {
          version: storage.exec<{ version: number }>("SELECT version FROM spindle_schema").one(),
          read,
          cleared: { thread: meta.thread(), turn: meta.turn("turn_1"), queued: queue.peek() },
        };
      });
      expect(result).toEqual({
        version: { version: 8 },
        read: {
          thread: { id: "t" },
          turn: {
            id: "turn_1",
            ordinal: 3,
            kind: "turn",
            status: "completed",
            first_seq: 3,
            last_seq: 9,
            pending_calls: [],
            usage: null,
            error: null,
          },
          last: expect.objectContaining({ id: "turn_1" }),
          queued: queued("turn_q"),
          key: "fp",
        },
        cleared: { thread: undefined, turn: undefined, queued: queued("turn_q") },
      });
    },
  );

  it("after a thread is deleted, its lazily created tables are created again on use", async () => {
    const id = newThreadId();
    const keyed = (key: string) =>
      api("POST", "/v1/threads", { id }, DEV_KEY, { "idempotency-key": key });
    await json(await keyed("first"), 201);
    expect((await api("DELETE", `/v1/threads/${id}`)).status).toBe(204);
    const gone = await runInDurableObject(threadStub(id), (_i, state) =>
      schemaOf(state.storage.sql).some((t) => t.name === "spindle_idempotency"),
    );
    expect(gone).toBe(false);
    await json(await keyed("second"), 201);
    expect((await keyed("second")).status).toBe(201);
  });
});
