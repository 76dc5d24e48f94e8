import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";
import type { Env } from "../../../env.ts";
import {
  type DeliveryEntry,
  type LedgerEntry,
  NO_QUOTAS,
  type QuotaGrant,
  type Quotas,
  type RpcResult,
  type SyncAck,
  type TenantPolicy,
  type TenantRpc,
  type ThreadResource,
  type ThreadSync,
  type WebhookSubscriptions,
} from "../../../shared/api/index.ts";
import { describeError } from "../../../shared/observability/index.ts";
import type { Clock } from "../../../shared/ports/index.ts";
import type { McpServerRef, McpServerResolution } from "../../../shared/protocol/index.ts";
import type { AlarmSchedule } from "../../common/alarms.ts";
import { objectLog } from "../../common/log.ts";
import { tenantStubIn, threadNameOf } from "../../common/placement.ts";
import { ok } from "../../common/results.ts";
import { dropEntries, pendingEntries } from "../storage/ledger.ts";
import { type Sql, sqlOf } from "../storage/sql.ts";
import { OUTBOX_SYNC_KEYS, RetryCount, SyncValues } from "./sync-values.ts";

/** A thread pushes to its tenant's object at most once per this long, unless it must at once. */
export const SYNC_INTERVAL_MS = 1_000;
/** Ledger entries per push; more go in the pushes that follow at once. */
export const SYNC_BATCH_ENTRIES = 500;

/**
 * The largest index entry a push carries, in characters of JSON (a row of the tenant's object
 * holds at most 2 MB). A thread whose resource is longer (megabytes of instructions, tools or
 * sections) is listed without those texts; `GET /v1/threads/{id}` has them.
 */
export const INDEX_ENTRY_MAX_CHARS = 256 * 1024;

/** The thread as its index entry holds it. */
export function indexEntryOf(thread: ThreadResource): ThreadResource {
  if (JSON.stringify(thread).length <= INDEX_ENTRY_MAX_CHARS) return thread;
  const {
    base_instructions: _b,
    developer_instructions: _d,
    agents_md: _a,
    ...config
  } = thread.config;
  return { ...thread, config: { ...config, context_sections: {}, tools: [] } };
}

/** The values a delete keeps (see `survivingDelete`). */
/** Log entries per push of hook deliveries; more go in the pushes that follow. */
export const DELIVERY_PUSH_BATCH = 100;

const SURVIVING_KEYS = ["version", "placement", ...OUTBOX_SYNC_KEYS];

/** What a push acknowledged: its version and the hash of the thread it carried. */
interface Pushed {
  version: number;
  hash: string;
}

/** What a Thread object gives its sync: its own hooks; the rest comes from its state. */
export type ThreadSyncHooks = Pick<
  TenantSyncDeps,
  "snapshot" | "tenantGone" | "deliveries" | "subscriptions"
>;

export interface TenantSyncDeps {
  sql: Sql;
  env: Env;
  clock: Clock;
  alarms: AlarmSchedule;
  /** The object's tenant and thread, from its name (undefined for an unnamed object). */
  name: { tenant: string; incarnation: string | null; threadId: string } | undefined;
  /** The thread as the listing shows it, loaded if need be; null when the object holds none. */
  snapshot: () => Promise<ThreadResource | null>;
  /** The tenant's object says the tenant was deleted: the thread deletes itself. */
  tenantGone: () => Promise<void>;
  /** The hooks' delivery-log entries the tenant has not acknowledged (`thread/webhooks/hook-intake.ts`). */
  deliveries: {
    pending: () => DeliveryEntry[];
    acknowledged: (entries: readonly DeliveryEntry[]) => void;
  };
  /** The tenant's endpoint subscriptions, as a push's answer (asked at `atMs`) gives them. */
  subscriptions: (subscriptions: WebhookSubscriptions, atMs: number) => void;
  waitUntil: (work: Promise<unknown>) => void;
}

/**
 * The thread's side of the tenant index and ledger (design §11): pushes what the tenant's object
 * should know (the thread as listed, ledger entries not yet acknowledged) off the response path,
 * coalesced, and repairs what a crash or a failed push left behind.
 *
 * Nothing here is a second copy that can disagree: the index entry is the thread's own resource,
 * computed when a push is made and compared (by hash) with the last one the tenant acknowledged,
 * and ledger entries are rows written with the line they count. So a push that never happened is
 * found stale by the next one: the next change (`kick`), the next load of the thread, or its
 * alarm (`repair`), which every change that needs a push keeps due. At most one push is in flight;
 * changes during it are folded into the one that follows, and pushes are at least
 * `SYNC_INTERVAL_MS` apart unless one must go at once (a create, a delete, a metadata change):
 * one that comes too soon is left to the alarm. Each push carries a version that only grows,
 * so the tenant ignores one that arrives after a newer one.
 */
export class TenantSync {
  readonly #deps: TenantSyncDeps;
  readonly #values: SyncValues;
  readonly #pushFailures: RetryCount;
  #inFlight: Promise<void> | undefined;
  #again = false;
  #againUrgent = false;
  #lastPushAt = Number.NEGATIVE_INFINITY;
  /**
   * `placement` as stored (null: none yet), read once per instance: every request and task asks
   * for it, and only `place` writes it (a delete keeps it as it is).
   */
  #placement: TenantPolicy | null | undefined;

  constructor(deps: TenantSyncDeps) {
    this.#deps = deps;
    this.#values = new SyncValues(deps.sql);
    this.#pushFailures = new RetryCount(this.#values, "push_attempts");
  }

  /** The sync of a Thread object, whose name (`{tenant}:{thread}`) says what it pushes for. */
  static ofObject(
    ctx: DurableObjectState,
    env: Env,
    clock: Clock,
    alarms: AlarmSchedule,
    hooks: ThreadSyncHooks,
  ): TenantSync {
    return new TenantSync({
      ...hooks,
      sql: sqlOf(ctx.storage.sql),
      env,
      clock,
      alarms,
      name: threadNameOf(ctx),
      waitUntil: (work) => ctx.waitUntil(work),
    });
  }

  /** The tenant's placement and quotas, as the newest request that carried them said. */
  get policy(): TenantPolicy {
    return (
      this.#storedPlacement() ?? {
        jurisdiction: null,
        quotas: NO_QUOTAS,
        incarnation: this.#deps.name?.incarnation ?? null,
      }
    );
  }

  #storedPlacement(): TenantPolicy | null {
    if (this.#placement === undefined) {
      this.#placement = this.#values.get<TenantPolicy>("placement") ?? null;
    }
    return this.#placement;
  }

  get quotas(): Quotas {
    return this.policy.quotas;
  }

  /** Keeps the policy a request carried, when it is new (quotas change; the jurisdiction never). */
  place(policy: TenantPolicy | undefined): void {
    if (policy === undefined) return;
    const stored = this.#storedPlacement();
    if (stored !== null && JSON.stringify(stored) === JSON.stringify(policy)) return;
    this.#values.put("placement", policy);
    this.#placement = policy;
  }

  /** The tenant's object, in its jurisdiction (undefined for an unnamed object). */
  tenant(): TenantRpc | undefined {
    const name = this.#deps.name;
    return name && tenantStubIn(this.#deps.env, this.policy.jurisdiction, name.tenant);
  }

  /** Something the tenant's object shows changed: push it soon (`urgent`: now). */
  kick(urgent = false): void {
    if (this.#deps.name === undefined) return;
    if (this.#inFlight) {
      this.#again = true;
      this.#againUrgent ||= urgent;
      return;
    }
    const wait = urgent ? 0 : this.#lastPushAt + SYNC_INTERVAL_MS - this.#deps.clock.nowMs();
    if (wait > 0) {
      // Too soon after the last push: the alarm pushes (the flush alarm after a turn is due
      // within a second anyway, so this sets none of its own in a stream of turns).
      this.#deps.waitUntil(this.#deps.alarms.within(wait));
      return;
    }
    const run = this.#pushOnce().then(() => {
      this.#inFlight = undefined;
      if (!this.#again) return;
      const urgentAgain = this.#againUrgent;
      this.#again = false;
      this.#againUrgent = false;
      this.kick(urgentAgain);
    });
    this.#inFlight = run;
    this.#deps.waitUntil(run);
  }

  /** The alarm's duty: push whatever the tenant's object has not acknowledged. */
  async repair(): Promise<void> {
    if (this.#deps.name === undefined) return;
    await this.#inFlight;
    while (await this.#pushOnce()) {
      // A long backlog of entries goes in consecutive pushes.
    }
  }

  /** One push, if anything is stale. True when more entries wait. Never throws. */
  async #pushOnce(): Promise<boolean> {
    this.#lastPushAt = this.#deps.clock.nowMs();
    try {
      const tenant = this.tenant();
      const sync = await this.#payload();
      if (!tenant || !sync) return false;
      const askedAt = this.#deps.clock.nowMs();
      const ack = await tenant.sync(sync.request);
      if (!ack.ok) throw new Error(`${ack.error.code}: ${ack.error.detail}`);
      // Deleted before it is acknowledged: a delete that fails leaves the push stale, and the
      // retry asks again.
      if (ack.value.tenantGone && sync.request.thread !== null) await this.#deps.tenantGone();
      this.#acknowledge(sync, ack.value);
      if (ack.value.webhooks) this.#deps.subscriptions(ack.value.webhooks, askedAt);
      this.#pushFailures.succeeded();
      return (
        sync.request.usage.length === SYNC_BATCH_ENTRIES ||
        sync.request.deliveries?.length === DELIVERY_PUSH_BATCH
      );
    } catch (err) {
      const { attempts, delayMs } = this.#pushFailures.failed();
      objectLog.warn("tenant_sync.push_failed", {
        tenant: this.#deps.name?.tenant,
        thread: this.#deps.name?.threadId,
        attempt: attempts,
        delay_ms: delayMs,
        error: describeError(err),
      });
      await this.#deps.alarms.within(delayMs);
      return false;
    }
  }

  /** The next push (its version taken), or undefined when nothing is stale. */
  async #payload(): Promise<{ request: ThreadSync; hash: string } | undefined> {
    const name = this.#deps.name;
    if (!name) return undefined;
    const current = await this.#deps.snapshot();
    const thread = current && indexEntryOf(current);
    // From here to the version, one synchronous step: versions follow the snapshots' order.
    const hash = bytesToHex(sha256(utf8ToBytes(JSON.stringify(thread))));
    const usage = this.pendingUsage();
    const deliveries = this.#deps.deliveries.pending();
    const pushed = this.#values.get<Pushed>("pushed");
    if (pushed?.hash === hash && usage.length === 0 && deliveries.length === 0) {
      return undefined;
    }
    const version = (this.#values.get<number>("version") ?? 0) + 1;
    this.#values.put("version", version);
    const request: ThreadSync = {
      threadId: name.threadId,
      incarnation: name.incarnation,
      version,
      thread,
      usage,
    };
    if (deliveries.length > 0) request.deliveries = deliveries;
    return { request, hash };
  }

  #acknowledge(sync: { request: ThreadSync; hash: string }, ack: SyncAck): void {
    const pushed = this.#values.get<Pushed>("pushed");
    if ((pushed?.version ?? 0) < sync.request.version) {
      this.#values.put("pushed", { version: sync.request.version, hash: sync.hash });
    }
    dropEntries(this.#deps.sql, ack.usageThrough);
    if (sync.request.deliveries) this.#deps.deliveries.acknowledged(sync.request.deliveries);
  }

  /**
   * The thread's ledger entries not acknowledged yet (a batch): what an admission, a release and
   * an answer to the tenant carry, so the tenant counts them in the step that changes the hold
   * (they stay the pushes' to deliver; the tenant takes each once).
   */
  pendingUsage(): LedgerEntry[] {
    return pendingEntries(this.#deps.sql, SYNC_BATCH_ENTRIES);
  }

  /**
   * Asks the tenant's object to admit a task under `quotas` (`tokens_per_day`,
   * `max_running_turns`), holding grant `held`, reserving `tokens`, with the thread's pending
   * ledger entries. A small request: the index entry is left to the pushes. Undefined for an
   * object that has no tenant.
   */
  grantQuota(
    quotas: Quotas,
    held: number,
    tokens: number,
  ): Promise<RpcResult<QuotaGrant>> | undefined {
    const tenant = this.tenant();
    const name = this.#deps.name;
    if (!tenant || !name) return undefined;
    return tenant.grantQuota({
      threadId: name.threadId,
      incarnation: name.incarnation,
      held,
      usage: this.pendingUsage(),
      quotas,
      tokens,
    });
  }

  /**
   * Tells the tenant's object that the thread no longer holds `grant`, off the response path,
   * with its pending ledger entries. If it never arrives, the tenant finds out when it asks for
   * the grant back.
   */
  releaseQuota(grant: number): void {
    const tenant = this.tenant();
    const name = this.#deps.name;
    if (!tenant || !name) return;
    const release = {
      threadId: name.threadId,
      incarnation: name.incarnation,
      grant,
      usage: this.pendingUsage(),
    };
    this.#deps.waitUntil(
      tenant.releaseQuota(release).catch((err: unknown) => {
        // The tenant asks for it when it needs it.
        objectLog.warn("tenant_sync.quota_release_failed", {
          tenant: name.tenant,
          thread: name.threadId,
          error: describeError(err),
        });
      }),
    );
  }

  /**
   * The thread's MCP server references against the tenant's registry. Rejects when there is no
   * tenant to ask or it refuses: the step then goes without those servers, with a warning.
   */
  async resolveMcpServers(refs: readonly McpServerRef[]): Promise<McpServerResolution> {
    const tenant = this.tenant();
    const name = this.#deps.name;
    if (!tenant || !name) throw new Error("this thread has no tenant registry");
    const answer = await tenant.resolveMcpServers({ incarnation: name.incarnation }, [...refs]);
    if (!answer.ok) throw new Error(`${answer.error.code}: ${answer.error.detail}`);
    return answer.value;
  }

  /** Room for this thread under `max_threads`, asked before it is created. */
  async reserve(maxThreads: number): Promise<RpcResult<null>> {
    const tenant = this.tenant();
    const name = this.#deps.name;
    if (!tenant || !name) return ok(null);
    return tenant.reserveThread({
      threadId: name.threadId,
      incarnation: name.incarnation,
      maxThreads,
    });
  }

  /**
   * What a delete must keep of this state (the version and ledger ids go on; the placement tells
   * the tombstone where to go), read before the storage is emptied.
   */
  static survivingDelete(sql: Sql): { key: string; value: string }[] {
    return sql<{ key: string; value: string }>`
      SELECT key, value FROM spindle_sync
      WHERE key IN (SELECT value FROM json_each(${JSON.stringify(SURVIVING_KEYS)}))`.toArray();
  }
}
