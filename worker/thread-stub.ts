import { threadStubIn } from "../durable-objects/placement.ts";
import type { Env } from "../env.ts";
import type { Jurisdiction, ThreadRpc } from "../shared/api/index.ts";

/** How the app reaches a thread's DO; `createApp({ threadStub })` swaps it in tests. */
export type ThreadStubFactory = (
  env: Env,
  tenant: string,
  threadId: string,
  jurisdiction: Jurisdiction,
) => ThreadRpc;

/**
 * Invariant 9: the only way the worker addresses a thread, always under the caller's tenant
 * (`{tenant}:{thread}`), in the tenant's jurisdiction.
 */
export const getThreadStub: ThreadStubFactory = (env, tenant, threadId, jurisdiction) =>
  threadStubIn(env, jurisdiction, tenant, threadId);
