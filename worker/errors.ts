import { HTTPException } from "hono/http-exception";
import {
  type FieldError,
  isProblemCode,
  type Problem,
  type ProblemCode,
  type ProblemStatus,
  problemStatus,
  problemTitle,
  problemType,
  type QuotaName,
  type RpcResult,
  type TenantLimitName,
} from "../shared/api/index.ts";
import { jsonPointer } from "../shared/protocol/index.ts";
import type * as z from "../shared/zod/index.ts";

export interface ApiErrorOptions {
  errors?: FieldError[];
  /**
   * Headers the error needs: `WWW-Authenticate` (401), `Allow` (405), `Accept-Post` (415),
   * `Retry-After` (429).
   */
  headers?: Record<string, string>;
  /** With `quota_exceeded`: the quota, named in the problem document. */
  quota?: QuotaName;
  /** With `limit_exceeded`: the limit and its value, named in the problem document. */
  limit?: { name: TenantLimitName; max: number };
  cause?: unknown;
}

/**
 * The one error type of `worker/`. Throw it anywhere in a request; `app.onError` renders it. The
 * status follows from the code, so the two can never disagree.
 */
export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly code: ProblemCode;
  readonly status: ProblemStatus;
  readonly errors: FieldError[] | undefined;
  readonly headers: Record<string, string>;
  readonly quota: QuotaName | undefined;
  readonly limit: { name: TenantLimitName; max: number } | undefined;

  constructor(code: ProblemCode, detail: string, options: ApiErrorOptions = {}) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = problemStatus(code);
    this.errors = options.errors;
    this.headers = options.headers ?? {};
    this.quota = options.quota;
    this.limit = options.limit;
  }

  /** The problem document; `detail` is the message, which must be safe to show the client. */
  toProblem(): Problem {
    const problem: Problem = {
      type: problemType(this.code),
      title: problemTitle(this.code),
      status: this.status,
      detail: this.message,
      code: this.code,
    };
    if (this.errors !== undefined) problem.errors = this.errors;
    if (this.quota !== undefined) problem.quota = this.quota;
    if (this.limit !== undefined) {
      problem.limit = this.limit.name;
      problem.max = this.limit.max;
    }
    return problem;
  }
}

/** Codes for the statuses Hono's own middleware and helpers throw as `HTTPException`. */
const CODE_BY_HTTP_STATUS: Partial<Record<number, ProblemCode>> = {
  400: "invalid_request",
  401: "unauthorized",
  404: "not_found",
  405: "method_not_allowed",
  413: "payload_too_large",
  415: "unsupported_media_type",
};

/**
 * Turns any thrown value into an `ApiError`, keeping the original as `cause` for logs. Only an
 * `ApiError` or a client-side `HTTPException` carries its message to the client; anything else
 * becomes `internal` with a fixed detail, so no internal message leaks.
 */
export function toApiError(thrown: unknown): ApiError {
  if (thrown instanceof ApiError) return thrown;
  if (thrown instanceof HTTPException) {
    const code = CODE_BY_HTTP_STATUS[thrown.status];
    if (code !== undefined) return new ApiError(code, thrown.message || code, { cause: thrown });
  }
  return new ApiError("internal", "The server failed to handle the request.", { cause: thrown });
}

/** Where a validated value came from; it decides how a field error's `path` is written. */
export type RequestPart = "body" | "query" | "param" | "header";

/**
 * Renders zod issues as field errors. For the body, `path` is an RFC 6901 JSON Pointer
 * (`/input/0/content`, `""` for the body itself); query, path and header parameters are flat, so
 * their `path` is the parameter name (`limit`, `id`, `last-event-id`). A union failure reports the one branch that got
 * past its type check, so the path reaches the field that is actually wrong; each unknown key
 * gets its own entry.
 */
export function issuesToFieldErrors(
  issues: readonly z.core.$ZodIssue[],
  part: RequestPart,
): FieldError[] {
  return flattenIssues(issues, []).map(({ path, message }) => ({
    path: part === "body" ? jsonPointer(path) : parameterPath(path, part),
    message,
  }));
}

function flattenIssues(
  issues: readonly z.core.$ZodIssue[],
  base: readonly PropertyKey[],
): { path: PropertyKey[]; message: string }[] {
  const out: { path: PropertyKey[]; message: string }[] = [];
  for (const issue of issues) {
    const path = [...base, ...issue.path];
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) out.push({ path: [...path, key], message: "Unknown field" });
      continue;
    }
    // A record's key that fails its schema: that schema's message, at the key's path.
    if (issue.code === "invalid_key" && issue.issues.length > 0) {
      out.push(...flattenIssues(issue.issues, path).map((e) => ({ ...e, path })));
      continue;
    }
    if (issue.code === "invalid_union" && issue.errors.length > 0) {
      const deep = issue.errors.filter((branch) => !branch.every(isTopLevelTypeMismatch));
      const [only] = deep;
      if (deep.length === 1 && only !== undefined) {
        out.push(...flattenIssues(only, path));
        continue;
      }
      if (deep.length === 0) {
        const expected = issue.errors.flatMap((branch) =>
          branch.flatMap((i) => (i.code === "invalid_type" ? [i.expected] : [])),
        );
        out.push({
          path,
          message: `Invalid input: expected ${[...new Set(expected)].join(" or ")}`,
        });
        continue;
      }
    }
    out.push({ path, message: issue.message });
  }
  return out;
}

function isTopLevelTypeMismatch(issue: z.core.$ZodIssue): boolean {
  return issue.code === "invalid_type" && issue.path.length === 0;
}

/**
 * A parameter's path: its name, and for a query parameter folded from `name[key]=value` (see
 * `queryOf`) the name as sent, `metadata[team]`.
 */
function parameterPath(path: readonly PropertyKey[], part: RequestPart): string {
  const [name, ...rest] = path.map(String);
  if (part === "query" && rest.length > 0) return `${name}[${rest.join("][")}]`;
  return [name, ...rest].join(".");
}

/** The value of a successful DO call, or its failure thrown as the matching `ApiError`. */
export function unwrap<T>(result: RpcResult<T>): T {
  if (result.ok) return result.value;
  const { code, detail, errors, quota, limit, retryAfterSeconds } = result.error;
  // Guards against a DO from another deploy that speaks a code this worker does not know.
  if (!isProblemCode(code)) {
    throw new ApiError("internal", "The thread returned an unknown error.", {
      cause: result.error,
    });
  }
  throw new ApiError(code, detail, {
    ...(errors === undefined ? {} : { errors }),
    ...(quota === undefined ? {} : { quota }),
    ...(limit === undefined ? {} : { limit }),
    ...(retryAfterSeconds === undefined
      ? {}
      : { headers: { "Retry-After": String(retryAfterSeconds) } }),
  });
}
