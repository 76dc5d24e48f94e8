import * as z from "../zod/index.ts";
import { TENANT_LIMIT_NAMES, type TenantLimitName } from "./limits.ts";
import type { Same } from "./same.ts";

/**
 * The one vocabulary of errors (design §7): the stable machine-readable codes that the core's
 * errors carry, the Thread DO returns in failed `RpcResult`s, and the worker answers as the `code`
 * extension member of an RFC 9457 problem document. Renaming one is a breaking API change; adding
 * one needs its status and title below (the compiler checks) and a case in
 * `test/workers/edge/problem-codes.test.ts` (the test checks).
 */
export const PROBLEM_CODES = [
  "invalid_request",
  "unauthorized",
  "invalid_signature",
  "forbidden",
  "not_found",
  "thread_exists",
  "tenant_exists",
  "hook_exists",
  "mcp_server_exists",
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
  "parent_rollout_required",
  "idempotency_key_reused",
  "idempotency_key_in_use",
  "quota_exceeded",
  "limit_exceeded",
  "method_not_allowed",
  "unsupported_parameter",
  "internal",
] as const;

export type ProblemCode = (typeof PROBLEM_CODES)[number];

/** The HTTP statuses problem codes map to. */
export type ProblemStatus =
  | 400
  | 401
  | 403
  | 404
  | 405
  | 409
  | 410
  | 413
  | 415
  | 422
  | 429
  | 500
  | 502;

/**
 * Status and title of each code. A `Record` keyed by the union, so a new code without a status
 * fails to compile. RFC 9457 §3.1.3: the title stays the same for every occurrence of a type;
 * what varies goes into `detail`.
 */
const PROBLEM_TYPES: Record<ProblemCode, { status: ProblemStatus; title: string }> = {
  invalid_request: { status: 400, title: "The request is invalid" },
  unauthorized: { status: 401, title: "Authentication is required" },
  invalid_signature: { status: 401, title: "The webhook signature is missing, wrong or stale" },
  forbidden: { status: 403, title: "The API key may not do this" },
  not_found: { status: 404, title: "The resource does not exist" },
  thread_exists: { status: 409, title: "A thread with this id already exists" },
  tenant_exists: { status: 409, title: "A tenant with this id already exists" },
  hook_exists: { status: 409, title: "A hook with this id already exists" },
  mcp_server_exists: { status: 409, title: "An MCP server with this label already exists" },
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
  parent_rollout_required: { status: 400, title: "The rollout's history starts in its parent" },
  idempotency_key_reused: {
    status: 422,
    title: "The idempotency key was used with another request",
  },
  idempotency_key_in_use: {
    status: 409,
    title: "A request with this idempotency key is still being admitted",
  },
  quota_exceeded: { status: 429, title: "A quota of the tenant is used up" },
  // 409, not 429: waiting changes nothing; the tenant deletes one to make room (RFC 9110 §15.5.10).
  limit_exceeded: { status: 409, title: "The tenant holds as many of these as it may" },
  method_not_allowed: { status: 405, title: "The method is not allowed on this resource" },
  unsupported_parameter: { status: 400, title: "The parameter is not supported here" },
  internal: { status: 500, title: "Internal error" },
};

const PROBLEM_CODE_SET: ReadonlySet<string> = new Set(PROBLEM_CODES);

export function isProblemCode(value: unknown): value is ProblemCode {
  return typeof value === "string" && PROBLEM_CODE_SET.has(value);
}

export function problemStatus(code: ProblemCode): ProblemStatus {
  return PROBLEM_TYPES[code].status;
}

export function problemTitle(code: ProblemCode): string {
  return PROBLEM_TYPES[code].title;
}

/**
 * The problem `type` URI. RFC 9457 §3.1.1 allows a relative reference; `/problems/{code}` is
 * reserved for human-readable documentation of each code.
 */
export function problemType(code: ProblemCode): string {
  return `/problems/${code}`;
}

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/**
 * One failing field of a request. For a body, `path` is an RFC 6901 JSON Pointer (`/input/0`,
 * `""` for the body itself; `/line/N` for an imported rollout's line N); for a query, path or
 * header parameter, the parameter's name.
 */
export const FieldErrorSchema = z.onFirstUse(() =>
  z.object({
    path: z.string().check(z.describe("RFC 6901 JSON Pointer into the body, or a parameter name")),
    message: z.string(),
  }),
);
export type FieldError = z.output<typeof FieldErrorSchema>;

/** The tenant quotas (design §11); `quota_exceeded` names the one that refused a request. */
export const QUOTA_NAMES = [
  "max_threads",
  "max_running_turns",
  "tokens_per_day",
  "max_thread_bytes",
] as const;
export type QuotaName = (typeof QUOTA_NAMES)[number];

/** RFC 9457 problem document with the `code` extension member. */
export const ProblemSchema = z.onFirstUse(() =>
  z.object({
    type: z.string(),
    title: z.string(),
    status: z.number().check(z.int()),
    detail: z.string(),
    code: z.enum(PROBLEM_CODES),
    errors: z.optional(z.array(FieldErrorSchema)),
    quota: z
      .optional(z.enum(QUOTA_NAMES))
      .check(z.describe("With `quota_exceeded`: the quota that refused the request.")),
    limit: z
      .optional(z.enum(TENANT_LIMIT_NAMES))
      .check(z.describe("With `limit_exceeded`: the per-tenant limit that refused the create.")),
    max: z
      .optional(z.number().check(z.int()))
      .check(z.describe("With `limit_exceeded`: the limit's value.")),
  }),
);

/** The problem document this API answers with (media type `application/problem+json`). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ProblemCode;
  errors?: FieldError[];
  quota?: QuotaName;
  limit?: TenantLimitName;
  max?: number;
}

const documentedShapes: [Same<z.output<typeof ProblemSchema>, Problem>] = [true];
void documentedShapes;
