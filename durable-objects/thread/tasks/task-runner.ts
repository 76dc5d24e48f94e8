import type { ProblemCode, TurnResource } from "../../../shared/api/index.ts";
import { describeError, type Logger } from "../../../shared/observability/index.ts";
import type { ResponseItem } from "../../../shared/protocol/index.ts";
import { ProviderError } from "../../../shared/providers/index.ts";
import {
  type CompactionOutcome,
  SessionError,
  type TurnEvent,
  type TurnOutcome,
} from "../../../shared/session/index.ts";
import type { LiveThread } from "../live-thread.ts";
import type { EventLog } from "../storage/event-log.ts";
import type { MetaStore, TurnRow } from "../storage/meta-store.ts";

export type TaskGenerator = AsyncGenerator<TurnEvent, TurnOutcome | CompactionOutcome>;

/** A task (user turn or compaction) the thread is running; one at a time. */
export interface RunningTask {
  /** The turn the caller addressed (a user turn may be preceded by an auto-compaction). */
  readonly turnId: string;
  /** The edge request the task runs for (`Trace`); undefined for none (a test's call). */
  readonly requestId: string | undefined;
  readonly controller: AbortController;
  /** The id of the task running right now (the auto-compaction's, then the turn's). */
  currentId: string;
  currentKind: "turn" | "compaction";
  /** Settles with the addressed turn's final resource; never rejects. */
  readonly done: Promise<TurnResource>;
}

export interface TaskRunnerDeps {
  live: LiveThread;
  meta: MetaStore;
  events: EventLog;
  /** The Turn resource of a row, with the items its lines recorded. */
  resourceOf: (row: TurnRow, items?: ResponseItem[]) => Promise<TurnResource>;
  /** Called once a task's first line is written (e.g. to persist changed configuration). */
  onTaskStarted?: () => void;
  /** The task's log: its request, tenant and thread. */
  log: Logger;
}

/**
 * Drives one engine task to its end: keeps the turn rows, emits the thread events (persisted
 * first, then fanned out), and turns an engine failure into a `failed` turn with a
 * `task_complete {error}` line. The caller decides what runs next.
 */
export function runTask(
  deps: TaskRunnerDeps,
  turnId: string,
  start: (signal: AbortSignal) => TaskGenerator,
  resumed: TurnRow | undefined,
  requestId: string | undefined,
): { task: RunningTask; started: Promise<void> } {
  const controller = new AbortController();
  let markStarted: () => void = () => {};
  let failStart: (err: unknown) => void = () => {};
  const started = new Promise<void>((resolve, reject) => {
    markStarted = resolve;
    failStart = reject;
  });
  // Callers await one of the two; the other must not surface as an unhandled rejection.
  started.catch(() => {});
  const task: RunningTask = {
    turnId,
    requestId,
    controller,
    currentId: turnId,
    currentKind: "turn",
    done: Promise.resolve(undefined as never),
  };
  const done = drive(deps, task, start, resumed, markStarted, failStart);
  done.catch(() => {});
  (task as { done: Promise<TurnResource> }).done = done;
  return { task, started };
}

async function drive(
  deps: TaskRunnerDeps,
  task: RunningTask,
  start: (signal: AbortSignal) => TaskGenerator,
  resumed: TurnRow | undefined,
  markStarted: () => void,
  failStart: (err: unknown) => void,
): Promise<TurnResource> {
  const { live, meta, events } = deps;
  const items = new Map<string, ResponseItem[]>();
  let row = resumed;
  if (row) {
    const { pending_approvals: _answered, ...rest } = row;
    row = { ...rest, status: "in_progress", pending_calls: [], error: null };
    meta.putTurn(row);
    items.set(row.id, []);
    markStarted();
  }
  const finish = async (r: TurnRow, status: TurnRow["status"], extra: Partial<TurnRow> = {}) => {
    const done: TurnRow = {
      ...r,
      ...extra,
      status,
      usage: live.ledger.turnUsage(r.id) ?? r.usage,
      last_seq: live.log.lastSeq,
    };
    meta.endTurn(done);
    // A turn that ran start to end here has all its items in hand; a resumed one reads them back.
    const seen = resumed?.id === r.id ? undefined : items.get(r.id);
    const resource = await deps.resourceOf(done, seen);
    events.emit(terminalEventOf(status), done.id, resource);
    return { done, resource };
  };
  try {
    await live.rebuildRequestMemory();
    const gen = start(task.controller.signal);
    for (;;) {
      const next = await gen.next();
      if (next.done) {
        const outcome = next.value;
        if (!row) throw new Error("the task ended before it started");
        const status = outcome.status;
        const pending = outcome.status === "requires_action" ? outcome.pending_calls : [];
        const queued = outcome.status === "requires_action" ? outcome.queued_input : undefined;
        const approvals =
          outcome.status === "requires_action" ? outcome.pending_approvals : undefined;
        const { resource } = await finish(row, status, {
          pending_calls: pending,
          ...(queued ? { queued_input: queued } : {}),
          ...(approvals ? { pending_approvals: approvals } : {}),
        });
        deps.live.touch(deps.meta);
        return resource;
      }
      const event = next.value;
      if (event.type === "turn.started") {
        // An auto-compaction ran first: it is its own turn, completed when the next one starts.
        if (row && row.id !== event.turn_id && row.status === "in_progress") {
          await finish(row, "completed");
        }
        task.currentId = event.turn_id;
        task.currentKind = event.kind;
        if (event.kind === "turn") live.meta.turn_count += 1;
        row = {
          id: event.turn_id,
          ordinal: live.log.lastSeq,
          kind: event.kind,
          status: "in_progress",
          first_seq: live.log.lastSeq,
          last_seq: live.log.lastSeq,
          pending_calls: [],
          usage: null,
          error: null,
          ...(event.trigger === undefined ? {} : { trigger: event.trigger }),
        };
        meta.putTurn(row);
        deps.onTaskStarted?.();
        deps.live.touch(deps.meta);
        items.set(row.id, []);
        events.emit("turn.started", row.id, await deps.resourceOf(row, []));
        markStarted();
      } else if (event.type === "item.completed") {
        items.get(event.turn_id)?.push(event.item);
        events.emit("item.completed", event.turn_id, { item: event.item, context: event.context });
      } else if (event.type === "turn.warning") {
        if (row) row.warnings = [...(row.warnings ?? []), event.warning];
        events.emit("turn.warning", event.turn_id, { warning: event.warning });
      } else if (event.type === "item.delta") {
        events.emit("item.delta", event.turn_id, { item_id: event.item_id, delta: event.delta });
      } else if (event.type === "token_count") {
        // The turn's usage is the sum of its requests', as the ledger counted them.
        if (row) row.usage = live.ledger.turnUsage(row.id) ?? row.usage;
        events.emit("token_count", event.turn_id, {
          info: event.info ?? null,
          cache: live.cache.takeReport(),
        });
      }
    }
  } catch (err) {
    if (!row) {
      // Nothing started (a configuration error, a busy engine): the caller answers 4xx.
      failStart(err);
      throw err;
    }
    const { code, message } = turnErrorOf(err, deps.log.with({ turn: row.id }));
    live.log.append({
      type: "event_msg",
      payload: {
        type: "task_complete",
        turn_id: row.id,
        last_agent_message: null,
        error: { code, message },
      },
    });
    const { resource } = await finish(row, "failed", { error: { code, message } });
    deps.live.touch(deps.meta);
    return resource;
  }
}

/** What a failed turn reports: a provider's or the core's error as it is, anything else as `internal`. */
function turnErrorOf(err: unknown, log: Logger): { code: ProblemCode; message: string } {
  if (err instanceof ProviderError) return { code: "provider_error", message: err.message };
  if (err instanceof SessionError) return { code: err.code, message: err.message };
  log.error("turn.internal_error", { error: describeError(err) });
  return { code: "internal", message: "The turn failed with an internal error." };
}

function terminalEventOf(status: TurnRow["status"]): string {
  switch (status) {
    case "completed":
      return "turn.completed";
    case "requires_action":
      return "turn.requires_action";
    case "interrupted":
      return "turn.interrupted";
    default:
      return "turn.failed";
  }
}
