/**
 * The RPC contract between the edge worker and the `Thread` Durable Object. Types only: the DO
 * (`durable-objects/thread.ts`) implements `ThreadRpc`, the worker calls it through a stub, and
 * nothing here reaches the DO bundle at run time.
 *
 * Every method answers with an `RpcResult` instead of throwing: an exception thrown across RPC
 * leaves the caller's stub broken (a new stub is needed) and loses the error's code. A rejected
 * call therefore means the platform failed (reset, overload), and the worker answers `internal`.
 *
 * The worker authenticates, validates and scopes before any call: a stub is addressed by
 * `{tenant}:{thread}` (design §10 invariant 9), and every argument has passed the zod schemas in
 * `schemas.ts` (defaults applied).
 */

import type { Prompt, ResponseItem, ThreadConfig } from "../shared/protocol/index.ts";
import type { ProblemCode } from "./errors.ts";
import type {
  InputMessage,
  ListResource,
  OnBusy,
  ThreadResource,
  TurnResource,
} from "./schemas.ts";

export interface RpcFailure {
  code: ProblemCode;
  /** Shown to the client as the problem's `detail`: never an internal message or a secret. */
  detail: string;
  /** Field errors, for `invalid_request`-like codes; `path` as in `worker/errors.ts`. */
  errors?: { path: string; message: string }[];
}

export type RpcResult<T> = { ok: true; value: T } | { ok: false; error: RpcFailure };

export interface CreateThreadRequest {
  tenant: string;
  threadId: string;
  /** Validated `ThreadConfig` (defaults applied); what it leaves out takes the catalog default. */
  config: ThreadConfig;
}

export interface StartTurnRequest {
  /** The user input, always as messages: a string body arrives as one `input_text` message. */
  input: InputMessage[];
  /** Absent when the request had none; what it sets becomes the thread's new default. */
  overrides?: ThreadConfig;
  onBusy: OnBusy;
}

export interface ListHistoryRequest {
  /** 1-1000. */
  limit: number;
  /** Opaque; only ever a `next_cursor` this DO produced (not verified by the worker). */
  cursor?: string;
}

/**
 * The Thread DO's public RPC methods. Expected failures and their codes:
 * `createThread` → `thread_exists`, `unknown_model`, `invalid_request`;
 * everything else on a thread that does not exist → `not_found`;
 * `startTurn` → `thread_busy` (with `onBusy: "reject"`), `unknown_model`, `invalid_request`,
 * `provider_error`, `context_window_exceeded`; `getTurn` → `turn_not_found`;
 * `listHistory` → `invalid_request` for a cursor it cannot read.
 */
export interface ThreadRpc {
  createThread(req: CreateThreadRequest): Promise<RpcResult<ThreadResource>>;
  getThread(): Promise<RpcResult<ThreadResource>>;
  /** Deletes DO state and the thread's R2 objects. */
  deleteThread(): Promise<RpcResult<null>>;
  /** Resolves when the turn ends or pauses (`requires_action`), or at once when queued. */
  startTurn(req: StartTurnRequest): Promise<RpcResult<TurnResource>>;
  getTurn(turnId: string): Promise<RpcResult<TurnResource>>;
  listHistory(req: ListHistoryRequest): Promise<RpcResult<ListResource<ResponseItem>>>;
  /** The exact next provider request (design §7 `GET …/prompt`). */
  getPrompt(): Promise<RpcResult<Prompt>>;
  /** Rebuilds the thread from its R2 rollout (design §6). */
  restore(): Promise<RpcResult<ThreadResource>>;
}
