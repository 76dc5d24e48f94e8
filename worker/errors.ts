import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";

/**
 * The stable machine-readable error codes of the HTTP API (design §7). They travel as the `code`
 * extension member of an RFC 9457 problem document, and the Thread DO returns them in failed
 * `RpcResult`s. Renaming one is a breaking API change.
 */
export const PROBLEM_CODES = [
  "invalid_request",
  "unauthorized",
  "not_found",
  "thread_exists",
  "thread_busy",
  "turn_not_found",
  "turn_mismatch",
  "turn_not_steerable",
  "no_pending_calls",
  "unknown_call_id",
  "payload_too_large",
  "unsupported_media_type",
  "event_expired",
  "provider_error",
  "context_window_exceeded",
  "unknown_model",
  "rollout_incomplete",
  "idempotency_key_reused",
  "idempotency_key_in_use",
  "method_not_allowed",
  "internal",
] as const;

export type ProblemCode = (typeof PROBLEM_CODES)[number];

/** One failing field of a request: `path` as described at `issuesToFieldErrors`. */
export interface FieldError {
  path: string;
  message: string;
}

/** The RFC 9457 problem document this API answers with (media type `application/problem+json`). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ProblemCode;
  errors?: FieldError[];
}

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/**
 * Status and title of each code. A `Record` keyed by the union, so a new code without a status
 * fails to compile. RFC 9457 §3.1.3: the title stays the same for every occurrence of a type;
 * what varies goes into `detail`.
 */
const PROBLEM_TYPES: Record<ProblemCode, { status: ContentfulStatusCode; title: string }> = {
  invalid_request: { status: 400, title: "The request is invalid" },
  unauthorized: { status: 401, title: "Authentication is required" },
  not_found: { status: 404, title: "The resource does not exist" },
  thread_exists: { status: 409, title: "A thread with this id already exists" },
  thread_busy: { status: 409, title: "The thread is running a turn" },
  turn_not_found: { status: 404, title: "The turn does not exist" },
  turn_mismatch: { status: 409, title: "The turn is not the thread's current turn" },
  turn_not_steerable: { status: 409, title: "The turn cannot take more input" },
  no_pending_calls: { status: 409, title: "The turn is not waiting for tool outputs" },
  unknown_call_id: { status: 400, title: "No pending call has this call_id" },
  payload_too_large: { status: 413, title: "The request body is too large" },
  unsupported_media_type: { status: 415, title: "The request body's media type is not accepted" },
  event_expired: { status: 410, title: "The requested events are no longer retained" },
  provider_error: { status: 502, title: "The model provider failed" },
  context_window_exceeded: { status: 400, title: "The input does not fit the context window" },
  unknown_model: { status: 400, title: "The model is not in the catalog" },
  rollout_incomplete: { status: 409, title: "Part of the rollout cannot be read" },
  idempotency_key_reused: {
    status: 422,
    title: "The idempotency key was used with another request",
  },
  idempotency_key_in_use: {
    status: 409,
    title: "A request with this idempotency key is still being admitted",
  },
  method_not_allowed: { status: 405, title: "The method is not allowed on this resource" },
  internal: { status: 500, title: "Internal error" },
};

const PROBLEM_CODE_SET: ReadonlySet<string> = new Set(PROBLEM_CODES);

export function isProblemCode(value: unknown): value is ProblemCode {
  return typeof value === "string" && PROBLEM_CODE_SET.has(value);
}

export function problemStatus(code: ProblemCode): ContentfulStatusCode {
  return PROBLEM_TYPES[code].status;
}

/**
 * The problem `type` URI. RFC 9457 §3.1.1 allows a relative reference; `/problems/{code}` is
 * reserved for human-readable documentation of each code.
 */
export function problemType(code: ProblemCode): string {
  return `/problems/${code}`;
}

export interface ApiErrorOptions {
  errors?: FieldError[];
  /** Headers the error needs: `WWW-Authenticate` (401), `Allow` (405), `Accept-Post` (415). */
  headers?: Record<string, string>;
  cause?: unknown;
}

/**
 * The one error type of `worker/`. Throw it anywhere in a request; `app.onError` renders it. The
 * status follows from the code, so the two can never disagree.
 */
export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly code: ProblemCode;
  readonly status: ContentfulStatusCode;
  readonly errors: FieldError[] | undefined;
  readonly headers: Record<string, string>;

  constructor(code: ProblemCode, detail: string, options: ApiErrorOptions = {}) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = problemStatus(code);
    this.errors = options.errors;
    this.headers = options.headers ?? {};
  }

  /** The problem document; `detail` is the message, which must be safe to show the client. */
  toProblem(): Problem {
    const problem: Problem = {
      type: problemType(this.code),
      title: PROBLEM_TYPES[this.code].title,
      status: this.status,
      detail: this.message,
      code: this.code,
    };
    if (this.errors !== undefined) problem.errors = this.errors;
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
    path: part === "body" ? toJsonPointer(path) : path.map(String).join("."),
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

/** RFC 6901: `~` is written `~0` and `/` is written `~1`. */
function toJsonPointer(path: readonly PropertyKey[]): string {
  return path.map((key) => `/${String(key).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}
