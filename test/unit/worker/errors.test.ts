import { HTTPException } from "hono/http-exception";
import { describe, expect, it } from "vitest";
import { PROBLEM_CODES, problemStatus } from "../../../shared/api/index.ts";
import * as z from "../../../shared/zod/index.ts";
import { ApiError, issuesToFieldErrors, toApiError } from "../../../worker/errors.ts";

describe("problem codes", () => {
  it("each code has the status design §7, §11, §12 and §16 give it", () => {
    expect(Object.fromEntries(PROBLEM_CODES.map((code) => [code, problemStatus(code)]))).toEqual({
      invalid_request: 400,
      unauthorized: 401,
      invalid_signature: 401,
      forbidden: 403,
      not_found: 404,
      thread_exists: 409,
      tenant_exists: 409,
      hook_exists: 409,
      mcp_server_exists: 409,
      thread_busy: 409,
      turn_not_found: 404,
      turn_mismatch: 409,
      turn_not_steerable: 409,
      no_pending_calls: 409,
      unknown_call_id: 400,
      payload_too_large: 413,
      unsupported_media_type: 415,
      event_expired: 410,
      provider_error: 502,
      context_window_exceeded: 400,
      unknown_model: 400,
      rollout_incomplete: 409,
      parent_rollout_required: 400,
      idempotency_key_reused: 422,
      idempotency_key_in_use: 409,
      quota_exceeded: 429,
      limit_exceeded: 409,
      method_not_allowed: 405,
      unsupported_parameter: 400,
      internal: 500,
    });
  });
});

describe("ApiError", () => {
  it("renders an RFC 9457 problem whose status follows from its code", () => {
    const error = new ApiError("thread_busy", "Turn turn_3 is running.");
    expect(error.status).toBe(409);
    expect(error.toProblem()).toEqual({
      type: "/problems/thread_busy",
      title: "The thread is running a turn",
      status: 409,
      detail: "Turn turn_3 is running.",
      code: "thread_busy",
    });
  });

  it("names a per-tenant limit and its value in the problem", () => {
    const error = new ApiError("limit_exceeded", "Too many hooks.", {
      limit: { name: "hooks_per_tenant", max: 100 },
    });
    expect(error.toProblem()).toMatchObject({
      status: 409,
      code: "limit_exceeded",
      limit: "hooks_per_tenant",
      max: 100,
    });
  });

  it("carries field errors into the problem", () => {
    const errors = [{ path: "/input", message: "Required" }];
    expect(new ApiError("invalid_request", "Bad.", { errors }).toProblem().errors).toEqual(errors);
  });
});

describe("toApiError", () => {
  it("passes an ApiError through unchanged", () => {
    const error = new ApiError("not_found", "gone");
    expect(toApiError(error)).toBe(error);
  });

  it("hides an unexpected error's message behind internal and keeps it as the cause", () => {
    const thrown = new TypeError("cannot read secret_field of undefined");
    const error = toApiError(thrown);
    expect([error.code, error.status, error.message]).toEqual([
      "internal",
      500,
      "The server failed to handle the request.",
    ]);
    expect(error.cause).toBe(thrown);
  });

  it("normalizes a thrown non-Error value too", () => {
    const error = toApiError("just a string");
    expect([error.code, error.cause]).toEqual(["internal", "just a string"]);
  });

  it("maps Hono's client-error exceptions to their codes and keeps the cause", () => {
    const thrown = new HTTPException(413, { message: "too big" });
    const error = toApiError(thrown);
    expect([error.code, error.message, error.cause]).toEqual([
      "payload_too_large",
      "too big",
      thrown,
    ]);
    expect(toApiError(new HTTPException(400, { message: "Malformed JSON" })).code).toBe(
      "invalid_request",
    );
  });

  it("treats a server-side HTTPException as internal", () => {
    const error = toApiError(new HTTPException(503, { message: "upstream detail" }));
    expect([error.code, error.message]).toEqual([
      "internal",
      "The server failed to handle the request.",
    ]);
  });
});

describe("issuesToFieldErrors", () => {
  const schema = z.strictObject({
    a: z.object({ "x/y": z.number() }),
    list: z.array(z.string()),
  });

  it("writes body paths as JSON Pointers, escaping ~ and /", () => {
    const { error } = schema.safeParse({ a: { "x/y": "1" }, list: ["ok", 2], "t~": 0 });
    expect(issuesToFieldErrors(error?.issues ?? [], "body")).toEqual([
      { path: "/a/x~1y", message: "Invalid input: expected number, received string" },
      { path: "/list/1", message: "Invalid input: expected string, received number" },
      { path: "/t~0", message: "Unknown field" },
    ]);
  });

  it("writes query and path parameter paths as bare names", () => {
    const { error } = z.object({ limit: z.number() }).safeParse({});
    expect(issuesToFieldErrors(error?.issues ?? [], "query")).toEqual([
      { path: "limit", message: "Invalid input: expected number, received undefined" },
    ]);
  });

  it("keeps a union's own message when several branches got past their type check", () => {
    const union = z.union([z.object({ a: z.string() }), z.object({ b: z.string() })]);
    const { error } = union.safeParse({});
    expect(issuesToFieldErrors(error?.issues ?? [], "body")).toEqual([
      { path: "", message: "Invalid input" },
    ]);
  });
});
