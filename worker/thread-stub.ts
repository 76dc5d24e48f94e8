import type { Env } from "../env.ts";
import type { ThreadRpc } from "../shared/api/index.ts";

/** How the app reaches a thread's DO; `createApp({ threadStub })` swaps it in tests. */
export type ThreadStubFactory = (env: Env, tenant: string, threadId: string) => ThreadRpc;

/**
 * The DO name of a thread: `{tenant}:{thread}`. Neither id may contain `:`, so two different
 * (tenant, thread) pairs never share an object (design §10 invariant 9).
 */
export function threadObjectName(tenant: string, threadId: string): string {
  return `${tenant}:${threadId}`;
}

/** Invariant 9: the only way the worker addresses a thread, always under the caller's tenant. */
export const getThreadStub: ThreadStubFactory = (env, tenant, threadId) =>
  // The Thread class implements ThreadRpc; its stub exposes each method as a promise of the same
  // plain-data result, which the RPC stub type spells differently.
  env.THREAD.getByName(threadObjectName(tenant, threadId)) as unknown as ThreadRpc;
