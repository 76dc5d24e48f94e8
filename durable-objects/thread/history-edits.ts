import {
  type InjectRequest,
  mergeMetadata,
  type PatchThreadBody,
  type RollbackRequest,
  type RpcResult,
  type ThreadResource,
} from "../../shared/api/index.ts";
import { fail, ok, THREAD_NOT_FOUND } from "../common/results.ts";
import type { KeyedRequests } from "./keyed-requests.ts";
import { LiveThread, type StorageParts } from "./live-thread.ts";
import type { QuotaGate } from "./quotas/quota-gate.ts";
import type { EventLog } from "./storage/event-log.ts";
import type { TaskControl } from "./tasks/task-control.ts";

export interface HistoryEditsDeps {
  parts: StorageParts;
  keyed: KeyedRequests;
  tasks: TaskControl;
  events: EventLog;
  quotas: QuotaGate;
  resource: (live: LiveThread) => ThreadResource;
  /** Makes the reloaded thread this object's (flush scheduled, index told). */
  adopt: (live: LiveThread) => Promise<ThreadResource>;
}

/**
 * Changes to a thread outside a turn: a rollback and user messages injected without one (the
 * exact state after either, reference, baseline, settings, is defined by replay, so the thread is
 * reloaded from its rollout afterwards), and a change of its metadata.
 */
export class HistoryEdits {
  readonly #deps: HistoryEditsDeps;

  constructor(deps: HistoryEditsDeps) {
    this.#deps = deps;
  }

  async rollback(live: LiveThread, req: RollbackRequest): Promise<RpcResult<ThreadResource>> {
    const { keyed, tasks, resource } = this.#deps;
    return keyed.answer(req.idempotency, {
      retry: () => ok(resource(live)),
      first: () => {
        const busy = tasks.busy();
        if (busy) return busy;
        keyed.recorded(req.idempotency, null, () => {
          tasks.abandonPausedTurn(live, "interrupted");
          live.session.recordRollback(req.turns);
        });
        return this.#reload(live);
      },
    });
  }

  async inject(live: LiveThread, req: InjectRequest): Promise<RpcResult<ThreadResource>> {
    const { keyed, tasks, resource, events } = this.#deps;
    return keyed.answer(req.idempotency, {
      retry: () => ok(resource(live)),
      first: () => {
        const full = this.#deps.quotas.inputRefused();
        if (full) return full;
        const running = tasks.running;
        if (running && running.currentKind !== "turn") {
          return fail("thread_busy", "A compaction is running.");
        }
        // The key is recorded in the same synchronous step as the messages: both or neither.
        return keyed.keyed(req.idempotency, null, async () => {
          if (running) {
            // While a turn runs, injected input joins it as pending input (reference §5.5).
            const messages = req.items.flatMap((m) =>
              m.type === "message" && m.role === "user" ? [m] : [],
            );
            if (messages.length < req.items.length) {
              return fail("thread_busy", `Turn ${running.turnId} is running.`);
            }
            for (const item of messages) live.session.steer([...item.content]);
            return ok(resource(live));
          }
          for (const item of live.session.inject(req.items)) {
            events.emit("item.completed", null, { item, context: false });
          }
          return this.#reload(live);
        });
      },
    });
  }

  /** Applies a merge patch to the metadata, as a `spindle_metadata` line (a rebuild has it). */
  async patchMetadata(live: LiveThread, req: PatchThreadBody): Promise<RpcResult<ThreadResource>> {
    const metadata = mergeMetadata(live.meta.metadata ?? {}, req.metadata);
    if (metadata === undefined) {
      return fail("invalid_request", "A thread holds at most 16 metadata keys.", [
        { path: "/metadata", message: "more than 16 keys after the patch" },
      ]);
    }
    live.meta.metadata = metadata;
    live.log.append({ type: "spindle_metadata", payload: { metadata } });
    live.touch(this.#deps.parts.meta);
    // Adopting it again schedules the flush and tells the index at once.
    return ok(await this.#deps.adopt(live));
  }

  /**
   * Replaces the loaded thread with a replay of its rollout. A message recorded outside a turn is
   * attributed by replay to the turn before it (reference §6.1), so a rollback in between counts
   * it as rolled back with that turn.
   */
  async #reload(live: LiveThread): Promise<RpcResult<ThreadResource>> {
    const { parts, adopt } = this.#deps;
    const updatedAt = live.log.lastWrittenAt;
    const reloaded = await LiveThread.load(parts, live.segments);
    if (!reloaded) return THREAD_NOT_FOUND;
    if (updatedAt !== undefined) {
      reloaded.meta.updated_at = updatedAt;
      parts.meta.put("thread", reloaded.meta);
    }
    return ok(await adopt(reloaded));
  }
}
