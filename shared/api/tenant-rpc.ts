/**
 * The RPC contracts of the tenancy objects (design §11). Types only, like `thread-rpc.ts`: the
 * worker and the Thread DO call these objects through stubs, and every method answers with an
 * `RpcResult`.
 *
 * - `Tenant`, one per tenant, named by the tenant id, in its jurisdiction's namespace: the
 *   tenant's record (a copy of the directory's), its API keys (SHA-256 digests only), the thread
 *   index, the usage ledger's rollups, quota counters. Reached by the worker to verify a key (once
 *   per key and isolate per 30 s), to list threads and usage and to manage keys; by a Thread DO to
 *   push its index entry and ledger entries (coalesced, off the response path) and to admit a
 *   task when the tenant has quotas. Never on the turn path of a tenant without quotas.
 * - `TenantDirectory`, one object: every managed tenant's record, for the admin API only.
 */
import type { McpServerRef, McpServerResolution } from "../protocol/index.ts";
import type { CreateMcpServerBody, McpServerResource, PatchMcpServerBody } from "./mcp-servers.ts";
import type { ListResource, ThreadResource } from "./resources.ts";
import type {
  ApiKeyResource,
  CreatedApiKey,
  Jurisdiction,
  ListQuery,
  ListThreadsQuery,
  Quotas,
  Scope,
  TenantResource,
  ThreadDefaults,
  UsageBucket,
  UsageQuery,
} from "./tenancy.ts";
import type { RpcResult } from "./thread-rpc.ts";
import type { DeliveryEntry, TenantWebhookRpc, WebhookSubscriptions } from "./webhook-rpc.ts";

/** What a request carries about its tenant to the Thread DO: from the key, cached up to 30 s. */
export interface TenantPolicy {
  jurisdiction: Jurisdiction;
  quotas: Quotas;
  /** The tenant's `thread_defaults`; absent in a placement stored before they existed: none. */
  threadDefaults?: ThreadDefaults;
  /**
   * The incarnation of the tenant id this policy was read in (design §18 invariant 19); null for
   * a tenant created before incarnations existed.
   */
  incarnation: string | null;
}

/**
 * Who asks a tenant's object on behalf of a request: the incarnation its key or hook was read in
 * (null for a tenant of the static keys, or one created before incarnations), or the operator's
 * admin API, which acts on whichever incarnation is current. A caller of another incarnation than
 * the object's is answered as a key that is not valid: a stale cache entry authorizes nothing in
 * a tenant id created again.
 */
export type TenantCaller = { incarnation: string | null } | { operator: true };

export const OPERATOR: TenantCaller = Object.freeze({ operator: true });

/** Where a tenant's objects live: its id, its jurisdiction and its incarnation. */
export interface TenantHome {
  tenant: string;
  jurisdiction: Jurisdiction;
  incarnation: string | null;
}

/** A key the tenant's object recognized. */
export interface VerifiedKey {
  tenant: TenantResource;
  /** The tenant's incarnation, which the key belongs to. */
  incarnation: string | null;
  keyId: string;
  scopes: Scope[];
}

/** `verifyKey`: the key's id (public, from the key) and the SHA-256 of the whole key. */
export interface VerifyKeyRequest {
  keyId: string;
  /** The 32 bytes of the SHA-256, as computed (no hex on the way). */
  digest: Uint8Array;
}

/** `createKey`. */
export interface CreateKeyRequest {
  name: string | null;
  scopes: Scope[];
  /**
   * The directory's record, from the admin API: a tenant object without one (its create was cut
   * short before the copy) takes it.
   */
  record?: TenantResource;
}

/** A place in the ledger entries of one thread id: its incarnation, then the line's seq. */
export interface EntryMark {
  incarnation: string;
  seq: number;
}

/**
 * One provider request's usage (design §11 usage ledger), as the Thread DO derived it from the
 * `token_count` line the request produced, in the same step that wrote the line.
 */
export interface LedgerEntry {
  /**
   * The thread's `created_at`, which tells a thread from one created later under the same id
   * (after a delete); with `seq`, the entry's id.
   */
  incarnation: string;
  /** The seq of the `token_count` line in the thread's rollout. */
  seq: number;
  turn_id: string;
  /** The catalog slug of the model that served the request. */
  model: string;
  /** The UTC day of the `token_count` line. */
  day: string;
  /** The first request of its turn: the turn is counted in this entry's buckets. */
  first_of_turn: boolean;
  input_tokens: number;
  cached_input_tokens: number;
  output_tokens: number;
  reasoning_tokens: number;
}

/** What a Thread DO pushes to its tenant's object. Applying the same push twice changes nothing. */
export interface ThreadSync {
  threadId: string;
  /**
   * The tenant incarnation the thread's object belongs to (in its name): a push of another one is
   * told the tenant is gone and changes nothing.
   */
  incarnation: string | null;
  /**
   * Increases with every push of the thread's object, across deletes: an entry older than the one
   * applied (a push that arrives late) is ignored.
   */
  version: number;
  /** The thread as the listing shows it; null when the object holds no thread (deleted). */
  thread: ThreadResource | null;
  /**
   * Ledger entries not acknowledged yet, oldest first; those at or before the newest one taken
   * (by incarnation, then seq) are skipped.
   */
  usage: LedgerEntry[];
  /**
   * Entries of the hooks' delivery logs this thread changed (a delivery, how its turn ended)
   * since the tenant last acknowledged them; absent when none.
   */
  deliveries?: DeliveryEntry[];
}

export interface SyncAck {
  /** Every ledger entry up to this one is in the tenant's ledger: the thread may drop them. */
  usageThrough: { incarnation: string; seq: number } | null;
  /** The tenant was deleted: the thread deletes itself. */
  tenantGone: boolean;
  /** The tenant's endpoint subscriptions now: the thread records its events by them. */
  webhooks?: WebhookSubscriptions;
}

/** `grantQuota`: the quota checks before a task calls the provider (design §15 invariant 13). */
export interface GrantQuotaRequest {
  threadId: string;
  incarnation: string | null;
  /**
   * The grant the thread holds now (0: none, or one a refusal must not drop: that of a running
   * task): a refusal drops that hold, never a newer one.
   */
  held: number;
  /**
   * The thread's ledger entries not acknowledged yet: taken into the ledger before the check, so
   * its own newest usage counts and what it spent before this admission is not counted against
   * the new share (pushing them again changes nothing).
   */
  usage: LedgerEntry[];
  quotas: Quotas;
  /**
   * Under `tokens_per_day`: the tokens the thread may spend from now until its next admission
   * could be needed, at least the task's reservation (its requests' estimated prompts plus their
   * output limits; with a task running, also what that task may still spend). 0 without it.
   */
  tokens: number;
}

/**
 * An admission, leased: for `leaseMs` after it arrives, the thread starts its tasks without
 * asking again while each one's reservation fits in what is left of `tokens` (null: no
 * `tokens_per_day`) after what it spent since it asked, on the same UTC day and under the same
 * quotas. The tenant counts the thread as holding a
 * running slot until the thread releases the grant or gives it back when asked
 * (`ThreadRpc.yieldQuota`).
 */
export interface QuotaGrant {
  /** Grows with every admission of the tenant: names this hold in a release or a yield. */
  grant: number;
  leaseMs: number;
  /** The share of the day's tokens reserved for the thread: at least the request's `tokens`. */
  tokens: number | null;
}

/**
 * `releaseQuota`: the thread's lease ended (or was refused) with no task running. Its ledger
 * entries not acknowledged yet are taken in the same step as the hold ends, so the tokens its
 * share reserved are counted as used before they stop being reserved.
 */
export interface ReleaseQuotaRequest {
  threadId: string;
  incarnation: string | null;
  grant: number;
  usage: LedgerEntry[];
}

/**
 * A thread's answer when its tenant asks an admission back (`ThreadRpc.yieldQuota`), with its
 * ledger entries not acknowledged yet (taken in the step that changes the hold, as for a release).
 */
export interface YieldedQuota {
  /** True: the thread holds nothing any more. False: it keeps its slot (a task runs, or a request is out). */
  released: boolean;
  /** What the kept hold must still reserve: the most the running or admitted task may still spend. */
  reserved: number;
  usage: LedgerEntry[];
}

/** `reserveThread`: room for one more thread under `max_threads`, before it is created. */
export interface ReserveThreadRequest {
  threadId: string;
  incarnation: string | null;
  maxThreads: number;
}

export interface TenantRpc extends TenantWebhookRpc {
  /**
   * Checks a presented key in constant time against the stored digest of `keyId`, and the
   * tenant's state. Every failure (no such key, a revoked key, a deleted tenant, no tenant) is the
   * same `unauthorized`, so the answer tells nothing about which. Updates `last_used_at` at most
   * once a minute.
   */
  verifyKey(req: VerifyKeyRequest): Promise<RpcResult<VerifiedKey>>;
  /** Stores the directory's record of this tenant (create and update). */
  putRecord(record: TenantResource): Promise<RpcResult<TenantResource>>;
  /**
   * Starts deleting the tenant: keys stop working here at once (cached ones within 30 s), and an
   * alarm deletes the tenant's threads in batches, resuming after any failure; once none is left
   * the object keeps only a tombstone, and the directory forgets the tenant.
   */
  deleteTenant(record: TenantResource): Promise<RpcResult<TenantResource>>;
  /** `not_found` for a tenant without a record (deleted, or configured by static keys). */
  createKey(caller: TenantCaller, req: CreateKeyRequest): Promise<RpcResult<CreatedApiKey>>;
  listKeys(caller: TenantCaller, req: ListQuery): Promise<RpcResult<ListResource<ApiKeyResource>>>;
  /** `not_found` for a key this tenant does not have. */
  revokeKey(caller: TenantCaller, keyId: string): Promise<RpcResult<null>>;
  listThreads(
    caller: TenantCaller,
    req: ListThreadsQuery,
  ): Promise<RpcResult<ListResource<ThreadResource>>>;
  /** `quota_exceeded` (`max_threads`) when the tenant holds as many threads as it may. */
  reserveThread(req: ReserveThreadRequest): Promise<RpcResult<null>>;
  sync(req: ThreadSync): Promise<RpcResult<SyncAck>>;
  /**
   * Checks `tokens_per_day` (the day's tokens with the request's entries, and the shares other
   * threads hold; `Retry-After` until the next UTC day) and `max_running_turns` (the slots other
   * threads hold), asking holders to give back what they do not use before refusing, and grants
   * a lease when both pass.
   */
  grantQuota(req: GrantQuotaRequest): Promise<RpcResult<QuotaGrant>>;
  /** The thread no longer holds `grant` (nor anything older). */
  releaseQuota(req: ReleaseQuotaRequest): Promise<RpcResult<null>>;
  usage(caller: TenantCaller, req: UsageQuery): Promise<RpcResult<ListResource<UsageBucket>>>;

  // The tenant's MCP servers (design §16). No answer carries a header's value.
  /** `mcp_server_exists` when the label is taken; `limit_exceeded` past `mcp_servers_per_tenant`. */
  createMcpServer(
    caller: TenantCaller,
    body: CreateMcpServerBody,
  ): Promise<RpcResult<McpServerResource>>;
  listMcpServers(
    caller: TenantCaller,
    req: ListQuery,
  ): Promise<RpcResult<ListResource<McpServerResource>>>;
  getMcpServer(caller: TenantCaller, label: string): Promise<RpcResult<McpServerResource>>;
  /** `invalid_request` at `/headers` when the merged headers pass their limits. */
  patchMcpServer(
    caller: TenantCaller,
    label: string,
    patch: PatchMcpServerBody,
  ): Promise<RpcResult<McpServerResource>>;
  deleteMcpServer(caller: TenantCaller, label: string): Promise<RpcResult<null>>;
  /**
   * A thread's references against the registry (`resolveMcpServerRef`), in their order: the
   * servers it may use, with their headers (for the requests to them only), and the labels it
   * cannot, with why. The caller is the thread's incarnation: another one is `unauthorized`.
   */
  resolveMcpServers(
    caller: TenantCaller,
    refs: McpServerRef[],
  ): Promise<RpcResult<McpServerResolution>>;
}

export interface DirectoryRpc {
  /** Records a new tenant; `tenant_exists` when the id is taken (also while one is deleting). */
  claim(record: TenantResource): Promise<RpcResult<TenantResource>>;
  get(tenant: string): Promise<RpcResult<TenantResource>>;
  put(record: TenantResource): Promise<RpcResult<TenantResource>>;
  list(req: ListQuery): Promise<RpcResult<ListResource<TenantResource>>>;
  /** Forgets a tenant whose deletion finished. */
  forget(tenant: string): Promise<RpcResult<null>>;
}
