import type { FieldError, ProblemCode } from "../api/index.ts";

/**
 * Errors of the thread operations. Each carries its problem code from the one vocabulary
 * (`shared/api/problems.ts`), so the caller maps it to an HTTP problem without matching on
 * messages. All of them are thrown before anything is recorded: a rejected request leaves history
 * and rollout untouched.
 */
export abstract class SessionError extends Error {
  abstract readonly code: ProblemCode;
  /** The fields at fault, with paths relative to the value the operation was given. */
  fieldErrors(): FieldError[] | undefined {
    return undefined;
  }
}

/** A configuration names a model the catalog does not know (400 `unknown_model`). */
export class UnknownModelError extends SessionError {
  readonly code = "unknown_model";
  constructor(readonly model: string) {
    super(`Unknown model "${model}".`);
    this.name = "UnknownModelError";
  }
}

/**
 * The tenant's quotas refused the model request a turn's next round would make, after its server
 * tool calls ran (`quota_exceeded`): the turn fails, its calls' outputs kept.
 */
export class RoundNotAdmittedError extends SessionError {
  readonly code = "quota_exceeded";
  constructor() {
    super("The tenant's tokens_per_day quota does not admit the turn's next model request.");
    this.name = "RoundNotAdmittedError";
  }
}

/** A configuration value the engine cannot use (400 `invalid_request`). */
export class InvalidConfigurationError extends SessionError {
  readonly code = "invalid_request";
  constructor(
    /**
     * The field within the configuration, as a JSON Pointer without its leading `/`; `""` for
     * the configuration as a whole.
     */
    readonly path: string,
    message: string,
  ) {
    super(message);
    this.name = "InvalidConfigurationError";
  }

  override fieldErrors(): FieldError[] {
    return [{ path: this.path === "" ? "" : `/${this.path}`, message: this.message }];
  }
}

/** Another task (turn or compaction) is running on this session (409 `thread_busy`). */
export class SessionBusyError extends SessionError {
  readonly code = "thread_busy";
  constructor(readonly runningTurnId: string) {
    super(`turn ${runningTurnId} is running`);
    this.name = "SessionBusyError";
  }
}

/** Input the engine refuses: empty lists, wrong roles or part types, bad counts (400). */
export class InvalidInputError extends SessionError {
  readonly code = "invalid_request";
  constructor(message: string) {
    super(message);
    this.name = "InvalidInputError";
  }
}

/**
 * `resumeTurn` was given no pending calls, or the calls are no longer pending in history: they
 * were answered, belong to another turn, or a later turn, a rollback or a compaction superseded
 * them (409 `no_pending_calls`). `callIds` lists the stale calls (empty when none were given).
 */
export class NoPendingCallsError extends SessionError {
  readonly code = "no_pending_calls";
  constructor(
    readonly turnId: string,
    readonly callIds: readonly string[] = [],
  ) {
    super(
      callIds.length === 0
        ? `turn ${turnId} has no pending calls`
        : `calls of turn ${turnId} are no longer pending: ${callIds.join(", ")}`,
    );
    this.name = "NoPendingCallsError";
  }
}

/** An output names a call id that is not among the turn's pending calls (400 `unknown_call_id`). */
export class UnknownCallIdError extends SessionError {
  readonly code = "unknown_call_id";
  constructor(readonly callId: string) {
    super(`no pending call with call_id ${callId}`);
    this.name = "UnknownCallIdError";
  }
}

/** Two outputs answer the same call (400 `invalid_request`). */
export class DuplicateCallOutputError extends SessionError {
  readonly code = "invalid_request";
  constructor(readonly callId: string) {
    super(`more than one output for call_id ${callId}`);
    this.name = "DuplicateCallOutputError";
  }
}

/**
 * Outputs must answer every pending call in one request; these calls got none (400
 * `invalid_request`, the missing ids listed).
 */
export class MissingCallOutputsError extends SessionError {
  readonly code = "invalid_request";
  constructor(readonly callIds: readonly string[]) {
    super(`missing outputs for pending calls: ${callIds.join(", ")}`);
    this.name = "MissingCallOutputsError";
  }
}

/**
 * `steer` while no turn is running, or while the running task is a compaction (409
 * `turn_not_steerable`).
 */
export class TurnNotSteerableError extends SessionError {
  readonly code = "turn_not_steerable";
  constructor(readonly runningTurnId: string | undefined) {
    super(
      runningTurnId === undefined
        ? "no turn is running"
        : `task ${runningTurnId} is a compaction and takes no input`,
    );
    this.name = "TurnNotSteerableError";
  }
}

/** The model gave no summary text for a compaction; history is left as it was (502). */
export class CompactionFailedError extends SessionError {
  readonly code = "provider_error";
  constructor(readonly turnId: string) {
    super(`compaction ${turnId}: the model returned no summary`);
    this.name = "CompactionFailedError";
  }
}

/**
 * The turn's input cannot fit the model's context window even after a compaction: the base
 * instructions, the full initial context and the input alone exceed it (400
 * `context_window_exceeded`). Nothing is recorded.
 */
export class ContextWindowExceededError extends SessionError {
  readonly code = "context_window_exceeded";
  constructor(
    readonly neededTokens: number,
    readonly windowTokens: number,
  ) {
    super(
      `The input needs about ${neededTokens} tokens with the instructions and context; the model's window is ${windowTokens}.`,
    );
    this.name = "ContextWindowExceededError";
  }
}
