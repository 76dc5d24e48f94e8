import type {
  FieldError,
  ProblemCode,
  QuotaName,
  RpcResult,
  TenantLimitName,
} from "../../shared/api/index.ts";
import { SessionError } from "../../shared/session/index.ts";

/**
 * The one boundary between the core's typed errors and the RPC contract's results: every RPC
 * method of the Thread answers through `guarded`, so a `SessionError` thrown anywhere below
 * becomes its failure, and anything else propagates (the worker answers `internal`).
 */

export const ok = <T>(value: T): RpcResult<T> => ({ ok: true, value });

export function fail(code: ProblemCode, detail: string, errors?: FieldError[]): RpcResult<never> {
  return { ok: false, error: errors ? { code, detail, errors } : { code, detail } };
}

export const THREAD_NOT_FOUND = fail("not_found", "No such thread.");

/** `quota_exceeded` naming the quota; `retryAfterSeconds` for a time-based one (design §11). */
export function failQuota(
  quota: QuotaName,
  detail: string,
  retryAfterSeconds?: number,
): RpcResult<never> {
  return {
    ok: false,
    error: {
      code: "quota_exceeded",
      detail,
      quota,
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    },
  };
}

/** `limit_exceeded` naming the per-tenant limit and its value. */
export function failLimit(name: TenantLimitName, max: number, detail: string): RpcResult<never> {
  return { ok: false, error: { code: "limit_exceeded", detail, limit: { name, max } } };
}

/**
 * The failure a core error stands for; undefined for anything unexpected. `fieldBase` is the
 * JSON Pointer of the value the operation was given (a turn's `/overrides`), prefixed to the
 * error's own field paths.
 */
export function failureOf(err: unknown, fieldBase = ""): RpcResult<never> | undefined {
  if (!(err instanceof SessionError)) return undefined;
  const fields = err.fieldErrors()?.map((e) => ({ ...e, path: `${fieldBase}${e.path}` }));
  return fail(err.code, err.message, fields);
}

/** Runs `work`; a core error becomes its failure, anything else is rethrown. */
export async function guarded<T>(
  work: () => Promise<RpcResult<T>> | RpcResult<T>,
  fieldBase = "",
): Promise<RpcResult<T>> {
  try {
    return await work();
  } catch (err) {
    const failure = failureOf(err, fieldBase);
    if (failure) return failure;
    throw err;
  }
}
