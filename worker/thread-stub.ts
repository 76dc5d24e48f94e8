import { threadStubIn } from "../durable-objects/index.ts";
import type { Env } from "../env.ts";
import type { TenantHome, ThreadRpc } from "../shared/api/index.ts";

/** How the app reaches a thread's DO; `createApp({ threadStub })` swaps it in tests. */
export type ThreadStubFactory = (env: Env, home: TenantHome, threadId: string) => ThreadRpc;

/**
 * Invariant 9: the only way the worker addresses a thread, always under the caller's tenant
 * (`{tenant}:{thread}`), in the tenant's jurisdiction and incarnation (invariant 19).
 */
export const getThreadStub: ThreadStubFactory = (env, home, threadId) =>
  threadStubIn(env, home, threadId);

/**
 * The `borrower` of a fork's `forkSource`: the fork borrows its source's R2 segments, unless
 * the deployment has `SPINDLE_FORKS=copy`.
 */
export function borrowerOf(env: Env, forkId: string): { borrower?: string } {
  return env.SPINDLE_FORKS === "copy" ? {} : { borrower: forkId };
}
