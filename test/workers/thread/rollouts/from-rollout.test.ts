import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../../durable-objects/common/clock.ts";
import {
  LiveThread,
  type StorageParts,
  storagePartsOf,
} from "../../../../durable-objects/thread/live-thread.ts";
import {
  importThread,
  restoreThread,
} from "../../../../durable-objects/thread/rollouts/from-rollout.ts";
import { readRolloutStream } from "../../../../durable-objects/thread/rollouts/import.ts";
import type { ThreadMeta } from "../../../../durable-objects/thread/storage/meta-store.ts";
import {
  decodeTolerantly,
  RolloutLog,
} from "../../../../durable-objects/thread/storage/rollout-log.ts";
import { tablesOf } from "../../../../durable-objects/thread/storage/schema.ts";
import type { Env } from "../../../../env.ts";
import { DEFAULT_MODEL_CATALOG } from "../../../../shared/models/index.ts";
import type { MessageItem } from "../../../../shared/protocol/index.ts";
import { newThreadId, threadStub } from "../../helpers/api.ts";

/** The test worker's environment as the production code types it (its THREAD is typed here). */
const spindleEnv = env as unknown as Env;

/** Runs `body` over a fresh object's real SQLite and R2. */
function inFreshObject<T>(
  body: (parts: StorageParts, threadId: string, state: DurableObjectState) => Promise<T>,
): Promise<T> {
  const threadId = newThreadId();
  return runInDurableObject(threadStub(threadId), (_instance, state) =>
    body(storagePartsOf(state, spindleEnv), threadId, state),
  );
}

/** Rows of the tables that hold a thread, by table: what a refused import must leave empty. */
function threadTables(state: DurableObjectState) {
  const sql = state.storage.sql;
  const count = (table: string) =>
    sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`).one().n;
  return {
    rollout: count("spindle_rollout"),
    meta: count("spindle_meta"),
    turns: count("spindle_turns"),
    idempotency: tablesOf(sql).ifExists("spindle_idempotency", 0, () =>
      count("spindle_idempotency"),
    ),
  };
}
const EMPTY_TABLES = { rollout: 0, meta: 0, turns: 0, idempotency: 0 };

/** Loses the object's local state and restores the thread from what R2 holds. */
function restoreFromR2Alone(parts: StorageParts, threadId: string, state: DurableObjectState) {
  state.storage.sql.exec("DELETE FROM spindle_rollout; DELETE FROM spindle_meta;");
  state.storage.sql.exec("DELETE FROM spindle_turns; DELETE FROM spindle_segments;");
  return restoreThread(
    parts,
    { tenant: "local", threadId },
    new RolloutLog(parts.sql, systemClock, 0),
  );
}

/** The JSONL text of lines, as an upload sends it. */
const upload = (lines: readonly object[]) =>
  new Blob([lines.map((l) => `${JSON.stringify(l)}\n`).join("")]).stream();

const at = (second: number) => `2025-06-01T10:00:${String(second).padStart(2, "0")}.000Z`;
const event = (second: number, payload: object) => ({
  timestamp: at(second),
  type: "event_msg",
  payload,
});
const item = (second: number, payload: object) => ({
  timestamp: at(second),
  type: "response_item",
  payload,
});
const message = (role: "user" | "assistant", text: string) => ({
  type: "message",
  role,
  content: [{ type: role === "user" ? "input_text" : "output_text", text }],
});
const CALL = { type: "function_call", name: "lookup", arguments: "{}", call_id: "call_9" };

/** A Codex rollout: two user turns, an interrupted one, a compaction, and one left waiting. */
const SOURCE_META = {
  timestamp: at(0),
  type: "session_meta",
  payload: {
    id: "src-session",
    timestamp: at(0),
    cwd: "/src",
    originator: "codex_cli_rs",
    cli_version: "0.50.0",
  },
};
const CODEX_ROLLOUT = [
  SOURCE_META, // 1
  event(1, { type: "task_started", turn_id: "turn_1" }), // 2
  {
    timestamp: at(1),
    type: "turn_context",
    payload: {
      turn_id: "turn_1",
      cwd: "/src",
      model: "spindle-local-lite",
      timezone: "Europe/Paris",
      approval_policy: "never",
      sandbox_policy: { mode: "read-only" },
    },
  }, // 3
  item(2, message("user", "hello")), // 4
  item(3, message("assistant", "hi there")), // 5
  event(3, { type: "task_complete", turn_id: "turn_1", last_agent_message: "hi there" }), // 6
  event(4, { type: "task_started", turn_id: "turn_2" }), // 7
  item(4, message("user", "stop that")), // 8
  event(5, { type: "turn_aborted", turn_id: "turn_2", reason: "interrupted" }), // 9
  event(6, { type: "task_started", turn_id: "turn_c" }), // 10
  {
    timestamp: at(7),
    type: "compacted",
    payload: { message: "summary", replacement_history: [message("user", "hello")] },
  }, // 11
  event(7, { type: "task_complete", turn_id: "turn_c", last_agent_message: null }), // 12
  event(8, { type: "task_started", turn_id: "turn_3" }), // 13
  item(8, message("user", "/call lookup {}")), // 14
  item(9, CALL), // 15
];

/** The configuration CODEX_ROLLOUT resolves to: its turn_context's settings. */
const RESOLVED_CONFIG = {
  model: "spindle-local-lite",
  provider: "local",
  permissions: {
    sandbox: "read-only",
    approval_policy: "never",
    writable_roots: [],
    network_access: false,
  },
  environments: [{ id: "local", cwd: "/src" }],
  timezone: "Europe/Paris",
  context_sections: {},
  tools: [],
  truncation: { tokens: 10_000 },
};

const pick = ({ forked_from, imported_from, turn_count }: ThreadMeta) => ({
  forked_from,
  imported_from,
  turn_count,
});

const turnRow = (
  id: string,
  kind: "turn" | "compaction",
  status: string,
  first: number,
  last: number,
  pending: object[] = [],
) => ({
  id,
  ordinal: first,
  kind,
  status,
  first_seq: first,
  last_seq: last,
  pending_calls: pending,
  usage: null,
  error: null,
});

describe("importThread: a thread from an uploaded or forked rollout", () => {
  it("refuses a body that did not decode, at the line that failed, writing nothing", async () => {
    const result = await inFreshObject(async (parts, threadId, state) => {
      let recorded = 0;
      const imported = await importThread(
        parts,
        { tenant: "local", threadId },
        { ok: false, code: "invalid_request", lineNumber: 3, reason: "not JSON" },
        () => {
          recorded += 1;
        },
      );
      return { imported, recorded, tables: threadTables(state) };
    });
    expect(result).toEqual({
      imported: {
        ok: false,
        error: {
          code: "invalid_request",
          detail: "Line 3: not JSON",
          errors: [{ path: "/line/3", message: "not JSON" }],
        },
      },
      recorded: 0,
      tables: EMPTY_TABLES,
    });
  });

  it("refuses an empty rollout at /line/1, writing nothing", async () => {
    const result = await inFreshObject(async (parts, threadId, state) => {
      let recorded = 0;
      const imported = await importThread(
        parts,
        { tenant: "local", threadId },
        await readRolloutStream(new Blob(["\n\n"]).stream()),
        () => {
          recorded += 1;
        },
      );
      return { imported, recorded, tables: threadTables(state) };
    });
    expect(result).toEqual({
      imported: {
        ok: false,
        error: {
          code: "invalid_request",
          detail: "The rollout is empty.",
          errors: [{ path: "/line/1", message: "no line" }],
        },
      },
      recorded: 0,
      tables: EMPTY_TABLES,
    });
  });

  it("refuses a rollout whose first line is not session_meta at /line/1, writing nothing", async () => {
    const result = await inFreshObject(async (parts, threadId, state) => {
      let recorded = 0;
      const imported = await importThread(
        parts,
        { tenant: "local", threadId },
        await readRolloutStream(upload(CODEX_ROLLOUT.slice(1))),
        () => {
          recorded += 1;
        },
      );
      return { imported, recorded, tables: threadTables(state) };
    });
    expect(result).toEqual({
      imported: {
        ok: false,
        error: {
          code: "invalid_request",
          detail: "The first line must be session_meta.",
          errors: [{ path: "/line/1", message: "expected session_meta, got event_msg" }],
        },
      },
      recorded: 0,
      tables: EMPTY_TABLES,
    });
  });

  it("replaces a setting it cannot use by the default, with a warning naming its line", async () => {
    const result = await inFreshObject(async (parts, threadId) => {
      const lines = [
        SOURCE_META,
        {
          timestamp: at(1),
          type: "turn_context",
          payload: { cwd: "/src", model: "spindle-local", timezone: "Not/A_Zone" },
        },
      ];
      const imported = await importThread(
        parts,
        { tenant: "local", threadId },
        await readRolloutStream(upload(lines)),
        () => {},
      );
      if (!imported.ok) return { imported };
      return {
        timezone: imported.value.session.state.config.timezone,
        warnings: imported.value.meta.warnings,
      };
    });
    expect(result).toEqual({
      timezone: "UTC",
      warnings: [
        {
          code: "rollout_setting_unsupported",
          message:
            "rollout line 2 (turn_context): timezone cannot be used here (unknown IANA timezone: Not/A_Zone); the default is used instead",
        },
      ],
    });
  });

  it("validates a spindle_config line like the API's input: a restore keeps the repaired configuration", async () => {
    const poisoned = {
      timestamp: at(1),
      type: "spindle_config",
      payload: { ...RESOLVED_CONFIG, model: "nope", timezone: "Not/AZone" },
    };
    const result = await inFreshObject(async (parts, threadId, state) => {
      const imported = await importThread(
        parts,
        { tenant: "local", threadId },
        await readRolloutStream(upload([SOURCE_META, poisoned])),
        () => {},
      );
      if (!imported.ok) return { imported };
      await imported.value.segments.flush();
      const before = { config: imported.value.session.state.config, meta: imported.value.meta };
      const restored = await restoreFromR2Alone(parts, threadId, state);
      if (!restored.ok) return { restored };
      const after = { config: restored.value.session.state.config, meta: restored.value.meta };
      return { before, after, prompt: restored.value.session.previewPrompt().instructions };
    });
    expect(result.before?.config).toEqual({
      ...poisoned.payload,
      model: "spindle-local",
      timezone: "UTC",
    });
    expect(result.before?.meta.warnings).toEqual([
      {
        code: "rollout_setting_unsupported",
        message:
          'rollout line 2 (spindle_config): model cannot be used here (Unknown model "nope".); the thread runs on spindle-local',
      },
      {
        code: "rollout_setting_unsupported",
        message:
          "rollout line 2 (spindle_config): timezone cannot be used here (unknown IANA timezone: Not/AZone); the default is used instead",
      },
    ]);
    expect(result.after).toEqual(result.before);
    expect(result.prompt).toBe(DEFAULT_MODEL_CATALOG.get("spindle-local")?.instructions);
  });

  it("an import's session_meta names the thread and its source, and keeps none of the source's forks", async () => {
    const forkedSource = {
      ...SOURCE_META,
      payload: { ...SOURCE_META.payload, forked_from_id: "codex-parent-session" },
    };
    const result = await inFreshObject(async (parts, threadId, state) => {
      const imported = await importThread(
        parts,
        { tenant: "local", threadId },
        await readRolloutStream(upload([forkedSource, ...CODEX_ROLLOUT.slice(1, 6)])),
        () => {},
      );
      if (!imported.ok) return { imported };
      await imported.value.segments.flush();
      const first = decodeTolerantly(imported.value.log.rawAfter(0, 1)).lines[0];
      const restored = await restoreFromR2Alone(parts, threadId, state);
      return {
        threadId,
        first,
        imported: pick(imported.value.meta),
        restored: restored.ok ? pick(restored.value.meta) : restored,
      };
    });
    const now = result.first?.timestamp;
    const origin = { session_id: "src-session", cli_version: "0.50.0", originator: "codex_cli_rs" };
    expect(result).toEqual({
      threadId: result.threadId,
      first: {
        timestamp: now,
        type: "session_meta",
        payload: {
          id: result.threadId,
          timestamp: now,
          cwd: "/src",
          originator: "spindle",
          cli_version: "spindle-0.1.0",
          source: "api",
          model_provider: "local",
          imported_from: origin,
          // The 5 lines after it are copied, not the thread's own.
          spindle_copied_lines: 5,
        },
      },
      imported: { forked_from: null, imported_from: origin, turn_count: 1 },
      restored: { forked_from: null, imported_from: origin, turn_count: 1 },
    });
  });

  it("writes its own session_meta (its id, forked_from_id) and keeps every other line as it came", async () => {
    const result = await inFreshObject(async (parts, threadId) => {
      const read = await readRolloutStream(upload(CODEX_ROLLOUT));
      const texts = read.ok ? read.lines.map((l) => l.text) : [];
      const before = Date.now();
      const imported = await importThread(
        parts,
        { tenant: "local", threadId, forkedFrom: "t_source" },
        read,
        () => {},
      );
      if (!imported.ok) return { threadId, imported };
      const stored = imported.value.log.rawAfter(0);
      const first = decodeTolerantly(stored.slice(0, 1)).lines[0];
      return {
        threadId,
        before,
        seqs: stored.map((r) => r.seq),
        rest: stored.slice(1).map((r) => r.line),
        readTexts: texts.slice(1),
        first,
        lastSeq: imported.value.log.lastSeq,
      };
    });
    const now = result.first?.timestamp;
    expect(Date.parse(now ?? "") - (result.before ?? 0)).toBeLessThan(60_000);
    expect(result).toEqual({
      threadId: result.threadId,
      before: result.before,
      seqs: Array.from({ length: 16 }, (_, i) => i + 1),
      // Byte for byte as uploaded (and as read), then the configuration it resolved to.
      rest: [
        ...CODEX_ROLLOUT.slice(1).map((line) => JSON.stringify(line)),
        JSON.stringify({ timestamp: now, type: "spindle_config", payload: RESOLVED_CONFIG }),
      ],
      readTexts: CODEX_ROLLOUT.slice(1).map((line) => JSON.stringify(line)),
      first: {
        timestamp: now,
        type: "session_meta",
        payload: {
          id: result.threadId,
          timestamp: now,
          cwd: "/src",
          originator: "codex_cli_rs",
          cli_version: "0.50.0",
          forked_from_id: "t_source",
          // The 14 lines after it are copied, not the thread's own.
          spindle_copied_lines: 14,
        },
      },
      lastSeq: 16,
    });
  });

  it("rebuilds the turn rows, turn_count, identity and configuration from the lines", async () => {
    const result = await inFreshObject(async (parts, threadId) => {
      let recordedRows: unknown;
      const imported = await importThread(
        parts,
        { tenant: "local", threadId, forkedFrom: "t_source" },
        await readRolloutStream(upload(CODEX_ROLLOUT)),
        // In the same step as the thread: the rows are already there.
        () => {
          recordedRows = parts.meta.lastTurn()?.id;
        },
      );
      if (!imported.ok) return { threadId, imported };
      const live = imported.value;
      return {
        threadId,
        recordedRows,
        meta: live.meta,
        storedMeta: parts.meta.thread(),
        config: live.session.state.config,
        storedConfig: parts.meta.config(),
        turns: ["turn_1", "turn_2", "turn_c", "turn_3"].map((id) => parts.meta.turn(id)),
        history: live.session.history
          .slice(0, live.session.history.length)
          .map((i) => (i as MessageItem).content ?? i.type),
      };
    });
    const meta = {
      tenant: "local",
      id: result.threadId,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      forked_from: "t_source",
      imported_from: null,
      // The compaction is not a user turn.
      turn_count: 3,
      warnings: [],
      metadata: {},
    };
    const config = RESOLVED_CONFIG;
    expect(result).toEqual({
      threadId: result.threadId,
      recordedRows: "turn_3",
      meta,
      storedMeta: meta,
      config,
      storedConfig: config,
      turns: [
        turnRow("turn_1", "turn", "completed", 2, 6),
        turnRow("turn_2", "turn", "interrupted", 7, 9),
        turnRow("turn_c", "compaction", "completed", 10, 12),
        // Left open with a call unanswered: it waits for the call's output. The import's
        // spindle_config line (16) comes after the lines it copied.
        turnRow("turn_3", "turn", "requires_action", 13, 16, [CALL]),
      ],
      history: [
        [{ type: "input_text", text: "hello" }],
        [{ type: "input_text", text: "/call lookup {}" }],
        "function_call",
      ],
    });
    expect(result.meta?.created_at).toBe(result.meta?.updated_at);
  });

  it("without forkedFrom, the thread is forked from nothing and its session_meta says none", async () => {
    const result = await inFreshObject(async (parts, threadId) => {
      const imported = await importThread(
        parts,
        { tenant: "local", threadId },
        await readRolloutStream(upload([SOURCE_META])),
        () => {},
      );
      if (!imported.ok) return imported;
      const first = decodeTolerantly(imported.value.log.rawAfter(0)).lines[0];
      return {
        forkedFrom: imported.value.meta.forked_from,
        turnCount: imported.value.meta.turn_count,
        payloadKeys: first?.type === "session_meta" ? Object.keys(first.payload).sort() : [],
      };
    });
    expect(result).toEqual({
      forkedFrom: null,
      turnCount: 0,
      payloadKeys: [
        "cli_version",
        "cwd",
        "id",
        "imported_from",
        "model_provider",
        "originator",
        "source",
        "spindle_copied_lines",
        "timestamp",
      ],
    });
  });

  it("a fork copies a thread whole, even one whose session_meta names a history_base", async () => {
    const paginated = {
      ...SOURCE_META,
      payload: {
        ...SOURCE_META.payload,
        history_base: { thread_id: "codex-parent", end_ordinal_exclusive: 9 },
      },
    };
    const result = await inFreshObject(async (parts, threadId) => {
      const imported = await importThread(
        parts,
        { tenant: "local", threadId, forkedFrom: "t_source" },
        await readRolloutStream(upload([paginated, ...CODEX_ROLLOUT.slice(1, 6)])),
        () => {},
      );
      return imported.ok ? pick(imported.value.meta) : imported;
    });
    expect(result).toEqual({ forked_from: "t_source", imported_from: null, turn_count: 1 });
  });

  it("a fork of a damaged rollout starts with its warnings", async () => {
    const result = await inFreshObject(async (parts, threadId) => {
      const imported = await importThread(
        parts,
        {
          tenant: "local",
          threadId,
          forkedFrom: "t_source",
          warnings: ["rollout lines 4-5 are missing"],
        },
        await readRolloutStream(upload([SOURCE_META])),
        () => {},
      );
      return imported.ok ? imported.value.meta.warnings : imported;
    });
    expect(result).toEqual([
      { code: "rollout_repaired", message: "rollout lines 4-5 are missing" },
    ]);
  });
});

describe("restoreThread: a thread rebuilt from R2 alone", () => {
  it("answers not_found when R2 holds no rollout for the thread, writing nothing", async () => {
    const result = await inFreshObject(async (parts, threadId, state) => {
      const log = new RolloutLog(parts.sql, systemClock, 0);
      const restored = await restoreThread(parts, { tenant: "local", threadId }, log);
      return { restored, tables: threadTables(state) };
    });
    expect(result).toEqual({
      restored: {
        ok: false,
        error: { code: "not_found", detail: "No rollout in R2 for this thread." },
      },
      tables: EMPTY_TABLES,
    });
  });

  it("rebuilds identity, configuration and turns from the flushed lines, on an emptied SQLite", async () => {
    const result = await inFreshObject(async (parts, threadId, state) => {
      const read = await readRolloutStream(upload(CODEX_ROLLOUT));
      const imported = await importThread(parts, { tenant: "local", threadId }, read, () => {});
      if (!imported.ok) return { imported };
      const original = imported.value;
      await original.segments.flush();
      const before = {
        meta: structuredClone(original.meta),
        config: structuredClone(original.session.state.config),
        turns: ["turn_1", "turn_2", "turn_c", "turn_3"].map((id) => parts.meta.turn(id)),
        lines: original.log.rawAfter(0).map((r) => r.line),
      };
      const restored = await restoreFromR2Alone(parts, threadId, state);
      if (!restored.ok) return { restored };
      const live = restored.value;
      return {
        before,
        after: {
          meta: live.meta,
          config: live.session.state.config,
          turns: ["turn_1", "turn_2", "turn_c", "turn_3"].map((id) => parts.meta.turn(id)),
          lines: (await LiveThread.load(parts))?.log.lastSeq,
        },
        // Every line is in R2: SQLite keeps none, and a checkpoint covers them.
        sqliteLines: live.log.rawAfter(0).length,
        checkpointSeq: live.checkpoint?.lastSeq,
      };
    });
    expect(result.before?.lines).toHaveLength(16);
    expect(result).toEqual({
      before: result.before,
      after: {
        meta: result.before?.meta,
        config: result.before?.config,
        turns: result.before?.turns,
        lines: 16,
      },
      sqliteLines: 0,
      checkpointSeq: 16,
    });
  });
});
