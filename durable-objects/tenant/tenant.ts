import { DurableObject } from "cloudflare:workers";
import type { Env } from "../../env.ts";
import {
  type ApiKeyResource,
  type ClaimDeliveryRequest,
  type CreatedApiKey,
  type CreateEndpointRequest,
  type CreateHookRequest,
  type CreateKeyRequest,
  type CreateMcpServerBody,
  type DeliveryResource,
  type EndpointResource,
  type GrantQuotaRequest,
  type HookRecord,
  type HookTarget,
  type ListQuery,
  type ListResource,
  type ListThreadsQuery,
  type LogDeliveryRequest,
  type McpServerResource,
  type PatchEndpointBody,
  type PatchMcpServerBody,
  type QuotaGrant,
  type RecordedAttempt,
  type ReleaseQuotaRequest,
  type ReserveThreadRequest,
  type RpcResult,
  resolveMcpServerRef,
  type SyncAck,
  type TenantCaller,
  type TenantHome,
  type TenantResource,
  type TenantRpc,
  type ThreadResource,
  type ThreadSync,
  tenantRecordOf,
  type UsageBucket,
  type UsageQuery,
  type VerifiedKey,
  type VerifyKeyRequest,
  type WebhookDelivery,
  type WebhookEvent,
  type WebhookSubscriptions,
  type WebhookTargetRequest,
  type WebhookTargetState,
} from "../../shared/api/index.ts";
import { describeError } from "../../shared/observability/index.ts";
import type {
  McpServerDefinition,
  McpServerRef,
  McpServerResolution,
} from "../../shared/protocol/index.ts";
import { AlarmSchedule } from "../common/alarms.ts";
import { systemClock, utcDay } from "../common/clock.ts";
import { badCursor } from "../common/cursor.ts";
import { objectLog } from "../common/log.ts";
import { migrate } from "../common/migrations.ts";
import { directoryStub, threadStubIn } from "../common/placement.ts";
import { fail, ok } from "../common/results.ts";
import { type Sql, sqlOf } from "../common/sql.ts";
import { DeliveryClaims } from "./delivery-claims.ts";
import { EndpointStore } from "./endpoints.ts";
import { HookStore } from "./hooks.ts";
import { KeyStore } from "./keys.ts";
import { McpServerStore } from "./mcp-servers.ts";
import { QuotaGrants, type YieldAnswer } from "./quota-grants.ts";
import { randomId } from "./random-ids.ts";
import { TENANT_MIGRATIONS } from "./schema.ts";
import { ThreadIndex } from "./thread-index.ts";
import { UsageRollup } from "./usage-rollup.ts";
import { DeliveryLeases } from "./webhook-leases.ts";
import { sweepGraceMs, WebhookSweep } from "./webhook-sweep.ts";

/** Threads deleted per alarm run while a tenant is being deleted, at most this many at once. */
export const DELETION_BATCH = 20;
export const DELETION_PARALLEL = 5;
/** The wait before the deletion goes on after a run that failed somewhere. */
export const DELETION_RETRY_MS = 10_000;

const UNAUTHORIZED = fail("unauthorized", "The API key is not valid.");
const NO_TENANT = fail("not_found", "No such tenant.");
const NO_HOOK = fail("not_found", "No such hook.");
const NO_ENDPOINT = fail("not_found", "No such webhook endpoint.");

/**
 * One tenant (design §11): its record, API keys, thread index, usage ledger and quota counters,
 * in one SQLite-backed object named by the tenant id, in the tenant's jurisdiction. The hot paths
 * reach it rarely: a key is verified once per isolate per 30 s, and a Thread pushes its changes
 * coalesced, off its responses; a thread of a tenant with turn quotas asks once per admission
 * lease (`tenant/quota-grants.ts`), not once per turn.
 * Its inbound hooks and outbound endpoints (design §12) live here too: a delivery's verification
 * reads its hook once per isolate per 30 s, and every push is answered with the endpoint
 * subscriptions, so threads know what to record without asking.
 * The record is the directory's, copied here so a key's verification needs no other object.
 * Tenants of the static `SPINDLE_API_KEYS` have no record: their threads are indexed and their
 * usage counted all the same, but they hold no keys here.
 */
export class Tenant extends DurableObject<Env> implements TenantRpc {
  readonly #sql: Sql;
  readonly #keys: KeyStore;
  readonly #index: ThreadIndex;
  readonly #admissions: QuotaGrants;
  readonly #usage: UsageRollup;
  readonly #hooks: HookStore;
  readonly #endpoints: EndpointStore;
  readonly #claims: DeliveryClaims;
  readonly #mcpServers: McpServerStore;
  /** One alarm for the deletion and the webhook sweep. */
  readonly #alarms: AlarmSchedule;
  readonly #sweep: WebhookSweep;
  readonly #metaRead = new Map<string, unknown>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage.sql, TENANT_MIGRATIONS);
    this.#sql = sqlOf(ctx.storage.sql);
    this.#keys = new KeyStore(this.#sql, systemClock, env);
    this.#index = new ThreadIndex(this.#sql, systemClock);
    this.#admissions = new QuotaGrants({
      sql: this.#sql,
      clock: systemClock,
      yieldOf: (threadId, grant) => this.#yieldOf(threadId, grant),
      take: (threadId, usage) => this.#usage.apply(threadId, usage),
    });
    this.#usage = new UsageRollup(this.#sql, (threadId, tokens) =>
      this.#admissions.settle(threadId, tokens),
    );
    this.#hooks = new HookStore(this.#sql, systemClock);
    const leases = new DeliveryLeases(this.#sql, systemClock, sweepGraceMs(env));
    this.#endpoints = new EndpointStore(this.#sql, systemClock, leases);
    this.#alarms = new AlarmSchedule(ctx.storage, systemClock);
    this.#sweep = new WebhookSweep({
      endpoints: this.#endpoints,
      leases,
      queue: env.WEBHOOKS,
      alarms: this.#alarms,
      clock: systemClock,
    });
    this.#claims = new DeliveryClaims(this.#sql, systemClock);
    this.#mcpServers = new McpServerStore(this.#sql, systemClock);
  }

  /**
   * A `tenant_meta` value, read once per instance: the record and the deleted mark are read by
   * nearly every call (each push, key check and admission), and only this object writes them.
   */
  #meta<T>(key: string): T | undefined {
    if (!this.#metaRead.has(key)) {
      const row = this.#sql<{
        value: string;
      }>`SELECT value FROM tenant_meta WHERE key = ${key}`.toArray()[0];
      this.#metaRead.set(key, row === undefined ? undefined : JSON.parse(row.value));
    }
    return this.#metaRead.get(key) as T | undefined;
  }

  #putMeta(key: string, value: unknown): void {
    this.#sql`INSERT INTO tenant_meta (key, value) VALUES (${key}, ${JSON.stringify(value)})
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
    this.#metaRead.set(key, value);
  }

  #deleteMeta(key: string): void {
    this.#sql`DELETE FROM tenant_meta WHERE key = ${key}`;
    this.#metaRead.set(key, undefined);
  }

  #record(): TenantResource | undefined {
    const record = this.#meta<TenantResource>("record");
    return record && tenantRecordOf(record);
  }

  /**
   * The incarnation of the tenant id this object holds (design §18 invariant 19): made when the
   * record is first stored, new each time the id is created again; null for a tenant of the
   * static keys or one created before incarnations.
   */
  #incarnation(): string | null {
    return this.#meta<string>("incarnation") ?? null;
  }

  /** Stores a new tenant's record, in a new incarnation. */
  #begin(record: TenantResource): void {
    this.#putMeta("record", record);
    this.#putMeta("incarnation", randomId("i", 12).slice(2));
    this.#deleteMeta("deleted");
  }

  #home(record: TenantResource): TenantHome {
    return {
      tenant: record.id,
      jurisdiction: record.jurisdiction,
      incarnation: this.#incarnation(),
    };
  }

  /**
   * Whether `caller` acts in this tenant: the operator always; a key or hook only in the
   * incarnation it was read in, and never once the tenant is deleted.
   */
  #admits(caller: TenantCaller): boolean {
    if ("operator" in caller) return true;
    return !this.#gone() && caller.incarnation === this.#incarnation();
  }

  /** A thread's object of another incarnation than this one, or of a deleted tenant. */
  #foreign(incarnation: string | null | undefined): boolean {
    return this.#meta<boolean>("deleted") === true || (incarnation ?? null) !== this.#incarnation();
  }

  /** Whether the tenant was deleted (its record went; only this mark is left). */
  #gone(): boolean {
    return this.#record()?.status === "deleting" || this.#meta<boolean>("deleted") === true;
  }

  async verifyKey(req: VerifyKeyRequest): Promise<RpcResult<VerifiedKey>> {
    const scopes = this.#keys.verify(req.keyId, req.digest);
    const tenant = this.#record();
    if (scopes === undefined || tenant?.status !== "active") return UNAUTHORIZED;
    return ok({ tenant, incarnation: this.#incarnation(), keyId: req.keyId, scopes });
  }

  /** A record for a tenant this object does not hold yet begins a new incarnation. */
  async putRecord(record: TenantResource): Promise<RpcResult<TenantResource>> {
    if (this.#record() === undefined) this.#begin(record);
    else this.#putMeta("record", record);
    return ok(record);
  }

  async deleteTenant(record: TenantResource): Promise<RpcResult<TenantResource>> {
    const deleting: TenantResource = { ...record, status: "deleting" };
    this.#putMeta("record", deleting);
    this.#keys.clear();
    await this.#alarms.within(0);
    return ok(deleting);
  }

  /**
   * A batch of the deleting tenant's threads goes; then the next batch, until none is left. Any
   * other tenant's alarm is the webhook sweep's.
   */
  override async alarm(): Promise<void> {
    this.#alarms.fired();
    const record = this.#record();
    if (record?.status !== "deleting") return this.#sweep.run();
    const batch = this.#index.threadIds(DELETION_BATCH);
    if (batch.length === 0) {
      await directoryStub(this.env).forget(record.id);
      await this.ctx.storage.deleteAll();
      this.#metaRead.clear();
      migrate(this.ctx.storage.sql, TENANT_MIGRATIONS);
      // A thread that pushes now (created with a key cached before the delete) learns that its
      // tenant is gone and deletes itself.
      this.#putMeta("deleted", true);
      return;
    }
    let failed = false;
    for (let i = 0; i < batch.length; i += DELETION_PARALLEL) {
      await Promise.all(
        batch.slice(i, i + DELETION_PARALLEL).map(async (threadId) => {
          try {
            const stub = threadStubIn(this.env, this.#home(record), threadId);
            const deleted = await stub.deleteThread();
            if (deleted.ok || deleted.error.code === "not_found") this.#removeThread(threadId);
            else failed = true;
          } catch (err) {
            objectLog.warn("tenant.thread_delete_failed", {
              tenant: record.id,
              thread: threadId,
              error: describeError(err),
            });
            failed = true;
          }
        }),
      );
    }
    await this.#alarms.within(failed ? DELETION_RETRY_MS : 0);
  }

  async createKey(
    caller: TenantCaller,
    req: CreateKeyRequest & { record?: TenantResource },
  ): Promise<RpcResult<CreatedApiKey>> {
    // The admin API passes the directory's record: it repairs a create cut short before the copy.
    if (req.record && this.#record() === undefined) this.#begin(req.record);
    if (!this.#admits(caller)) return UNAUTHORIZED;
    const tenant = this.#record();
    if (tenant?.status !== "active") return NO_TENANT;
    return this.#keys.create(tenant, { name: req.name, scopes: req.scopes });
  }

  async listKeys(
    caller: TenantCaller,
    req: ListQuery,
  ): Promise<RpcResult<ListResource<ApiKeyResource>>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#page(this.#keys.list(req));
  }

  async revokeKey(caller: TenantCaller, keyId: string): Promise<RpcResult<null>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#keys.revoke(keyId) ? ok(null) : fail("not_found", `No API key "${keyId}".`);
  }

  async listThreads(
    caller: TenantCaller,
    req: ListThreadsQuery,
  ): Promise<RpcResult<ListResource<ThreadResource>>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#index.list(req);
  }

  async reserveThread(req: ReserveThreadRequest): Promise<RpcResult<null>> {
    // A key cached before the delete (or of an incarnation before it) still reaches here for up
    // to 30 s: it fails as it will then.
    if (this.#gone() || this.#foreign(req.incarnation)) return UNAUTHORIZED;
    return this.#index.reserve(req.threadId, req.maxThreads);
  }

  async sync(req: ThreadSync): Promise<RpcResult<SyncAck>> {
    return ok(this.#apply(req));
  }

  /**
   * While the tenant is being deleted, a push is still indexed (so the deletion's sweep finds the
   * thread) and told the tenant is gone (so the thread deletes itself too); once it is deleted,
   * nothing is kept.
   */
  #apply(req: ThreadSync): SyncAck {
    if (this.#foreign(req.incarnation)) {
      const last = req.usage.at(-1);
      const usageThrough = last ? { incarnation: last.incarnation, seq: last.seq } : null;
      return { usageThrough, tenantGone: true };
    }
    const usageThrough = this.#usage.apply(req.threadId, req.usage);
    // A delete's tombstone ends the thread's admission too; a late one (ignored) ends nothing.
    if (this.#index.apply(req)) this.#admissions.forget(req.threadId);
    if (req.deliveries) this.#hooks.log(req.deliveries);
    return {
      usageThrough,
      tenantGone: this.#gone(),
      webhooks: this.#endpoints.subscriptions(),
    };
  }

  async grantQuota(req: GrantQuotaRequest): Promise<RpcResult<QuotaGrant>> {
    if (this.#gone() || this.#foreign(req.incarnation)) return UNAUTHORIZED;
    return this.#admissions.admit(req, () => this.#usage.tokensOn(utcDay(systemClock.nowMs())));
  }

  async releaseQuota(req: ReleaseQuotaRequest): Promise<RpcResult<null>> {
    if (!this.#foreign(req.incarnation)) this.#admissions.release(req);
    return ok(null);
  }

  /** A holder's answer when asked to give its admission back. */
  async #yieldOf(threadId: string, grant: number): Promise<YieldAnswer> {
    const record = this.#record();
    if (!record) return undefined;
    try {
      const stub = threadStubIn(this.env, this.#home(record), threadId);
      const answer = await stub.yieldQuota(grant);
      if (answer.ok) return answer.value;
      // A thread that is gone holds nothing; its entries came with its tombstone.
      return answer.error.code === "not_found"
        ? { released: true, reserved: 0, usage: [] }
        : undefined;
    } catch (err) {
      objectLog.warn("tenant.quota_yield_failed", {
        tenant: record.id,
        thread: threadId,
        error: describeError(err),
      });
      return undefined;
    }
  }

  #removeThread(threadId: string): void {
    this.#index.remove(threadId);
    this.#admissions.forget(threadId);
  }

  async usage(
    caller: TenantCaller,
    req: UsageQuery,
  ): Promise<RpcResult<ListResource<UsageBucket>>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#usage.query(req, systemClock.nowMs());
  }

  // --- Hooks and webhook endpoints (design §12) -------------------------------------------------

  async createHook(caller: TenantCaller, req: CreateHookRequest): Promise<RpcResult<HookRecord>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#hooks.create(req);
  }

  async listHooks(
    caller: TenantCaller,
    req: ListQuery,
  ): Promise<RpcResult<ListResource<HookRecord>>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#page(this.#hooks.list(req));
  }

  async getHook(caller: TenantCaller, hookId: string): Promise<RpcResult<HookRecord>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    const hook = this.#hooks.get(hookId);
    return hook ? ok(hook) : NO_HOOK;
  }

  async deleteHook(caller: TenantCaller, hookId: string): Promise<RpcResult<null>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    if (!this.#hooks.delete(hookId)) return NO_HOOK;
    this.#claims.forget(hookId);
    return ok(null);
  }

  async rotateHookSecret(
    caller: TenantCaller,
    hookId: string,
    secret: string,
  ): Promise<RpcResult<HookRecord>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    const hook = this.#hooks.rotate(hookId, secret);
    return hook ? ok(hook) : NO_HOOK;
  }

  async hookTarget(hookId: string): Promise<RpcResult<HookTarget>> {
    const target = this.#gone() ? undefined : this.#hooks.target(hookId);
    if (!target) return NO_HOOK;
    const record = this.#record();
    return ok({
      ...target,
      ...(record
        ? {
            policy: {
              jurisdiction: record.jurisdiction,
              quotas: record.quotas,
              threadDefaults: record.thread_defaults,
              incarnation: this.#incarnation(),
            },
          }
        : {}),
      webhooks: this.#endpoints.subscriptions(),
    });
  }

  async claimDelivery(
    caller: TenantCaller,
    req: ClaimDeliveryRequest,
  ): Promise<RpcResult<{ threadId: string }>> {
    // A hook deleted (or a tenant deleted, or created again) since the edge cached it.
    if (!this.#admits(caller) || !this.#hooks.get(req.hookId)) return NO_HOOK;
    return ok({ threadId: this.#claims.claim(req.hookId, req.key, req.threadId) });
  }

  async logDelivery(caller: TenantCaller, req: LogDeliveryRequest): Promise<RpcResult<null>> {
    if (!this.#admits(caller)) return NO_HOOK;
    this.#hooks.log([{ delivery: req.delivery, rev: 1 }]);
    return ok(null);
  }

  async listHookDeliveries(
    caller: TenantCaller,
    hookId: string,
    req: ListQuery,
  ): Promise<RpcResult<ListResource<DeliveryResource>>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    if (!this.#hooks.get(hookId)) return NO_HOOK;
    return this.#page(this.#hooks.deliveries(hookId, req));
  }

  async createEndpoint(
    caller: TenantCaller,
    req: CreateEndpointRequest,
  ): Promise<RpcResult<EndpointResource>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#endpoints.create(req);
  }

  async listEndpoints(
    caller: TenantCaller,
    req: ListQuery,
  ): Promise<RpcResult<ListResource<EndpointResource>>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#page(this.#endpoints.list(req));
  }

  async getEndpoint(
    caller: TenantCaller,
    endpointId: string,
  ): Promise<RpcResult<EndpointResource>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    const endpoint = this.#endpoints.get(endpointId);
    return endpoint ? ok(endpoint) : NO_ENDPOINT;
  }

  async patchEndpoint(
    caller: TenantCaller,
    endpointId: string,
    patch: PatchEndpointBody,
  ): Promise<RpcResult<EndpointResource>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    const endpoint = this.#endpoints.patch(endpointId, patch);
    return endpoint ? ok(endpoint) : NO_ENDPOINT;
  }

  async deleteEndpoint(caller: TenantCaller, endpointId: string): Promise<RpcResult<null>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#endpoints.delete(endpointId) ? ok(null) : NO_ENDPOINT;
  }

  async rotateEndpointSecret(
    caller: TenantCaller,
    endpointId: string,
    secret: string,
  ): Promise<RpcResult<EndpointResource>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    const endpoint = this.#endpoints.rotate(endpointId, secret);
    return endpoint ? ok(endpoint) : NO_ENDPOINT;
  }

  async listEndpointDeliveries(
    caller: TenantCaller,
    endpointId: string,
    req: ListQuery,
  ): Promise<RpcResult<ListResource<WebhookDelivery>>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    if (!this.#endpoints.get(endpointId)) return NO_ENDPOINT;
    return this.#page(this.#endpoints.deliveries(endpointId, req));
  }

  async webhookSubscriptions(incarnation: string | null): Promise<RpcResult<WebhookSubscriptions>> {
    const gone = this.#gone() || this.#foreign(incarnation);
    return ok(gone ? { endpoints: [] } : this.#endpoints.subscriptions());
  }

  /** Events of another incarnation (or of a deleted tenant) find no endpoint. */
  async webhookTargets(req: WebhookTargetRequest[]): Promise<RpcResult<WebhookTargetState[]>> {
    if (this.#gone()) {
      return ok(
        req.map(({ webhookId }) => ({
          webhookId,
          endpoint: null,
          delivered: false,
          superseded: false,
          attempts: 0,
        })),
      );
    }
    return ok(this.#endpoints.targets(req));
  }

  async enqueueWebhooks(events: WebhookEvent[]): Promise<RpcResult<null>> {
    // A tenant being deleted takes no more events (its endpoints are as good as gone).
    // Nor events of a thread of another incarnation (one recorded before them carries none).
    const ours = events.filter((e) => e.incarnation === undefined || !this.#foreign(e.incarnation));
    if (!this.#gone()) await this.#sweep.enqueue(ours);
    return ok(null);
  }

  async recordWebhookAttempts(attempts: RecordedAttempt[]): Promise<RpcResult<null>> {
    this.#endpoints.record(attempts);
    return ok(null);
  }

  // --- MCP servers (design §16) ----------------------------------------------------------------

  async createMcpServer(
    caller: TenantCaller,
    body: CreateMcpServerBody,
  ): Promise<RpcResult<McpServerResource>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#mcpServers.create(body);
  }

  async listMcpServers(
    caller: TenantCaller,
    req: ListQuery,
  ): Promise<RpcResult<ListResource<McpServerResource>>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#page(this.#mcpServers.list(req));
  }

  async getMcpServer(caller: TenantCaller, label: string): Promise<RpcResult<McpServerResource>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#mcpServers.get(label);
  }

  async patchMcpServer(
    caller: TenantCaller,
    label: string,
    patch: PatchMcpServerBody,
  ): Promise<RpcResult<McpServerResource>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#mcpServers.patch(label, patch);
  }

  async deleteMcpServer(caller: TenantCaller, label: string): Promise<RpcResult<null>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    return this.#mcpServers.delete(label)
      ? ok(null)
      : fail("not_found", `No MCP server "${label}".`);
  }

  async resolveMcpServers(
    caller: TenantCaller,
    refs: McpServerRef[],
  ): Promise<RpcResult<McpServerResolution>> {
    if (!this.#admits(caller)) return UNAUTHORIZED;
    const records = this.#mcpServers.records(refs.map((ref) => ref.label));
    const servers: McpServerDefinition[] = [];
    const unavailable: { label: string; reason: string }[] = [];
    for (const ref of refs) {
      const resolved = resolveMcpServerRef(ref, records.get(ref.label));
      if ("server" in resolved) servers.push(resolved.server);
      else unavailable.push({ label: ref.label, reason: resolved.unavailable });
    }
    return ok({ servers, unavailable });
  }

  #page<T>(page: ListResource<T> | undefined): RpcResult<ListResource<T>> {
    return page ? ok(page) : badCursor();
  }
}
