import type {
  CreateFromRolloutRequest,
  CreateThreadRequest,
  IdempotencyKey,
  RestoreRequest,
  RpcResult,
  TenantPolicy,
  ThreadResource,
  Trace,
} from "../../shared/api/index.ts";
import { systemClock } from "../common/clock.ts";
import { fail, guarded, ok } from "../common/results.ts";
import type { KeyedRequests } from "./keyed-requests.ts";
import { LiveThread, type StorageParts, threadPrefix } from "./live-thread.ts";
import { cancelUpload, importThread, restoreThread } from "./rollouts/from-rollout.ts";
import { importFingerprint, readRolloutStream } from "./rollouts/import.ts";
import { RolloutLog } from "./storage/rollout-log.ts";
import { endUnusedLoans } from "./storage/segment-loans.ts";
import type { TaskControl } from "./tasks/task-control.ts";
import type { TenantSync } from "./tenancy/tenant-sync.ts";

export interface ThreadCreationDeps {
  parts: StorageParts;
  keyed: KeyedRequests;
  tasks: TaskControl;
  sync: TenantSync;
  /** The thread of this object, loaded if need be; undefined when there is none. */
  thread: () => Promise<LiveThread | undefined>;
  resource: (live: LiveThread) => ThreadResource;
  /** Makes a new thread this object's (flush scheduled, index told). */
  adopt: (live: LiveThread) => Promise<ThreadResource>;
  /** Keeps the tenant's policy a request carried (and picks the jurisdiction's bucket). */
  place: (policy: TenantPolicy | undefined) => void;
  /**
   * A thread was created (not restored), for the edge request `requestId`: in the step that
   * writes its first lines.
   */
  created: (requestId: string | undefined) => void;
  /** The object's tenant and thread, from its name. */
  name: { tenant: string; threadId: string } | undefined;
}

/**
 * How a thread comes to exist in its object: a create, or a fork or an import (a rollout read
 * from a stream), or a restore from its R2 rollout. Each answers a retry of the request that
 * created the thread with the thread, refuses any other request aimed at an existing one with
 * `thread_exists`, and asks the tenant for room first when it has `max_threads` (design §11).
 * They run one at a time.
 */
export class ThreadCreation {
  readonly #deps: ThreadCreationDeps;
  /** The creation under way, settled: the next one starts after it. */
  #current: Promise<unknown> = Promise.resolve();

  constructor(deps: ThreadCreationDeps) {
    this.#deps = deps;
  }

  create(req: CreateThreadRequest, trace?: Trace): Promise<RpcResult<ThreadResource>> {
    const { parts, keyed, adopt } = this.#deps;
    return this.#oneAtATime(async () => {
      this.#deps.place(req.policy);
      const existing = await this.#existingThread(req);
      if (existing) return existing;
      const reserved = await this.#reserve();
      if (!reserved.ok) return reserved;
      let live: LiveThread;
      try {
        live = LiveThread.create(parts, req, () => {
          keyed.record(req.idempotency, null);
          this.#deps.created(trace?.requestId);
        });
      } catch (err) {
        // Refused (an unknown model, …): a place reserved for it is given back.
        this.#deps.sync.kick(true);
        throw err;
      }
      return ok(await adopt(live));
    });
  }

  createFromRollout(
    req: CreateFromRolloutRequest,
    trace?: Trace,
  ): Promise<RpcResult<ThreadResource>> {
    const { parts, keyed, tasks, adopt, sync } = this.#deps;
    return this.#oneAtATime(async () => {
      this.#deps.place(req.policy);
      // A keyed import's fingerprint lacks its body, which only this object reads: it is
      // completed once the body is read, and only then compared. Without a record of its key
      // there is nothing to compare, and an existing thread is answered at once.
      const keyedImport = req.source === "import" ? req.idempotency : undefined;
      if (!keyedImport || !keyed.has(keyedImport.key)) {
        const existing = await this.#existingThread(req);
        if (existing) {
          await cancelUpload(req);
          await this.#endLoans(req);
          return existing;
        }
      }
      const read = await readRolloutStream(req.lines);
      const idempotency = keyedImport && {
        key: keyedImport.key,
        fingerprint: importFingerprint(keyedImport.fingerprint, read),
      };
      if (idempotency) {
        const existing = await this.#existingThread({ threadId: req.threadId, idempotency });
        if (existing) return cancelUpload(req).then(() => existing);
      }
      const reserved = await this.#reserve();
      if (!reserved.ok) {
        await cancelUpload(req);
        await this.#endLoans(req);
        return reserved;
      }
      const imported = await importThread(parts, req, read, () => {
        // The thread exists from here on: so does the key that created it.
        keyed.record(idempotency ?? req.idempotency, null);
        this.#deps.created(trace?.requestId);
      });
      if (!imported.ok) {
        // A place reserved for it is given back.
        sync.kick(true);
        return imported;
      }
      tasks.settleInterruptedTurn(imported.value);
      return ok(await adopt(imported.value));
    });
  }

  /** Rebuilds the thread from its R2 rollout; lines only SQLite held still go to R2 after. */
  restore(req: RestoreRequest): Promise<RpcResult<ThreadResource>> {
    const { parts, tasks, adopt, name } = this.#deps;
    return this.#oneAtATime(async () => {
      this.#deps.place(req.policy);
      if (!name) return fail("internal", "This object has no thread name.");
      const busy = tasks.busy();
      if (busy) return busy;
      const existing = await this.#deps.thread();
      const log = existing?.log ?? new RolloutLog(parts.sql, systemClock, 0);
      const restored = await restoreThread(parts, name, log);
      return restored.ok ? ok(await adopt(restored.value)) : restored;
    });
  }

  /**
   * Runs `work` once the creation before it has ended. Each awaits between finding no thread and
   * writing its first lines (the tenant's reservation, the rollout's stream), so two requests for
   * one thread at once (the same keyed fork sent twice) would both write the thread's first
   * lines. In turn, the second finds the first's thread (and key) and answers as a retry.
   */
  #oneAtATime(work: () => Promise<RpcResult<ThreadResource>>): Promise<RpcResult<ThreadResource>> {
    const run = this.#current.then(() => guarded(work));
    this.#current = run.catch(() => undefined);
    return run;
  }

  /**
   * Ends the loans a fork's source made for a fork this request does not create. A thread that
   * exists here keeps those it borrows under (a retry of the fork that made it).
   */
  async #endLoans(req: CreateFromRolloutRequest): Promise<void> {
    if (!req.shared) return;
    const live = await this.#deps.thread();
    const own = threadPrefix(
      { tenant: req.tenant, incarnation: this.#deps.parts.incarnation },
      req.threadId,
    );
    // What it borrows from others; a loan of its own segments (a fork aimed at its own source's
    // id) is never one it takes up.
    const kept = (live?.segments.manifest() ?? []).filter((s) => !s.r2_key.startsWith(own));
    await endUnusedLoans(this.#deps.parts.bucket, req.shared, kept, req);
  }

  /** Room under the tenant's `max_threads`, asked only when it has one. */
  async #reserve(): Promise<RpcResult<null>> {
    const max = this.#deps.sync.quotas.max_threads;
    return max === null ? ok(null) : this.#deps.sync.reserve(max);
  }

  /**
   * The answer to a create, fork or import aimed at a thread that exists: the thread itself for a
   * retry of the request that created it (same key, same request), else `thread_exists`.
   * Undefined when there is no thread yet.
   */
  async #existingThread(req: {
    threadId: string;
    idempotency?: IdempotencyKey;
  }): Promise<RpcResult<ThreadResource> | undefined> {
    const live = await this.#deps.thread();
    if (live === undefined) return undefined;
    return this.#deps.keyed.answer(req.idempotency, {
      retry: () => ok(this.#deps.resource(live)),
      first: () => fail("thread_exists", `Thread "${req.threadId}" already exists.`),
    });
  }
}
