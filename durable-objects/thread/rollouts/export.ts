import type {
  ForkSource,
  ForkSourceRequest,
  RolloutExport,
  RpcResult,
} from "../../../shared/api/index.ts";
import { describeError } from "../../../shared/observability/index.ts";
import { objectLog } from "../../common/log.ts";
import { fail, ok } from "../../common/results.ts";
import { type LiveThread, readWholeRollout } from "../live-thread.ts";
import { endUnusedLoans, lend, shareablePrefix } from "../storage/segment-loans.ts";
import { jsonlStream } from "./import.ts";

/**
 * The whole rollout as Codex JSONL (R2 segments, then the SQLite tail). Refused with
 * `rollout_incomplete` when lines cannot be read, unless `allowIncomplete`: a backup that
 * silently lacks lines is how messages get lost.
 */
export async function exportedRollout(
  live: LiveThread,
  allowIncomplete: boolean,
): Promise<RpcResult<RolloutExport>> {
  const { lines, lastSeq, warnings } = await readWholeRollout(live.parts, live.meta, live.log);
  const missingLines = lastSeq - lines.length;
  if (missingLines > 0 && !allowIncomplete) {
    const shown = warnings.slice(0, 3).join("; ");
    const more = warnings.length > 3 ? ` (and ${warnings.length - 3} more)` : "";
    return fail(
      "rollout_incomplete",
      `${missingLines} of the rollout's ${lastSeq} lines cannot be read: ${shown}${more}. ` +
        "Ask with allow_incomplete=true for the lines that can.",
    );
  }
  return ok({ lines: jsonlStream(lines.map((l) => l.text)), missingLines });
}

/**
 * The prefix a fork copies, with what reading it skipped: the lines before `beforeTurn`, or
 * through the end of `afterTurn`, else every line but those of the task running now
 * (`runningTurnId`), i.e. its last consistent point. For a `borrower`, the R2 segments that hold
 * the prefix are lent to it (marked before the answer, see `segment-loans.ts`).
 */
export async function rolloutPrefix(
  live: LiveThread,
  { beforeTurn, afterTurn, borrower }: ForkSourceRequest,
  runningTurnId: string | undefined,
): Promise<RpcResult<ForkSource>> {
  let cut = live.log.lastSeq + 1;
  const named = beforeTurn ?? afterTurn;
  if (named !== undefined) {
    const row = live.parts.meta.turn(named);
    if (!row) return fail("turn_not_found", `No turn "${named}" in this thread.`);
    cut = beforeTurn === undefined ? row.last_seq + 1 : row.first_seq;
  } else if (runningTurnId !== undefined) {
    const row = live.parts.meta.turn(runningTurnId);
    if (row) cut = row.first_seq;
  }
  const { lines, segments, warnings } = await readWholeRollout(live.parts, live.meta, live.log);
  const prefix = lines.filter((l) => l.seq < cut).map((l) => l.text);
  // Lines skipped on the way would shift every seq after them: such a fork copies.
  let shared = borrower && warnings.length === 0 ? shareablePrefix(segments, cut) : [];
  if (borrower && shared.length > 0) {
    try {
      await lend(live.parts.bucket, shared, borrower);
    } catch (err) {
      // R2 refused a marker: the fork copies, and the markers that were written go.
      objectLog.warn("rollout.lend_failed", {
        tenant: live.meta.tenant,
        thread: live.meta.id,
        error: describeError(err),
      });
      await endUnusedLoans(live.parts.bucket, shared, [], {
        tenant: live.meta.tenant,
        threadId: borrower,
      });
      shared = [];
    }
  }
  return ok({
    lines: jsonlStream(prefix),
    forkedFrom: live.meta.id,
    warnings,
    ...(shared.length > 0 ? { shared } : {}),
  });
}
