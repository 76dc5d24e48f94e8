import type {
  CreateFromRolloutRequest,
  RpcResult,
  SharedSegment,
} from "../../../shared/api/index.ts";
import { DEFAULT_MODEL_SLUG, type ModelCatalog } from "../../../shared/models/index.ts";
import { describeError } from "../../../shared/observability/index.ts";
import type {
  HistoryBase,
  ImportedFrom,
  RolloutLine,
  SessionConfiguration,
  SessionMeta,
  ThreadMetadata,
} from "../../../shared/protocol/index.ts";
import {
  createCheckpoint,
  encodeRolloutLine,
  type ReconstructedState,
  reconstructRollout,
  unreadLineWarnings,
} from "../../../shared/rollout/index.ts";
import {
  configOfRollout,
  importedBaseline,
  type NumberedLine,
  truncationPolicyOf,
} from "../../../shared/session/index.ts";
import { systemClock } from "../../common/clock.ts";
import { objectLog } from "../../common/log.ts";
import { fail, ok } from "../../common/results.ts";
import {
  LiveThread,
  readWholeRollout,
  type StorageParts,
  threadPrefix,
  withoutContextBaseline,
} from "../live-thread.ts";
import { creationTime, ThreadLedger } from "../storage/ledger.ts";
import {
  newThreadMeta,
  sessionMetaPayload,
  type ThreadMeta,
  type TurnRow,
} from "../storage/meta-store.ts";
import { RolloutLog } from "../storage/rollout-log.ts";
import { clearRolloutState } from "../storage/schema.ts";
import { endUnusedLoans, recordBorrowed, shareablePrefix } from "../storage/segment-loans.ts";
import { SegmentStore } from "../storage/segments.ts";
import { type ImportedLine, type ImportResult, readRolloutStream } from "./import.ts";
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
  lines: readonly NumberedLine[];
  createdAt: string;
  updatedAt: string;
  forkedFrom: string | null;
  /**
   * What reading the lines skipped (a damaged segment or line, a gap): these become warnings, and
   * the context baseline is dropped so the next turn re-sends the full context.
   */
  lost: readonly string[];
}

/**
 * The thread the lines describe. Never refused: what of them cannot be used becomes a warning.
 * Warnings, in order: lines lost on the way (`rollout_repaired`), lines or parts of lines this
 * build cannot read (`rollout_line_unread`), settings an import could not carry over (kept in
 * its `session_meta`) or the configuration could not use (`rollout_setting_unsupported`), and
 * repairs of the world-state replay (`rollout_repaired`).
 */
function rebuildThread(catalog: ModelCatalog, input: RebuildInput): RebuiltThread {
  const lines = input.lines.map((l) => l.line);
  const session = sessionMetaOf(lines);
  const { config, warnings: configWarnings } = configOfRollout(
    catalog,
    DEFAULT_MODEL_SLUG,
    input.lines,
  );
  const turns = turnRowsFromRollout(input.lines);
  const rebuilt = reconstructRollout(lines, { truncation: truncationPolicyOf(config) });
  const state = input.lost.length > 0 ? withoutContextBaseline(rebuilt) : rebuilt;
  const warning = (code: string) => (message: string) => ({ code, message });
  const meta: ThreadMeta = {
    ...newThreadMeta(input.tenant, input.threadId, input.createdAt, input.forkedFrom),
    updated_at: input.updatedAt,
    turn_count: turns.filter((t) => t.kind !== "compaction").length,
    imported_from: session?.imported_from ?? null,
    metadata: metadataOfRollout(lines),
    warnings: [
      ...input.lost.map(warning("rollout_repaired")),
      ...unreadLineWarnings(input.lines).map(warning("rollout_line_unread")),
      ...(session?.import_warnings ?? []),
      ...configWarnings.map(warning("rollout_setting_unsupported")),
      ...state.warnings.map(warning("rollout_repaired")),
    ],
  };
  return { meta, config, turns, state };
}

function sessionMetaOf(lines: readonly RolloutLine[]): SessionMeta | undefined {
  const first = lines.find((l) => l.type === "session_meta");
  return first?.type === "session_meta" ? first.payload : undefined;
}

/** An import or fork request, with the parent a paginated fork's history starts from. */
export type ImportRequest = Pick<
  CreateFromRolloutRequest,
  "tenant" | "threadId" | "forkedFrom" | "warnings" | "parent" | "metadata" | "shared"
>;

/**
 * Creates a thread from an uploaded or forked rollout (as read and decoded). The thread gets its
 * own `session_meta`: a fork's is the source's with the fork's id, time and `forked_from_id`; an
 * import's names the thread and keeps where it came from (`imported_from`: the source's session
 * id, Codex version and originator, kept through re-imports) and what the import could not carry
 * over (`import_warnings`). Every other line is kept as it came. A paginated Codex fork (its
 * `session_meta` has a `history_base`) starts with its parent's lines, from `req.parent`; without
 * one it is refused. When the rollout's configuration is not exactly its newest `spindle_config`
 * line, a `spindle_config` line with the configuration used ends the rollout. `inTransaction`
 * runs in the step that makes the thread exist (to record the request's key). Nothing is written
 * when the rollout is refused.
 */
export async function importThread(
  parts: StorageParts,
  req: ImportRequest,
  read: ImportResult,
  inTransaction: () => void,
): Promise<RpcResult<LiveThread>> {
  const source = await sourceLines(req, read);
  if (!source.ok) {
    // A parent already read (or never sent) cancels harmlessly.
    await cancelParent(req);
    await endUnusedLoans(parts.bucket, req.shared ?? [], [], req);
    return source;
  }
  const { meta: sourceMeta, lines: rest, lost } = source.value;
  const forkedFrom = req.forkedFrom ?? req.parent?.threadId;
  const now = creationTime(parts.sql, systemClock.nowMs());
  const numbered = (lines: readonly RolloutLine[]) =>
    lines.map((line, i) => ({ seq: i + 1, line }));
  const configured = configOfRollout(
    parts.catalog,
    DEFAULT_MODEL_SLUG,
    numbered([
      { timestamp: now, type: "session_meta", payload: sourceMeta },
      ...rest.map((l) => l.line),
    ]),
  );
  const importWarnings = [
    ...(sourceMeta.import_warnings ?? []),
    ...configured.warnings.map((message) => ({ code: "rollout_setting_unsupported", message })),
  ];
  const ownMeta: SessionMeta = req.forkedFrom
    ? { ...sourceMeta, id: req.threadId, timestamp: now, forked_from_id: req.forkedFrom }
    : {
        ...sessionMetaPayload(req.threadId, now, configured.config),
        ...(forkedFrom ? { forked_from_id: forkedFrom } : {}),
        imported_from: sourceMeta.imported_from ?? importedFrom(sourceMeta),
      };
  if (importWarnings.length > 0) ownMeta.import_warnings = importWarnings;
  // The copied lines are not this thread's own: a restore does not count their usage.
  ownMeta.spindle_copied_lines = rest.length;
  const stored: ImportedLine[] = [
    encoded({ timestamp: now, type: "session_meta", payload: ownMeta }),
    ...rest,
  ];
  if (!configured.stored) {
    stored.push(encoded({ timestamp: now, type: "spindle_config", payload: configured.config }));
  }
  const rebuilt = rebuildThread(parts.catalog, {
    tenant: req.tenant,
    threadId: req.threadId,
    lines: numbered(stored.map((l) => l.line)),
    createdAt: now,
    updatedAt: now,
    forkedFrom: forkedFrom ?? null,
    // A fork of a damaged rollout lacks lines: as for its source, the context is sent again.
    lost,
  });
  const { meta, config, turns, state } = rebuilt;
  // Codex's world state as what Spindle's sections saw: the first turn renders what changed.
  const baseline = importedBaseline(
    parts.catalog,
    config,
    source.value.lines.map((l) => l.line),
    state,
  );
  if (baseline !== undefined) {
    stored.push(
      encoded({ timestamp: now, type: "world_state", payload: { full: true, state: baseline } }),
    );
    state.history.worldStateBaseline = baseline;
  }
  const prefix = threadPrefix({ tenant: req.tenant, incarnation: parts.incarnation }, req.threadId);
  let borrowed = lost.length === 0 && !req.parent ? borrowable(req.shared, rest.length) : [];
  if (borrowed.length > 0) {
    try {
      await recordBorrowed(parts.bucket, prefix, borrowed, now);
    } catch (err) {
      // R2 refused the record a restore would need: the fork copies instead.
      objectLog.warn("rollout.borrow_failed", {
        tenant: req.tenant,
        thread: req.threadId,
        error: describeError(err),
      });
      borrowed = [];
    }
  }
  await endUnusedLoans(parts.bucket, req.shared ?? [], borrowed, req);
  // Through here, the lines are the borrowed segments' (and a checkpoint's): not in SQLite.
  const through = borrowed.at(-1)?.last_seq ?? 0;
  const checkpoint =
    through > 0
      ? createCheckpoint(
          stored.slice(0, through).map((l) => l.line),
          { truncation: truncationPolicyOf(config), lastSeq: through },
        )
      : undefined;
  const log = new RolloutLog(parts.sql, systemClock, stored.length);
  parts.storage.transactionSync(() => {
    stored.forEach((line, i) => {
      const seq = i + 1;
      if (seq === 1 || seq > through) RolloutLog.insert(parts.sql, seq, line.text);
    });
    if (through > 0) {
      // The fork's own first line goes to R2 before anything after the borrowed range.
      SegmentStore.recordPending(parts.sql, prefix, 1, 1);
      for (const s of borrowed) SegmentStore.recordDone(parts.sql, s);
    }
    parts.meta.put("config", config);
    for (const t of turns) parts.meta.putTurn(t);
    parts.meta.packTurns();
    if (req.metadata !== undefined) {
      meta.metadata = req.metadata;
      log.append({ type: "spindle_metadata", payload: { metadata: req.metadata } });
      meta.updated_at = log.lastWrittenAt ?? meta.updated_at;
    }
    parts.meta.put("thread", meta);
    inTransaction();
  });
  const live = new LiveThread(parts, meta, config, log, checkpoint, state);
  if (checkpoint) live.checkpoints.save(checkpoint);
  return ok(live);
}

/**
 * The part of a source's `shared` segments a fork of `copied` lines (after its `session_meta`)
 * can borrow: a run from seq 2 without gaps, within the lines it was given. Anything else (an
 * older source, lines that do not line up) is copied instead.
 */
function borrowable(shared: readonly SharedSegment[] | undefined, copied: number): SharedSegment[] {
  if (shared === undefined) return [];
  const run = shareablePrefix(shared, copied + 2);
  return run.length === shared.length ? run : [];
}

/** Cancels what an import request streams that is still unread: its upload, its parent's lines. */
export async function cancelUpload(req: Pick<ImportRequest, "parent"> & { lines: ReadableStream }) {
  await Promise.all([
    req.lines.cancel().catch(() => undefined),
    req.parent?.lines.cancel().catch(() => undefined),
  ]);
}

function encoded(line: RolloutLine): ImportedLine {
  return { text: encodeRolloutLine(line), line };
}

function importedFrom(meta: SessionMeta): ImportedFrom {
  return {
    session_id: meta.id,
    cli_version: meta.cli_version ?? null,
    originator: meta.originator ?? null,
  };
}

/** What a rollout refused at `/line/1` is told. */
const lineOne = (detail: string, message: string) =>
  fail("invalid_request", detail, [{ path: "/line/1", message }]);

/**
 * The lines a new thread is made of, before its own `session_meta`: the source's first line (its
 * `session_meta`) and the rest, a paginated fork's parent lines first.
 */
async function sourceLines(
  req: ImportRequest,
  read: ImportResult,
): Promise<RpcResult<{ meta: SessionMeta; lines: ImportedLine[]; lost: string[] }>> {
  if (!read.ok) {
    return fail(read.code, `Line ${read.lineNumber}: ${read.reason}`, [
      { path: `/line/${read.lineNumber}`, message: read.reason },
    ]);
  }
  const [first, ...rest] = read.lines;
  const lost = [...(req.warnings ?? [])];
  if (!first) {
    return lineOne("The rollout is empty.", "no line");
  }
  if (first.line.type !== "session_meta") {
    return lineOne(
      "The first line must be session_meta.",
      `expected session_meta, got ${first.line.type}`,
    );
  }
  const meta = first.line.payload;
  // A fork copies a thread's lines, whole whatever rollout the thread came from.
  const base = req.forkedFrom ? undefined : (meta.history_base ?? undefined);
  if (req.parent === undefined) {
    if (base === undefined) return ok({ meta, lines: rest, lost });
    return fail(
      "parent_rollout_required",
      `This rollout is a paginated fork: its history starts in its parent session ${base.thread_id}, ` +
        "which it does not contain. Import the parent first, then import this rollout with " +
        "?parent=<the parent's thread id>.",
      [{ path: "/line/1", message: `history_base names session ${base.thread_id}` }],
    );
  }
  if (base === undefined) {
    return fail("invalid_request", "The rollout is not a paginated fork: it takes no parent.", [
      { path: "parent", message: "the rollout's session_meta has no history_base" },
    ]);
  }
  const prefix = parentPrefix(req.parent.threadId, await readRolloutStream(req.parent.lines), base);
  if (!prefix.ok) return prefix;
  return ok({ meta, lines: [...prefix.value, ...rest], lost: [...lost, ...req.parent.warnings] });
}

async function cancelParent(req: ImportRequest): Promise<void> {
  await req.parent?.lines.cancel().catch(() => undefined);
}

/**
 * The parent thread's lines a paginated fork's history starts with: those the Codex parent
 * rollout held before `end_ordinal_exclusive` (Codex numbers paginated lines with `ordinal`),
 * without the parent's `session_meta`. The parent must be the thread imported from the session
 * `history_base` names, and hold every line up to there.
 */
function parentPrefix(
  parentId: string,
  parent: ImportResult,
  base: HistoryBase,
): RpcResult<ImportedLine[]> {
  const refuse = (message: string) =>
    fail("invalid_request", `Thread ${parentId} cannot be this fork's parent: ${message}.`, [
      { path: "parent", message },
    ]);
  if (!parent.ok) return refuse(`its rollout cannot be read (line ${parent.lineNumber})`);
  const [first, ...rest] = parent.lines;
  const session = first?.line.type === "session_meta" ? first.line.payload : undefined;
  const origin = session?.imported_from?.session_id;
  if (origin !== base.thread_id) {
    return refuse(
      origin === undefined
        ? `it was not imported from a Codex rollout, and the fork's parent is session ${base.thread_id}`
        : `it was imported from session ${origin}, and the fork's parent is session ${base.thread_id}`,
    );
  }
  const end = base.end_ordinal_exclusive;
  const prefix: ImportedLine[] = [];
  for (const line of rest) {
    const ordinal = line.line.ordinal;
    if (typeof ordinal !== "number" || ordinal >= end) break;
    prefix.push(line);
  }
  const last = prefix.at(-1)?.line.ordinal ?? 0;
  if (end > 1 && last !== end - 1) {
    return refuse(
      `it holds the parent's lines up to ordinal ${last}, and the fork needs ${end - 1}`,
    );
  }
  return ok(prefix);
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
  const { meta, config, turns, state } = rebuildThread(parts.catalog, {
    ...name,
    lines: rows,
    createdAt: metaLine.payload.timestamp ?? metaLine.timestamp,
    updatedAt: newestTimestamp(lines) ?? metaLine.timestamp,
    forkedFrom: metaLine.payload.forked_from_id ?? null,
    lost: whole.warnings,
  });
  const lastSeq = rows.at(-1)?.seq ?? 0;
  const flushed = whole.segments.at(-1)?.last_seq ?? 0;
  const copied = metaLine.payload.spindle_copied_lines ?? 0;
  // A reload needs every line after the checkpoint in SQLite. Not when lines were lost: a
  // checkpoint would keep the context baseline that `state` dropped.
  const checkpoint =
    whole.warnings.length === 0 && flushed > 0
      ? createCheckpoint(
          rows.filter((r) => r.seq <= flushed).map((r) => r.line),
          { truncation: truncationPolicyOf(config), lastSeq: flushed },
        )
      : undefined;
  // Lines before the last segment that no segment holds (a fork's own first line, ahead of the
  // segments it borrows) stay in SQLite as pending, so a flush writes them before anything else.
  const unflushed = unflushedRanges(whole.segments, rows);
  const prefix = threadPrefix(
    { tenant: name.tenant, incarnation: parts.incarnation },
    name.threadId,
  );
  const inRange = (seq: number) => unflushed.some((r) => seq >= r.first && seq <= r.last);
  parts.storage.transactionSync(() => {
    clearRolloutState(parts.storage.sql);
    parts.meta.put("thread", meta);
    parts.meta.put("config", config);
    for (const t of turns) parts.meta.putTurn(t);
    parts.meta.packTurns();
    for (const r of unflushed) SegmentStore.recordPending(parts.sql, prefix, r.first, r.last);
    for (const s of whole.segments) SegmentStore.recordDone(parts.sql, s);
    for (const r of rows) {
      if (r.seq > flushed || inRange(r.seq)) RolloutLog.insert(parts.sql, r.seq, r.text);
    }
    // The thread's own usage, as its lines count it (the SQLite state may be the lost part).
    ThreadLedger.rebuild(parts.sql, meta.created_at, rows, 1 + copied);
  });
  const restoredLog = new RolloutLog(parts.sql, systemClock, lastSeq);
  const live = new LiveThread(parts, meta, config, restoredLog, checkpoint, state);
  if (checkpoint) live.checkpoints.save(checkpoint);
  return ok(live);
}

/**
 * The ranges of seqs before the last of `segments` that none of them holds and `rows` hold whole
 * (a range with a line missing is lost, and a flush could not write it).
 */
function unflushedRanges(
  segments: readonly SharedSegment[],
  rows: readonly { seq: number }[],
): { first: number; last: number }[] {
  const present = new Set(rows.map((r) => r.seq));
  const ranges: { first: number; last: number }[] = [];
  let next = 1;
  for (const s of [...segments].sort((a, b) => a.first_seq - b.first_seq)) {
    if (s.first_seq > next) ranges.push({ first: next, last: s.first_seq - 1 });
    next = Math.max(next, s.last_seq + 1);
  }
  return ranges.filter((r) => {
    for (let seq = r.first; seq <= r.last; seq++) if (!present.has(seq)) return false;
    return true;
  });
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

/** A rollout's metadata: its newest `spindle_metadata` line's, else none. */
export function metadataOfRollout(lines: readonly RolloutLine[]): ThreadMetadata {
  const newest = lines.findLast((l) => l.type === "spindle_metadata");
  return newest?.type === "spindle_metadata" ? newest.payload.metadata : {};
}
