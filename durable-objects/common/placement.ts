import type { Env } from "../../env.ts";
import type {
  DirectoryRpc,
  Jurisdiction,
  TenantHome,
  TenantRpc,
  ThreadRpc,
} from "../../shared/api/index.ts";
import { describeError } from "../../shared/observability/index.ts";
import { objectLog } from "./log.ts";

/**
 * Where a tenant's data lives (design §11 residency): the one place that turns a jurisdiction into
 * a Durable Object namespace and an R2 bucket. Every object of a tenant (its `Tenant` object and
 * its threads) is addressed through here, by the worker and by the objects themselves, so the
 * choice is made once and tests can watch it.
 *
 * A namespace's `jurisdiction(j)` gives the objects created in `j`; an R2 bucket is created in a
 * jurisdiction and bound under its own name (`ROLLOUT_EU`, `ROLLOUT_FEDRAMP`). Local workerd
 * cannot place objects (its `jurisdiction()` throws): with `SPINDLE_ENV=development` the objects
 * of such a tenant then live in the plain namespace, while the bucket is still the
 * jurisdiction's. In production a failure to place an object is an error, never a fallback.
 */

/**
 * The DO name of a thread: `{tenant}:{thread}`, or `{tenant}.{incarnation}:{thread}` for a tenant
 * with an incarnation, so a tenant id created again after a delete addresses none of the objects
 * of the one before (design §18 invariant 19). Neither id may hold `:` or `.` (invariant 9).
 */
export function threadObjectName(home: TenantHome, threadId: string): string {
  return `${tenantPathOf(home)}:${threadId}`;
}

/** `{tenant}` or `{tenant}.{incarnation}`: a tenant's part of its thread names and R2 keys. */
export function tenantPathOf(home: Pick<TenantHome, "tenant" | "incarnation">): string {
  return home.incarnation === null ? home.tenant : `${home.tenant}.${home.incarnation}`;
}

/** The tenant, its incarnation and the thread a Thread object is named for, if any. */
export function threadNameOf(
  ctx: DurableObjectState,
): { tenant: string; incarnation: string | null; threadId: string } | undefined {
  const [path, threadId] = ctx.id.name?.split(":") ?? [];
  if (!path || !threadId) return undefined;
  const [tenant = "", incarnation] = path.split(".");
  return tenant ? { tenant, incarnation: incarnation ?? null, threadId } : undefined;
}

/** The one object of the tenant directory. */
export const DIRECTORY_OBJECT_NAME = "directory";

/** The namespace of `jurisdiction`'s objects. */
export function namespaceIn(
  env: Pick<Env, "SPINDLE_ENV">,
  namespace: DurableObjectNamespace,
  jurisdiction: Jurisdiction,
): DurableObjectNamespace {
  if (jurisdiction === null) return namespace;
  try {
    return namespace.jurisdiction(jurisdiction);
  } catch (err) {
    if (env.SPINDLE_ENV !== "development") throw err;
    warnOnce(jurisdiction, err);
    return namespace;
  }
}

const warned = new Set<string>();
function warnOnce(jurisdiction: string, err: unknown): void {
  if (warned.has(jurisdiction)) return;
  warned.add(jurisdiction);
  objectLog.warn("placement.plain_namespace", {
    jurisdiction,
    reason: "development: the local runtime cannot place objects",
    error: describeError(err),
  });
}

/** The R2 bucket of `jurisdiction`'s rollouts; undefined when the deployment binds none. */
export function bucketIn(env: Env, jurisdiction: Jurisdiction): R2Bucket | undefined {
  switch (jurisdiction) {
    case null:
      return env.ROLLOUT;
    case "eu":
      return env.ROLLOUT_EU;
    case "fedramp":
      return env.ROLLOUT_FEDRAMP;
  }
}

/** The bucket of `jurisdiction`, or an error naming the binding a deployment lacks. */
export function requireBucketIn(env: Env, jurisdiction: Jurisdiction): R2Bucket {
  const bucket = bucketIn(env, jurisdiction);
  if (bucket === undefined) {
    throw new Error(`no R2 bucket is bound for jurisdiction "${jurisdiction}"`);
  }
  return bucket;
}

/** A thread's object, in its tenant's jurisdiction and incarnation. */
export function threadStubIn(env: Env, home: TenantHome, threadId: string): ThreadRpc {
  // The Thread class implements ThreadRpc; its stub exposes each method as a promise of the same
  // plain-data result, which the RPC stub type spells differently.
  return namespaceIn(env, env.THREAD, home.jurisdiction).getByName(
    threadObjectName(home, threadId),
  ) as unknown as ThreadRpc;
}

/** A tenant's object, in its jurisdiction. */
export function tenantStubIn(env: Env, jurisdiction: Jurisdiction, tenant: string): TenantRpc {
  return namespaceIn(env, env.TENANT, jurisdiction).getByName(tenant) as unknown as TenantRpc;
}

/** The directory: global, off every path but the admin API's. */
export function directoryStub(env: Env): DirectoryRpc {
  return env.TENANT_DIRECTORY.getByName(DIRECTORY_OBJECT_NAME) as unknown as DirectoryRpc;
}
