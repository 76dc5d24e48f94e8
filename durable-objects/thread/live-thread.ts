import type { Env } from "../../env.ts";
import type { CreateThreadRequest, SharedSegment, TenantHome } from "../../shared/api/index.ts";
import {
  ContextManager,
  freezeItemsInPlace,
  type TruncationPolicy,
} from "../../shared/context-manager/index.ts";
import type { ServerTools } from "../../shared/mcp/index.ts";
import {
  CacheTracker,
  newestRequest,
  type ReplayOptions,
} from "../../shared/model-requests/index.ts";
import { DEFAULT_MODEL_SLUG, type ModelCatalog } from "../../shared/models/index.ts";
import { describeError } from "../../shared/observability/index.ts";
import type { IdSource } from "../../shared/ports/index.ts";
import type { RolloutLine, SessionConfiguration } from "../../shared/protocol/index.ts";
import {
  type Checkpoint,
  createCheckpoint,
  extendCheckpoint,
  isHistoryRewrite,
  type ReconstructedState,
  reconstructFromCheckpoint,
  reconstructRollout,
} from "../../shared/rollout/index.ts";
import {
  assertContextFits,
  type EngineDeps,
  resolveSessionConfiguration,
  ThreadSession,
  truncationPolicyOf,
} from "../../shared/session/index.ts";
import { uuidv7 } from "../../shared/uuid/index.ts";
import { systemClock } from "../common/clock.ts";
import { objectLog } from "../common/log.ts";
import { tenantPathOf, threadNameOf } from "../common/placement.ts";
import { catalogOf, modelClientFactory, ProviderReport } from "./providers.ts";
import {
  CheckpointStore,
  DEFAULT_ITEM_GROUP_LIMITS,
  type ItemGroupLimits,
} from "./storage/checkpoint-store.ts";
import { creationTime, ThreadLedger } from "./storage/ledger.ts";
import {
  MetaStore,
  newThreadMeta,
  sessionMetaPayload,
  type ThreadMeta,
} from "./storage/meta-store.ts";
import { SqliteRequestMemory } from "./storage/request-memory.ts";
import { decodeTolerantly, firstMissingSeq, RolloutLog } from "./storage/rollout-log.ts";
import { SegmentStore } from "./storage/segments.ts";
import { type Sql, sqlOf } from "./storage/sql.ts";

/** A new checkpoint is taken once this many lines were written after the last one. */
export const DEFAULT_CHECKPOINT_EVERY_LINES = 250;

export const randomIds: IdSource = { uuidv7: () => uuidv7() };

/**
 * The R2 prefix of a thread's objects: `threads/{tenant}/{thread}/`, with the tenant's
 * incarnation (`{tenant}.{incarnation}`) when it has one, as in the object's name.
 */
export function threadPrefix(
  home: Pick<TenantHome, "tenant" | "incarnation">,
  threadId: string,
): string {
  return `threads/${tenantPathOf(home)}/${threadId}/`;
}

export interface StorageParts {
  catalog: ModelCatalog;
  /** The model client factory of a thread's turns. */
  modelClients: (threadId: string, report: ProviderReport) => EngineDeps["modelClient"];
  /** Lines between checkpoints. */
  checkpointEveryLines: number;
  /** How a checkpoint's history is grouped in storage. */
  checkpointGroups: ItemGroupLimits;
  sql: Sql;
  storage: DurableObjectStorage;
  /** The tenant incarnation the object belongs to, from its name (its R2 keys carry it). */
  incarnation: string | null;
  /** The bucket of the tenant's jurisdiction, once the thread's placement is known. */
  bucket: R2Bucket;
  meta: MetaStore;
  /** The instance's MCP servers (none: client tools only). */
  serverTools?: ServerTools;
  /**
   * Admits one more model request of the running task, reserving what `reserve` says (the
   * tenant's quotas); undefined: admitted at once. A turn's rounds after server calls ask it.
   */
  admitMore?: (reserve: () => number) => Promise<boolean> | undefined;
}

/**
 * The stores and settings of one object, from its storage and the environment; `bucket` is the
 * R2 bucket of the tenant's jurisdiction.
 */
export function storagePartsOf(
  ctx: DurableObjectState,
  env: Env,
  bucket: R2Bucket = env.ROLLOUT,
): StorageParts {
  const sql = sqlOf(ctx.storage.sql);
  return {
    catalog: catalogOf(env),
    modelClients: (threadId, report) => modelClientFactory(env, threadId, report),
    checkpointEveryLines:
      Number(env.SPINDLE_CHECKPOINT_EVERY_LINES) || DEFAULT_CHECKPOINT_EVERY_LINES,
    checkpointGroups: {
      ...DEFAULT_ITEM_GROUP_LIMITS,
      maxItems: Number(env.SPINDLE_CHECKPOINT_GROUP_ITEMS) || DEFAULT_ITEM_GROUP_LIMITS.maxItems,
    },
    sql,
    storage: ctx.storage,
    incarnation: threadNameOf(ctx)?.incarnation ?? null,
    bucket,
    meta: new MetaStore(sql),
  };
}

/**
 * A loaded thread: the engine plus the stores it writes through. Built on the first request after
 * a cold start (the constructor only migrates the schema, design §6).
 */
export class LiveThread {
  /** The stores and settings it was built with. */
  readonly parts: StorageParts;
  readonly meta: ThreadMeta;
  readonly session: ThreadSession;
  readonly log: RolloutLog;
  readonly segments: SegmentStore;
  readonly checkpoints: CheckpointStore;
  /** The newest checkpoint, kept so the next one extends it without re-reading the rollout. */
  checkpoint: Checkpoint | undefined;
  /** The turn running now, if any (one at a time). */
  running: string | undefined;
  /**
   * History rewrites in the whole rollout, counted as their lines are written. History cursors
   * carry it: the engine's `historyVersion` counts from the newest compaction after a reload (as
   * Codex resumes), so it cannot tell a cursor from before a reload from a stale one.
   */
  rewrites: number;
  /** The thread's side of the usage ledger: an entry per provider request, from its line. */
  readonly ledger: ThreadLedger;
  /** The cache report of each request against the one before (design §14). */
  readonly cache: CacheTracker;
  /** What the provider last answered, for the running task's log line. */
  readonly provider = new ProviderReport();
  readonly #checkpointEveryLines: number;
  /** A model's `prompt_cache_ttl_s` (null: unknown). */
  readonly #cacheTtlS: (model: string) => number | null;

  constructor(
    parts: StorageParts,
    meta: ThreadMeta,
    config: SessionConfiguration,
    log: RolloutLog,
    checkpoint: Checkpoint | undefined,
    state: ReconstructedState | undefined,
    /** The store `checkpoint` was loaded from: it knows which item groups are stored. */
    checkpoints = new CheckpointStore(parts.sql, parts.storage, parts.checkpointGroups),
    /**
     * The segment store of the thread this one reloads, if any: a flush it has in flight goes on,
     * and one store knows what it wrote (two would each plan the same next segment).
     */
    segments = new SegmentStore(
      parts.sql,
      parts.bucket,
      threadPrefix({ tenant: meta.tenant, incarnation: parts.incarnation }, meta.id),
      log,
      meta.created_at,
    ),
  ) {
    this.parts = parts;
    this.meta = meta;
    this.log = log;
    this.segments = segments;
    this.checkpoints = checkpoints;
    this.checkpoint = checkpoint;
    this.#checkpointEveryLines = parts.checkpointEveryLines;
    this.rewrites = state?.rewrites ?? 0;
    const ledger = new ThreadLedger(
      parts.sql,
      meta.created_at,
      state?.history.tokenInfo?.total_token_usage,
      parts.meta.lastTurn()?.id,
    );
    this.ledger = ledger;
    const catalog = parts.catalog;
    this.#cacheTtlS = (model) => catalog.get(model)?.promptCacheTtlS ?? null;
    const cache = new CacheTracker(new SqliteRequestMemory(parts.sql, parts.meta), this.#cacheTtlS);
    this.cache = cache;
    const clients = parts.modelClients(meta.id, this.provider);
    const deps: EngineDeps = {
      clock: systemClock,
      ids: randomIds,
      catalog: parts.catalog,
      defaultModel: DEFAULT_MODEL_SLUG,
      // The engine asks for a client per task, for the model its requests go to.
      modelClient: (model, provider) => {
        ledger.requestModel = model.slug;
        const client = clients(model, provider);
        return {
          stream: (prompt, signal) => {
            this.provider.requestStartedMs = systemClock.nowMs();
            return client.stream(prompt, signal);
          },
        };
      },
      ...(parts.serverTools ? { serverTools: parts.serverTools } : {}),
      admitRound: () => parts.admitMore?.(() => this.session.reservation({ kind: "round" })),
      sink: {
        append: (item) => {
          log.append(item);
          if (isHistoryRewrite(item)) this.rewrites += 1;
          // Same synchronous step as the line: the entry is durable exactly when the line is.
          const usage = ledger.observe(
            item,
            log.lastSeq,
            log.lastWrittenAt ?? new Date(systemClock.nowMs()).toISOString(),
          );
          cache.observe(item, usage);
        },
      },
      // The request's line was just appended: its seq and time are the log's newest.
      requestSent: (request) =>
        cache.sent(log.lastSeq, Date.parse(log.lastWrittenAt ?? ""), request),
    };
    const history = new ContextManager(state?.history);
    this.session = new ThreadSession(
      state?.previousTurnSettings === undefined
        ? { config, history }
        : { config, history, previousTurnSettings: state.previousTurnSettings },
      deps,
    );
  }

  /**
   * A new thread: its `session_meta` and `spindle_config` lines, identity and configuration,
   * written in one transaction with whatever `inTransaction` records (the request's key).
   */
  static create(
    parts: StorageParts,
    req: Pick<CreateThreadRequest, "tenant" | "threadId" | "config" | "metadata">,
    inTransaction: () => void,
  ): LiveThread {
    const config = resolveSessionConfiguration(
      undefined,
      req.config,
      parts.catalog,
      DEFAULT_MODEL_SLUG,
    );
    // A thread whose instructions and context alone overflow its model could take no turn.
    const model = parts.catalog.get(config.model);
    if (model) assertContextFits(config, model, systemClock.nowMs(), undefined);
    const now = creationTime(parts.sql, systemClock.nowMs());
    const meta = newThreadMeta(req.tenant, req.threadId, now, null);
    const log = new RolloutLog(parts.sql, systemClock, 0);
    parts.storage.transactionSync(() => {
      log.append({ type: "session_meta", payload: sessionMetaPayload(req.threadId, now, config) });
      log.append({ type: "spindle_config", payload: config });
      if (req.metadata !== undefined && Object.keys(req.metadata).length > 0) {
        meta.metadata = req.metadata;
        log.append({ type: "spindle_metadata", payload: { metadata: req.metadata } });
      }
      // The newest line's time, as a restore from the rollout reads it back.
      meta.updated_at = log.lastWrittenAt ?? now;
      parts.meta.put("thread", meta);
      parts.meta.put("config", config);
      inTransaction();
    });
    const live = new LiveThread(parts, meta, config, log, undefined, undefined);
    live.cache.none();
    return live;
  }

  /**
   * Rebuilds the newest provider request from the rollout when SQLite keeps none (an import, a
   * fork, a restore, a thread of an earlier release), so the next request's cache report compares
   * with it. Lines written meanwhile, or a read that fails, leave it unknown: the next report is
   * null, the ones after it are whole.
   */
  async rebuildRequestMemory(): Promise<void> {
    if (!this.cache.needsRebuild) return;
    const through = this.log.lastSeq;
    try {
      const { lines } = await readWholeRollout(this.parts, this.meta, this.log);
      if (!this.cache.needsRebuild || this.log.lastSeq !== through) return;
      this.cache.remember(newestRequest(lines, this.replayOptions));
    } catch (err) {
      objectLog.warn("thread.request_memory_unread", {
        tenant: this.meta.tenant,
        thread: this.meta.id,
        error: describeError(err),
      });
    }
  }

  /** How the thread's requests are rebuilt from its rollout (`turnRequests`, `newestRequest`). */
  get replayOptions(): ReplayOptions {
    return { truncation: this.truncation, cacheTtlS: this.#cacheTtlS };
  }

  /** Sets `updated_at` to the newest line's time, as a restore from the rollout reads it back. */
  touch(store: MetaStore): void {
    this.meta.updated_at = this.log.lastWrittenAt ?? this.meta.updated_at;
    store.put("thread", this.meta);
  }

  get truncation(): TruncationPolicy {
    return truncationPolicyOf(this.session.state.config);
  }

  /**
   * Loads a thread from SQLite: the newest checkpoint plus the lines after it. Falls back to the
   * whole rollout (R2 segments + SQLite tail) when the checkpoint cannot answer.
   */
  static async load(
    parts: StorageParts,
    /** The segment store of the thread this reloads in the same instance (rollback, inject). */
    segments?: SegmentStore,
  ): Promise<LiveThread | undefined> {
    const meta = parts.meta.thread();
    const config = parts.meta.config();
    if (meta === undefined || config === undefined) return undefined;
    const checkpoints = new CheckpointStore(parts.sql, parts.storage, parts.checkpointGroups);
    let checkpoint: Checkpoint | undefined;
    let unreadable: string | undefined;
    try {
      checkpoint = checkpoints.load();
    } catch (err) {
      // A checkpoint that cannot be read is only a cache: drop it and replay the rollout.
      unreadable = `checkpoint unreadable (${(err as Error).message}); rebuilt from the rollout`;
      checkpoints.clear();
    }
    const after = checkpoint?.lastSeq ?? 0;
    // Not `flushedThrough`: a fork's borrowed segments hold lines after its first, pending one.
    const lastSeq = Math.max(
      RolloutLog.maxStoredSeq(parts.sql),
      after,
      SegmentStore.lastDoneSeqOf(parts.sql),
    );
    const log = new RolloutLog(parts.sql, systemClock, lastSeq);
    const truncation = truncationPolicyOf(config);
    const raw = log.rawAfter(after);
    const missing = firstMissingSeq(raw, after, lastSeq);
    const { lines: tail, warnings } = decodeTolerantly(raw);
    // Frozen in place, the tail's items are shared by the history replayed from it and by the
    // next checkpoint, which takes these lines from memory (`RolloutLog.remember`).
    freezeItemsInPlace(
      tail.flatMap((line) => (line.type === "response_item" ? [line.payload] : [])),
    );
    let state: ReconstructedState | { needsFullReplay: true; reason: string } =
      unreadable !== undefined
        ? { needsFullReplay: true, reason: unreadable }
        : missing !== undefined
          ? { needsFullReplay: true, reason: `rollout line ${missing} is not in SQLite` }
          : checkpoint === undefined
            ? reconstructRollout(tail, { truncation })
            : reconstructFromCheckpoint(checkpoint, tail, { truncation });
    if (!("needsFullReplay" in state) && warnings.length === 0) log.remember(after, raw, tail);
    if ("needsFullReplay" in state) {
      objectLog.warn("thread.full_replay", {
        tenant: meta.tenant,
        thread: meta.id,
        reason: state.reason,
      });
      const whole = await readWholeRollout(parts, meta, log);
      warnings.splice(0, warnings.length, ...whole.warnings);
      state = reconstructRollout(
        whole.lines.map((l) => l.line),
        { truncation },
      );
    }
    if (warnings.length > 0) state = withoutContextBaseline(state);
    const live = new LiveThread(parts, meta, config, log, checkpoint, state, checkpoints, segments);
    live.#noteWarnings(
      [...(unreadable ? [unreadable] : []), ...warnings, ...state.warnings],
      parts.meta,
    );
    return live;
  }

  #noteWarnings(warnings: readonly string[], meta: MetaStore): void {
    if (warnings.length === 0) return;
    const known = new Set(this.meta.warnings.map((w) => w.message));
    const fresh = warnings.filter((w) => !known.has(w));
    if (fresh.length === 0) return;
    this.meta.warnings.push(...fresh.map((message) => ({ code: "rollout_repaired", message })));
    meta.put("thread", this.meta);
  }

  /**
   * Takes a new checkpoint when enough lines accumulated, then drops SQLite lines that are both
   * in R2 and covered by the checkpoint. Runs after a flush, off the request path.
   */
  async maybeCheckpoint(
    readWhole: () => Promise<{ lines: { seq: number; line: RolloutLine }[] }>,
  ): Promise<void> {
    const after = this.checkpoint?.lastSeq ?? 0;
    const flushed = this.segments.flushedThrough();
    if (flushed - after < this.#checkpointEveryLines) return;
    // Lines this instance wrote (or read at load) are still in memory, and every one is in
    // SQLite too (rows after the checkpoint are never deleted): no rows to read and decode.
    let lines = this.log.linesInMemory(after, flushed);
    let missing: number | undefined;
    if (lines === undefined) {
      const raw = this.log.rawAfter(after, flushed - after);
      missing = firstMissingSeq(raw, after, flushed);
      lines = decodeTolerantly(raw).lines;
    }
    const opts = { truncation: this.truncation, lastSeq: flushed };
    let next: Checkpoint | { needsFullReplay: true; reason: string } =
      missing !== undefined
        ? { needsFullReplay: true, reason: "lines after the checkpoint are not all in SQLite" }
        : this.checkpoint
          ? extendCheckpoint(this.checkpoint, lines, opts)
          : createCheckpoint(lines, opts);
    if ("needsFullReplay" in next) {
      // A rollback deeper than the checkpoint's window (or a new truncation policy): start over
      // from the whole rollout, once.
      const whole = await readWhole();
      next = createCheckpoint(
        whole.lines.filter((l) => l.seq <= flushed).map((l) => l.line),
        opts,
      );
    }
    // The runs a load will give back unread are marked where the newest request holds them.
    for (const run of this.checkpoints.save(next)) this.cache.stored(run.items, run.key);
    this.checkpoint = next;
    this.log.deleteThrough(Math.min(next.lastSeq, this.segments.flushedThrough()));
  }
}

/**
 * After lost lines, the model may no longer have seen the context the reference describes: drop
 * the reference and the world-state baseline so the next turn sends the full context again.
 */
export function withoutContextBaseline(state: ReconstructedState): ReconstructedState {
  const { referenceContextItem: _r, worldStateBaseline: _w, ...history } = state.history;
  return { ...state, history };
}

export interface WholeRolloutLine {
  seq: number;
  /** The stored bytes of the line (kept as-is on restore and export). */
  text: string;
  line: RolloutLine;
}

/**
 * Every line of a thread through `log.lastSeq` (with `everyLine`: through the newest line found,
 * for a restore whose SQLite may be empty), from R2 segments and SQLite. Unreadable segments or
 * lines, and the gaps they leave, come back as warnings rather than errors; `lines` then lacks
 * them (it is complete exactly when it holds as many lines as its last seq).
 *
 * SQLite is read first, in one synchronous step: a line is dropped from SQLite only once it is in
 * an R2 segment, and segments are never rewritten, so a flush or a tidy that runs while R2 is
 * being read cannot make a line fall between the two reads. A line of a damaged segment that
 * SQLite still holds is taken from SQLite.
 */
export async function readWholeRollout(
  parts: StorageParts,
  meta: Pick<ThreadMeta, "tenant" | "id">,
  log: RolloutLog,
  { everyLine = false } = {},
): Promise<{
  lines: WholeRolloutLine[];
  /** The seq of the rollout's last line, read or not. */
  lastSeq: number;
  segments: SharedSegment[];
  warnings: string[];
}> {
  const local = everyLine ? log.rawAfter(0) : log.rawAfter(0, log.lastSeq);
  const r2 = await SegmentStore.readAll(
    parts.bucket,
    threadPrefix({ tenant: meta.tenant, incarnation: parts.incarnation }, meta.id),
  );
  const lastSeq = everyLine
    ? Math.max(log.lastSeq, local.at(-1)?.seq ?? 0, r2.lines.at(-1)?.seq ?? 0)
    : log.lastSeq;
  const bySeq = new Map<number, string>();
  for (const row of r2.lines) if (row.seq <= lastSeq) bySeq.set(row.seq, row.line);
  for (const row of local) if (!bySeq.has(row.seq)) bySeq.set(row.seq, row.line);
  const warnings = [...r2.warnings];
  const lines: WholeRolloutLine[] = [];
  let gapFrom: number | undefined;
  for (let seq = 1; seq <= lastSeq + 1; seq++) {
    const text = seq <= lastSeq ? bySeq.get(seq) : undefined;
    if (text === undefined && seq <= lastSeq) {
      gapFrom ??= seq;
      continue;
    }
    if (gapFrom !== undefined) {
      warnings.push(`rollout lines ${gapFrom}-${seq - 1} are missing`);
      gapFrom = undefined;
    }
    if (text === undefined) break;
    const decoded = decodeTolerantly([{ seq, line: text }]);
    warnings.push(...decoded.warnings);
    const line = decoded.lines[0];
    if (line) lines.push({ seq, text, line });
  }
  return { lines, lastSeq, segments: r2.segments, warnings };
}
