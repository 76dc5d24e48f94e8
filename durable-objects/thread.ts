import { DurableObject } from "cloudflare:workers";
import { DEFAULT_MODEL_CATALOG, DEFAULT_MODEL_SLUG } from "../shared/models/index.ts";
import type { ResponseItem, RolloutLine, ThreadConfig } from "../shared/protocol/index.ts";
import { ProviderError } from "../shared/providers/index.ts";
import { decodeRolloutLine, reconstructRollout } from "../shared/rollout/index.ts";
import {
  InvalidConfigurationError,
  resolveSessionConfiguration,
  type TurnOutcome,
  truncationPolicyOf,
  UnknownModelError,
} from "../shared/session/index.ts";
import type { Env } from "../worker/env.ts";
import type { ListResource, ThreadResource, TurnResource } from "../worker/schemas.ts";
import type {
  CreateThreadRequest,
  ListHistoryRequest,
  RpcFailure,
  RpcResult,
  StartTurnRequest,
  ThreadRpc,
} from "../worker/thread-rpc.ts";
import {
  DEFAULT_CHECKPOINT_EVERY_LINES,
  LiveThread,
  readWholeRollout,
  type StorageParts,
  systemClock,
  threadPrefix,
  withoutContextBaseline,
} from "./live-thread.ts";
import { MetaStore, type ThreadMeta, type TurnRow } from "./meta-store.ts";
import { RolloutLog } from "./rollout-log.ts";
import { migrate } from "./schema.ts";
import { SegmentStore } from "./segments.ts";
import { sqlOf } from "./sql.ts";
import { turnRowsFromRollout } from "./turn-index.ts";

/** Lines written at turn end are flushed to R2 this long after, so bursts share one segment. */
export const FLUSH_DELAY_MS = 1_000;
/** An unflushed tail longer than this is flushed right away. */
export const FLUSH_TAIL_MAX_LINES = 5_000;
const FLUSH_RETRY_MAX_MS = 5 * 60_000;

const ok = <T>(value: T): RpcResult<T> => ({ ok: true, value });
const fail = (
  code: RpcFailure["code"],
  detail: string,
  errors?: RpcFailure["errors"],
): RpcResult<never> => ({
  ok: false,
  error: errors ? { code, detail, errors } : { code, detail },
});

/** Maps the core's configuration errors to API failures. */
function configFailure(err: unknown): RpcResult<never> | undefined {
  if (err instanceof UnknownModelError)
    return fail("unknown_model", `Unknown model "${err.model}".`);
  if (err instanceof InvalidConfigurationError) {
    return fail("invalid_request", err.message, [{ path: `/${err.path}`, message: err.message }]);
  }
  return undefined;
}

/**
 * One conversation thread (design §5-§6). Thin: it wires the core engine to SQLite (the rollout
 * tail, checkpoint, manifest and meta) and R2 (segments), and serializes turns. The constructor only
 * migrates the schema; the first request loads the thread.
 */
export class Thread extends DurableObject<Env> implements ThreadRpc {
  readonly #parts: StorageParts;
  #live: LiveThread | undefined;
  #loading: Promise<LiveThread | undefined> | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage.sql);
    const sql = sqlOf(ctx.storage.sql);
    this.#parts = {
      checkpointEveryLines:
        Number(env.SPINDLE_CHECKPOINT_EVERY_LINES) || DEFAULT_CHECKPOINT_EVERY_LINES,
      sql,
      storage: ctx.storage,
      bucket: env.ROLLOUT,
      meta: new MetaStore(sql),
    };
  }

  /** The thread, loaded once per instance; undefined when it does not exist. */
  async #thread(): Promise<LiveThread | undefined> {
    if (this.#live) return this.#live;
    this.#loading ??= LiveThread.load(this.#parts).then((live) => {
      this.#live = live;
      this.#loading = undefined;
      if (live) this.#settleInterruptedTurn(live);
      return live;
    });
    return this.#loading;
  }

  /** A turn that was running when the instance went away ends as interrupted (reference §5.4). */
  #settleInterruptedTurn(live: LiveThread): void {
    const last = this.#parts.meta.lastTurn();
    if (last?.status !== "in_progress") return;
    live.log.append({
      type: "event_msg",
      payload: { type: "turn_aborted", turn_id: last.id, reason: "interrupted" },
    });
    this.#parts.meta.putTurn({ ...last, status: "interrupted", last_seq: live.log.lastSeq });
  }

  #resource(live: LiveThread): ThreadResource {
    const meta = live.meta;
    const last = this.#parts.meta.lastTurn();
    const status = live.running
      ? "running"
      : last?.status === "requires_action"
        ? "requires_action"
        : "idle";
    return {
      object: "thread",
      id: meta.id,
      status,
      config: live.session.state.config,
      turn_count: meta.turn_count,
      token_usage: live.session.history.tokenInfo ?? null,
      created_at: meta.created_at,
      updated_at: meta.updated_at,
      forked_from: meta.forked_from,
      warnings: meta.warnings,
    };
  }

  async createThread(req: CreateThreadRequest): Promise<RpcResult<ThreadResource>> {
    if ((await this.#thread()) !== undefined) {
      return fail("thread_exists", `Thread "${req.threadId}" already exists.`);
    }
    let config: ReturnType<typeof resolveSessionConfiguration>;
    try {
      config = resolveSessionConfiguration(
        undefined,
        req.config,
        DEFAULT_MODEL_CATALOG,
        DEFAULT_MODEL_SLUG,
      );
    } catch (err) {
      const failure = configFailure(err);
      if (failure) return failure;
      throw err;
    }
    const now = new Date(systemClock.nowMs()).toISOString();
    const meta: ThreadMeta = {
      tenant: req.tenant,
      id: req.threadId,
      created_at: now,
      updated_at: now,
      forked_from: null,
      turn_count: 0,
      warnings: [],
    };
    this.#parts.meta.put("thread", meta);
    this.#parts.meta.put("config", config);
    const log = new RolloutLog(this.#parts.sql, systemClock, 0);
    log.append({
      type: "session_meta",
      payload: {
        id: req.threadId,
        timestamp: now,
        cwd: config.environments[0]?.cwd ?? "/",
        originator: "spindle",
        cli_version: "spindle-0.1.0",
        source: "api",
        model_provider: config.provider,
      },
    });
    log.append({ type: "spindle_config", payload: config });
    const live = new LiveThread(this.#parts, meta, config, log, undefined, undefined);
    this.#live = live;
    await this.#scheduleFlush();
    return ok(this.#resource(live));
  }

  async getThread(): Promise<RpcResult<ThreadResource>> {
    const live = await this.#thread();
    return live ? ok(this.#resource(live)) : fail("not_found", "No such thread.");
  }

  async deleteThread(): Promise<RpcResult<null>> {
    const live = await this.#thread();
    if (!live) return fail("not_found", "No such thread.");
    await SegmentStore.deleteAll(this.env.ROLLOUT, threadPrefix(live.meta.tenant, live.meta.id));
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
    this.#live = undefined;
    migrate(this.ctx.storage.sql);
    return ok(null);
  }

  async startTurn(req: StartTurnRequest): Promise<RpcResult<TurnResource>> {
    const live = await this.#thread();
    if (!live) return fail("not_found", "No such thread.");
    if (live.running) {
      return fail(
        "thread_busy",
        `Turn ${live.running} is running; only on_busy "reject" is supported so far.`,
      );
    }
    const content = req.input.flatMap((m) => m.content);
    const items: ResponseItem[] = [];
    const meta = this.#parts.meta;
    const configBefore = JSON.stringify(live.session.state.config);
    let row: TurnRow | undefined;
    let outcome: TurnOutcome | undefined;
    try {
      const turn = live.session.runTurn({ content }, req.overrides as ThreadConfig | undefined);
      for (let next = await turn.next(); ; next = await turn.next()) {
        if (next.done) {
          outcome = next.value;
          break;
        }
        const event = next.value;
        if (event.type === "turn.started") {
          live.running = event.turn_id;
          live.meta.turn_count += 1;
          row = {
            id: event.turn_id,
            ordinal: live.meta.turn_count,
            status: "in_progress",
            first_seq: live.log.lastSeq,
            last_seq: live.log.lastSeq,
            pending_calls: [],
            usage: null,
            error: null,
          };
          this.#saveConfigIfChanged(live, configBefore);
          meta.put("thread", live.meta);
          meta.putTurn(row);
        } else if (event.type === "item.completed") {
          items.push(event.item);
        } else if (event.type === "token_count" && row) {
          row.usage = event.info ? { ...event.info.last_token_usage } : null;
        }
      }
    } catch (err) {
      const failure = configFailure(err);
      if (failure) return failure;
      if (!row) throw err;
      return ok(this.#failTurn(live, row, items, err));
    } finally {
      live.running = undefined;
    }
    if (!row || !outcome) return fail("internal", "The turn did not start.");
    row.status = outcome.status;
    row.pending_calls = outcome.status === "requires_action" ? outcome.pending_calls : [];
    row.last_seq = live.log.lastSeq;
    live.meta.updated_at = new Date(systemClock.nowMs()).toISOString();
    meta.put("thread", live.meta);
    meta.putTurn(row);
    await this.#scheduleFlush();
    return ok(this.#turnResource(live, row, items));
  }

  #saveConfigIfChanged(live: LiveThread, before: string): void {
    const config = live.session.state.config;
    if (JSON.stringify(config) === before) return;
    this.#parts.meta.put("config", config);
    live.log.append({ type: "spindle_config", payload: config });
  }

  #failTurn(live: LiveThread, row: TurnRow, items: ResponseItem[], err: unknown): TurnResource {
    const provider = err instanceof ProviderError;
    if (!provider) console.error("[thread] turn failed", err);
    const message = provider ? err.message : "The turn failed with an internal error.";
    const code = provider ? "provider_error" : "internal";
    live.log.append({
      type: "event_msg",
      payload: {
        type: "task_complete",
        turn_id: row.id,
        last_agent_message: null,
        error: { code, message },
      },
    });
    row.status = "failed";
    row.error = { code, message };
    row.last_seq = live.log.lastSeq;
    this.#parts.meta.putTurn(row);
    this.ctx.waitUntil(this.#scheduleFlush());
    return this.#turnResource(live, row, items);
  }

  #turnResource(live: LiveThread, row: TurnRow, items: ResponseItem[]): TurnResource {
    return {
      object: "turn",
      id: row.id,
      thread_id: live.meta.id,
      status: row.status,
      items,
      pending_calls: row.pending_calls,
      usage: row.usage,
      error: row.error,
    };
  }

  async getTurn(turnId: string): Promise<RpcResult<TurnResource>> {
    const live = await this.#thread();
    if (!live) return fail("not_found", "No such thread.");
    const row = this.#parts.meta.turn(turnId);
    if (!row) return fail("turn_not_found", `No turn "${turnId}" in this thread.`);
    const lines = await this.#linesBetween(live, row.first_seq, row.last_seq);
    const items = lines.flatMap((l) => (l.type === "response_item" ? [l.payload] : []));
    return ok(this.#turnResource(live, row, items));
  }

  /** Lines in [first, last]: from SQLite when it still has them, else from the R2 segments. */
  async #linesBetween(live: LiveThread, first: number, last: number): Promise<RolloutLine[]> {
    const stored = live.log.firstStoredSeq();
    if (stored !== undefined && stored <= first) {
      return live.log
        .rawAfter(first - 1, last - first + 1)
        .map((r) => decodeRolloutLine(r.line, r.seq));
    }
    const { lines: all } = await readWholeRollout(this.#parts, live.meta, live.log);
    return all.filter((r) => r.seq >= first && r.seq <= last).map((r) => r.line);
  }

  async listHistory(req: ListHistoryRequest): Promise<RpcResult<ListResource<ResponseItem>>> {
    const live = await this.#thread();
    if (!live) return fail("not_found", "No such thread.");
    const history = live.session.history;
    let start = 0;
    if (req.cursor !== undefined) {
      const parsed = parseCursor(req.cursor);
      if (!parsed || parsed.v !== history.historyVersion || parsed.i > history.items.length) {
        return fail(
          "invalid_request",
          "The cursor is invalid or the history was rewritten since.",
          [{ path: "cursor", message: "unknown or expired cursor" }],
        );
      }
      start = parsed.i;
    }
    const end = Math.min(start + req.limit, history.items.length);
    return ok({
      object: "list",
      data: history.items.slice(start, end),
      next_cursor: end < history.items.length ? makeCursor(history.historyVersion, end) : null,
    });
  }

  async getPrompt() {
    const live = await this.#thread();
    if (!live) return fail("not_found", "No such thread.");
    return ok(live.session.previewPrompt());
  }

  /**
   * Rebuilds the thread from R2 alone (design §6): every segment, plus whatever SQLite tail exists.
   * Works on an empty SQLite (the identity comes from the DO name `{tenant}:{thread}`).
   */
  async restore(): Promise<RpcResult<ThreadResource>> {
    const name = this.ctx.id.name;
    const [tenant, threadId] = name?.split(":") ?? [];
    if (!tenant || !threadId) return fail("internal", "This object has no thread name.");
    const existing = await this.#thread();
    const log = existing?.log ?? new RolloutLog(this.#parts.sql, systemClock, 0);
    const {
      lines: rows,
      segments,
      warnings,
    } = await readWholeRollout(this.#parts, { tenant, id: threadId }, log);
    if (rows.length === 0) return fail("not_found", "No rollout in R2 for this thread.");
    const lines = rows.map((r) => r.line);
    const configLine = lines.findLast((l) => l.type === "spindle_config");
    const metaLine = lines.find((l) => l.type === "session_meta");
    if (configLine?.type !== "spindle_config" || metaLine?.type !== "session_meta") {
      return fail("internal", "The rollout in R2 lacks its session_meta or configuration line.");
    }
    const config = configLine.payload;
    const turns = turnRowsFromRollout(rows);
    const meta: ThreadMeta = {
      tenant,
      id: threadId,
      created_at: metaLine.payload.timestamp ?? metaLine.timestamp,
      updated_at: lines.at(-1)?.timestamp ?? metaLine.timestamp,
      forked_from: metaLine.payload.forked_from_id ?? null,
      turn_count: turns.length,
      warnings: [],
    };
    const rebuilt = reconstructRollout(lines, { truncation: truncationPolicyOf(config) });
    const state = warnings.length > 0 ? withoutContextBaseline(rebuilt) : rebuilt;
    meta.warnings = [...warnings, ...state.warnings].map((message) => ({
      code: "rollout_repaired",
      message,
    }));
    const lastSeq = rows.at(-1)?.seq ?? 0;
    // Rewrite local state from the rollout: lines R2 holds are recorded as flushed.
    await this.ctx.storage.deleteAll();
    migrate(this.ctx.storage.sql);
    this.ctx.storage.transactionSync(() => {
      this.#parts.meta.put("thread", meta);
      this.#parts.meta.put("config", config);
      for (const t of turns) this.#parts.meta.putTurn(t);
      for (const s of segments) SegmentStore.recordDone(this.#parts.sql, s);
      const flushed = segments.at(-1)?.last_seq ?? 0;
      for (const r of rows) {
        if (r.seq > flushed) {
          RolloutLog.insert(this.#parts.sql, r.seq, r.text);
        }
      }
    });
    const live = new LiveThread(
      this.#parts,
      meta,
      config,
      new RolloutLog(this.#parts.sql, systemClock, lastSeq),
      undefined,
      state,
    );
    this.#live = live;
    return ok(this.#resource(live));
  }

  /** @internal For tests only: the live engine state that a cold start must reproduce exactly. */
  async inspectForTesting() {
    const live = await this.#thread();
    if (!live) return undefined;
    const { config, history, previousTurnSettings } = live.session.state;
    return {
      config,
      history: history.toState(),
      previousTurnSettings,
      lastSeq: live.log.lastSeq,
      flushedThrough: live.segments.flushedThrough(),
      checkpointSeq: live.checkpoint?.lastSeq,
    };
  }

  async #scheduleFlush(): Promise<void> {
    const live = this.#live;
    if (!live) return;
    if (live.log.lastSeq - live.segments.flushedThrough() >= FLUSH_TAIL_MAX_LINES) {
      this.ctx.waitUntil(this.alarm());
      return;
    }
    if ((await this.ctx.storage.getAlarm()) === null) {
      await this.ctx.storage.setAlarm(systemClock.nowMs() + FLUSH_DELAY_MS);
    }
  }

  /** Flushes the tail to R2, then checkpoints. A failure is retried with backoff; nothing is lost. */
  override async alarm(): Promise<void> {
    const live = await this.#thread();
    if (!live) return;
    try {
      await live.segments.flush();
      this.#parts.meta.put("flush_attempts", 0);
      await live.maybeCheckpoint();
    } catch (err) {
      const attempts = (this.#parts.meta.get<number>("flush_attempts") ?? 0) + 1;
      this.#parts.meta.put("flush_attempts", attempts);
      const delay = Math.min(FLUSH_DELAY_MS * 2 ** attempts, FLUSH_RETRY_MAX_MS);
      console.warn(`[rollout] flush failed (attempt ${attempts}), retrying in ${delay} ms`, err);
      await this.ctx.storage.setAlarm(systemClock.nowMs() + delay);
    }
  }
}

function makeCursor(version: number, index: number): string {
  return btoa(JSON.stringify({ v: version, i: index }));
}

function parseCursor(cursor: string): { v: number; i: number } | undefined {
  try {
    const value = JSON.parse(atob(cursor)) as unknown;
    if (typeof value !== "object" || value === null) return undefined;
    const { v, i } = value as Record<string, unknown>;
    return Number.isInteger(v) && Number.isInteger(i) && (i as number) >= 0
      ? { v: v as number, i: i as number }
      : undefined;
  } catch {
    return undefined;
  }
}
