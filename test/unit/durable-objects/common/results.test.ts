import { describe, expect, it } from "vitest";
import { fail, failureOf, guarded, ok } from "../../../../durable-objects/common/results.ts";
import {
  CompactionFailedError,
  DuplicateCallOutputError,
  InvalidConfigurationError,
  InvalidInputError,
  MissingCallOutputsError,
  NoPendingCallsError,
  SessionBusyError,
  type SessionError,
  TurnNotSteerableError,
  UnknownCallIdError,
  UnknownModelError,
} from "../../../../shared/session/index.ts";

describe("failureOf: a core error becomes the failure of its problem code", () => {
  const cases: [string, SessionError, { ok: false; error: { code: string; detail: string } }][] = [
    [
      "an unknown model is unknown_model",
      new UnknownModelError("gpt-nope"),
      { ok: false, error: { code: "unknown_model", detail: 'Unknown model "gpt-nope".' } },
    ],
    [
      "a busy session is thread_busy",
      new SessionBusyError("turn_1"),
      { ok: false, error: { code: "thread_busy", detail: "turn turn_1 is running" } },
    ],
    [
      "refused input is invalid_request, without field errors",
      new InvalidInputError("input must not be empty"),
      { ok: false, error: { code: "invalid_request", detail: "input must not be empty" } },
    ],
    [
      "a resume with no pending calls is no_pending_calls",
      new NoPendingCallsError("turn_2"),
      {
        ok: false,
        error: { code: "no_pending_calls", detail: "turn turn_2 has no pending calls" },
      },
    ],
    [
      "a resume naming stale calls is no_pending_calls listing them",
      new NoPendingCallsError("turn_2", ["call_a", "call_b"]),
      {
        ok: false,
        error: {
          code: "no_pending_calls",
          detail: "calls of turn turn_2 are no longer pending: call_a, call_b",
        },
      },
    ],
    [
      "an output for an unknown call is unknown_call_id",
      new UnknownCallIdError("call_x"),
      {
        ok: false,
        error: { code: "unknown_call_id", detail: "no pending call with call_id call_x" },
      },
    ],
    [
      "two outputs for one call are invalid_request",
      new DuplicateCallOutputError("call_y"),
      {
        ok: false,
        error: { code: "invalid_request", detail: "more than one output for call_id call_y" },
      },
    ],
    [
      "unanswered pending calls are invalid_request",
      new MissingCallOutputsError(["call_1", "call_2"]),
      {
        ok: false,
        error: {
          code: "invalid_request",
          detail: "missing outputs for pending calls: call_1, call_2",
        },
      },
    ],
    [
      "steering with nothing running is turn_not_steerable",
      new TurnNotSteerableError(undefined),
      { ok: false, error: { code: "turn_not_steerable", detail: "no turn is running" } },
    ],
    [
      "steering a compaction is turn_not_steerable",
      new TurnNotSteerableError("turn_c"),
      {
        ok: false,
        error: {
          code: "turn_not_steerable",
          detail: "task turn_c is a compaction and takes no input",
        },
      },
    ],
    [
      "a compaction without a summary is provider_error",
      new CompactionFailedError("turn_c"),
      {
        ok: false,
        error: {
          code: "provider_error",
          detail: "compaction turn_c: the model returned no summary",
        },
      },
    ],
  ];

  for (const [rule, error, expected] of cases) {
    it(rule, () => {
      // toStrictEqual: no `errors` key at all, since these errors name no field.
      expect(failureOf(error)).toStrictEqual(expected);
      // A base only moves field paths: these errors have none.
      expect(failureOf(error, "/overrides")).toStrictEqual(expected);
    });
  }

  it("an invalid configuration is invalid_request with its field, under no base by default", () => {
    const error = new InvalidConfigurationError("timezone", "unknown IANA timezone: Mars/Base");
    expect(failureOf(error)).toEqual({
      ok: false,
      error: {
        code: "invalid_request",
        detail: "unknown IANA timezone: Mars/Base",
        errors: [{ path: "/timezone", message: "unknown IANA timezone: Mars/Base" }],
      },
    });
  });

  it("prefixes the error's field paths with the base of the value the operation was given", () => {
    const error = new InvalidConfigurationError("timezone", "unknown IANA timezone: Mars/Base");
    expect(failureOf(error, "/overrides")).toEqual({
      ok: false,
      error: {
        code: "invalid_request",
        detail: "unknown IANA timezone: Mars/Base",
        errors: [{ path: "/overrides/timezone", message: "unknown IANA timezone: Mars/Base" }],
      },
    });
  });

  it("is undefined for anything that is not a core error", () => {
    expect(failureOf(new Error("boom"))).toBeUndefined();
    expect(failureOf(new TypeError("x is undefined"), "/overrides")).toBeUndefined();
    expect(failureOf("a string")).toBeUndefined();
    expect(failureOf(undefined)).toBeUndefined();
  });
});

describe("guarded: the one boundary between core errors and RPC results", () => {
  it("answers with the work's own result, failed or not", async () => {
    expect(await guarded(() => ok(42))).toEqual({ ok: true, value: 42 });
    expect(await guarded(async () => ok("later"))).toEqual({ ok: true, value: "later" });
    expect(await guarded(() => fail("turn_not_found", "No turn."))).toEqual({
      ok: false,
      error: { code: "turn_not_found", detail: "No turn." },
    });
  });

  it("answers a core error thrown by the work with its failure, field paths under the base", async () => {
    const result = await guarded(async () => {
      throw new InvalidConfigurationError("timezone", "unknown IANA timezone: Nowhere");
    }, "/overrides");
    expect(result).toEqual({
      ok: false,
      error: {
        code: "invalid_request",
        detail: "unknown IANA timezone: Nowhere",
        errors: [{ path: "/overrides/timezone", message: "unknown IANA timezone: Nowhere" }],
      },
    });
    expect(
      await guarded(() => {
        throw new SessionBusyError("turn_9");
      }),
    ).toEqual({ ok: false, error: { code: "thread_busy", detail: "turn turn_9 is running" } });
  });

  it("rethrows anything else, thrown synchronously or rejected", async () => {
    const boom = new Error("storage is gone");
    await expect(
      guarded(() => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    await expect(guarded(() => Promise.reject(boom), "/overrides")).rejects.toBe(boom);
  });
});
