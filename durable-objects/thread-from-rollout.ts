import type { CreateFromRolloutRequest, RpcResult } from "../shared/api/index.ts";
import { DEFAULT_MODEL_SLUG, type ModelCatalog } from "../shared/models/index.ts";
import type {
  RolloutLine,
  SessionConfiguration,
  ThreadConfig,
  ThreadMetadata,
} from "../shared/protocol/index.ts";
import {
  createCheckpoint,
  encodeRolloutLine,
  type ReconstructedState,
  reconstructRollout,
} from "../shared/rollout/index.ts";
import {
  resolveSessionConfiguration,
  threadConfigFromTurnContext,
  truncationPolicyOf,
} from "../shared/session/index.ts";
import { creationTime, ThreadLedger } from "./ledger.ts";
import {
  LiveThread,
  readWholeRollout,
  type StorageParts,
  systemClock,
  withoutContextBaseline,
} from "./live-thread.ts";
import { newThreadMeta, type ThreadMeta, type TurnRow } from "./meta-store.ts";
import { fail, ok } from "./results.ts";
import type { ImportedLine, ImportResult } from "./rollout-import.ts";
import { RolloutLog } from "./rollout-log.ts";
import { clearRolloutState } from "./schema.ts";
import { SegmentStore } from "./segments.ts";
import { turnRowsFromRollout } from "./turn-index.ts";

/**
 * A thread rebuilt from rollout lines alone: the shared body of an import (or fork), which writes
 * the lines it was given, and of a restore, which reads them back from R2.
 */
interface RebuiltThread {
  meta: ThreadMeta;
  config: SessionConfiguration;
  turns: TurnRow[];
  state: ReconstructedState;
}

interface RebuildInput {
  tenant: string;
  threadId: string;
  lines: readonly { seq: number; line: RolloutLine }[];
  createdAt: string;
  updatedAt: string;
  forkedFrom: string | null;
  /**
   * What reading the lines skipped (a damaged segment or line, a gap): these become warnings, and
   * the context baseline is dropped so the next turn re-sends the full context.
   */
  lost: readonly string[];
}

function rebuildThread(catalog: ModelCatalog, input: RebuildInput): RpcResult<RebuiltThread> {
  const lines = input.lines.map((l) => l.line);
  const session = lines.find((l) => l.type === "session_meta");
  const cwd = session?.type === "session_meta" ? session.payload.cwd : undefined;
  const resolved = configOfRollout(catalog, lines, cwd);
  if (!resolved.ok) return resolved;
  const { config } = resolved.value;
  const turns = turnRowsFromRollout(input.lines);
  const rebuilt = reconstructRollout(lines, { truncation: truncationPolicyOf(config) });
  const state = input.lost.length > 0 ? withoutContextBaseline(rebuilt) : rebuilt;
  const meta: ThreadMeta = {
    ...newThreadMeta(input.tenant, input.threadId, input.createdAt, input.forkedFrom),
    updated_at: input.updatedAt,
    turn_count: turns.filter((t) => t.kind !== "compaction").length,
    metadata: metadataOfRollout(lines),
    warnings: [...input.lost, ...resolved.value.warnings, ...state.warnings].map((message) => ({
      code: "rollout_repaired",
      message,
    })),
  };
  return ok({ meta, config, turns, state });
}

/**
 * Creates a thread from an uploaded or forked rollout (as read and decoded): its own
 * `session_meta` (its id, `forked_from_id`) replaces the source's, every other line is kept as it
 * came. `inTransaction` runs in the step that makes the thread exist (to record the request's
 * key). Nothing is written when the rollout is refused.
 */
export function importThread(
  parts: StorageParts,
  req: Pick<
    CreateFromRolloutRequest,
    "tenant" | "threadId" | "forkedFrom" | "warnings" | "metadata"
  >,
  read: ImportResult,
  inTransaction: () => void,
): RpcResult<LiveThread> {
  if (!read.ok) {
    return fail("invalid_request", `Line ${read.lineNumber}: ${read.reason}`, [
      { path: `/line/${read.lineNumber}`, message: read.reason },
    ]);
  }
  const [first, ...rest] = read.lines;
  if (!first) {
    return fail("invalid_request", "The rollout is empty.", [
      { path: "/line/1", message: "no line" },
    ]);
  }
  if (first.line.type !== "session_meta") {
    return fail("invalid_request", "The first line must be session_meta.", [
      { path: "/line/1", message: `expected session_meta, got ${first.line.type}` },
    ]);
  }
  const now = creationTime(parts.sql, systemClock.nowMs());
  const forkedFrom = req.forkedFrom ?? null;
  const ownMeta = {
    ...first.line.payload,
    id: req.threadId,
    timestamp: now,
    ...(forkedFrom ? { forked_from_id: forkedFrom } : {}),
    // The copied lines are not this thread's own: a restore does not count their usage.
    spindle_copied_lines: rest.length,
  };
  const metaLine: RolloutLine = { timestamp: now, type: "session_meta", payload: ownMeta };
  const stored: ImportedLine[] = [{ text: encodeRolloutLine(metaLine), line: metaLine }, ...rest];
  const rebuilt = rebuildThread(parts.catalog, {
    tenant: req.tenant,
    threadId: req.threadId,
    lines: stored.map((l, i) => ({ seq: i + 1, line: l.line })),
    createdAt: now,
    updatedAt: now,
    forkedFrom,
    // A fork of a damaged rollout lacks lines: as for its source, the context is sent again.
    lost: req.warnings ?? [],
  });
  if (!rebuilt.ok) return rebuilt;
  const { meta, config, turns, state } = rebuilt.value;
  const log = new RolloutLog(parts.sql, systemClock, 0);
  parts.storage.transactionSync(() => {
    for (const line of stored) log.appendText(line.text);
    if (req.metadata !== undefined) {
      meta.metadata = req.metadata;
      log.append({ type: "spindle_metadata", payload: { metadata: req.metadata } });
      meta.updated_at = log.lastWrittenAt ?? meta.updated_at;
    }
    parts.meta.put("config", config);
    parts.meta.put("thread", meta);
    for (const t of turns) parts.meta.putTurn(t);
    inTransaction();
  });
  return ok(new LiveThread(parts, meta, config, log, undefined, state));
}

/**
 * Rebuilds a thread from R2 alone (design §6): every segment, plus whatever SQLite tail exists,
 * on an empty SQLite too. Local state is rewritten from the rollout in one transaction; events,
 * queued turns and idempotency keys stay. SQLite keeps only the lines R2 lacks (their flush is
 * the caller's to schedule), and a checkpoint of the lines R2 holds, so the next cold start needs
 * no R2 read.
 */
export async function restoreThread(
  parts: StorageParts,
  name: { tenant: string; threadId: string },
  log: RolloutLog,
): Promise<RpcResult<LiveThread>> {
  const whole = await readWholeRollout(parts, { tenant: name.tenant, id: name.threadId }, log, {
    everyLine: true,
  });
  const rows = whole.lines;
  if (rows.length === 0) return fail("not_found", "No rollout in R2 for this thread.");
  const lines = rows.map((r) => r.line);
  const metaLine = lines.find((l) => l.type === "session_meta");
  if (metaLine?.type !== "session_meta") {
    return fail("internal", "The rollout in R2 has no session_meta line.");
  }
  const rebuilt = rebuildThread(parts.catalog, {
    ...name,
    lines: rows,
    createdAt: metaLine.payload.timestamp ?? metaLine.timestamp,
    updatedAt: newestTimestamp(lines) ?? metaLine.timestamp,
    forkedFrom: metaLine.payload.forked_from_id ?? null,
    lost: whole.warnings,
  });
  if (!rebuilt.ok) return fail("internal", "The rollout's configuration cannot be resolved.");
  const { meta, config, turns, state } = rebuilt.value;
  const lastSeq = rows.at(-1)?.seq ?? 0;
  const flushed = whole.segments.at(-1)?.last_seq ?? 0;
  // A reload needs every line after the checkpoint in SQLite. Not when lines were lost: a
  // checkpoint would keep the context baseline that `state` dropped.
  const checkpoint =
    whole.warnings.length === 0 && flushed > 0
      ? createCheckpoint(
          rows.filter((r) => r.seq <= flushed).map((r) => r.line),
          { truncation: truncationPolicyOf(config), lastSeq: flushed },
        )
      : undefined;
  const copied = metaLine.payload.spindle_copied_lines ?? 0;
  parts.storage.transactionSync(() => {
    clearRolloutState(parts.storage.sql);
    // The thread's own usage, as its lines count it (the SQLite state may be the lost part).
    ThreadLedger.rebuild(parts.sql, meta.created_at, rows, 1 + copied);
    parts.meta.put("thread", meta);
    parts.meta.put("config", config);
    for (const t of turns) parts.meta.putTurn(t);
    for (const s of whole.segments) SegmentStore.recordDone(parts.sql, s);
    for (const r of rows) if (r.seq > flushed) RolloutLog.insert(parts.sql, r.seq, r.text);
  });
  const restoredLog = new RolloutLog(parts.sql, systemClock, lastSeq);
  const live = new LiveThread(parts, meta, config, restoredLog, checkpoint, state);
  if (checkpoint) live.checkpoints.save(checkpoint);
  return ok(live);
}

/** A rollout's metadata: its newest `spindle_metadata` line's, else none. */
export function metadataOfRollout(lines: readonly RolloutLine[]): ThreadMetadata {
  const newest = lines.findLast((l) => l.type === "spindle_metadata");
  return newest?.type === "spindle_metadata" ? newest.payload.metadata : {};
}

/**
 * The latest time among the lines: a thread's `updated_at`. Not simply the last line's: an
 * imported or forked thread's own `session_meta` is newer than the lines it copied.
 */
export function newestTimestamp(lines: readonly RolloutLine[]): string | undefined {
  let newest: string | undefined;
  let newestMs = Number.NEGATIVE_INFINITY;
  for (const line of lines) {
    const ms = Date.parse(line.timestamp);
    if (ms >= newestMs) {
      newestMs = ms;
      newest = line.timestamp;
    }
  }
  return newest;
}

/**
 * A rollout's configuration: its newest `spindle_config` line, else one resolved from its newest
 * `turn_context` (a plain Codex rollout), else the defaults at the session's cwd.
 */
export function configOfRollout(
  catalog: ModelCatalog,
  lines: readonly RolloutLine[],
  cwd: string | undefined,
): RpcResult<{ config: SessionConfiguration; warnings: string[] }> {
  const own = lines.findLast((l) => l.type === "spindle_config");
  if (own?.type === "spindle_config") return ok({ config: own.payload, warnings: [] });
  const context = lines.findLast((l) => l.type === "turn_context");
  let update: ThreadConfig = cwd ? { cwd } : {};
  const warnings: string[] = [];
  if (context?.type === "turn_context") {
    const derived = threadConfigFromTurnContext(context.payload, new Set(catalog.slugs()));
    update = derived.config;
    warnings.push(
      ...derived.dropped.map((d) => `imported ${d} is not supported here; the default is used`),
    );
  }
  try {
    const config = resolveSessionConfiguration(undefined, update, catalog, DEFAULT_MODEL_SLUG);
    return ok({ config, warnings });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return fail("invalid_request", `The rollout's settings cannot be used: ${message}`, [
      { path: "/line/1", message },
    ]);
  }
}
