/**
 * The RPC contract between the edge worker and the `Thread` Durable Object. Types only: the DO
 * (`durable-objects/thread/thread.ts`) implements `ThreadRpc`, the worker calls it through a stub, and
 * nothing here reaches the DO bundle at run time.
 *
 * Every method answers with an `RpcResult` instead of throwing: an exception thrown across RPC
 * leaves the caller's stub broken (a new stub is needed) and loses the error's code. A rejected
 * call therefore means the platform failed (reset, overload), and the worker answers `internal`.
 *
 * The worker authenticates, validates and scopes before any call: a stub is addressed by
 * `{tenant}:{thread}` (design §10 invariant 9), and every argument has passed the zod schemas in
 * `requests.ts` (defaults applied).
 *
 * Every `ReadableStream` in this contract, either way, carries `Uint8Array` chunks only. Workers
 * RPC documents byte streams (`type: "bytes"`) as transferable, so prefer those; a plain stream
 * of `Uint8Array` works as well. Ownership moves to the
 * receiver.
 */

import type {
  ContentItem,
  Prompt,
  ResponseItem,
  ThreadConfig,
  ThreadMetadata,
} from "../protocol/index.ts";
import type { TenantLimitName } from "./limits.ts";
import type { TurnRequestsResource } from "./model-requests.ts";
import type { FieldError, ProblemCode, QuotaName } from "./problems.ts";
import type { BusyPolicy, PendingCallAnswerInput } from "./requests.ts";
import type { ListResource, ThreadResource, TurnResource, TurnSummary } from "./resources.ts";
import type { PatchThreadBody } from "./tenancy.ts";
import type { TenantPolicy, YieldedQuota } from "./tenant-rpc.ts";
import type { AcceptDeliveryRequest, AcceptedDelivery } from "./webhook-rpc.ts";

export interface RpcFailure {
  code: ProblemCode;
  /** Shown to the client as the problem's `detail`: never an internal message or a secret. */
  detail: string;
  /** Field errors, for `invalid_request`-like codes. */
  errors?: FieldError[];
  /** With `quota_exceeded`: the quota, and for a time-based one when to try again. */
  quota?: QuotaName;
  retryAfterSeconds?: number;
  /** With `limit_exceeded`: the per-tenant limit, and its value where it was applied. */
  limit?: { name: TenantLimitName; max: number };
}

export type RpcResult<T> = { ok: true; value: T } | { ok: false; error: RpcFailure };

export interface CreateThreadRequest {
  tenant: string;
  threadId: string;
  /** Validated `ThreadConfig` (defaults applied); what it leaves out takes the catalog default. */
  config: ThreadConfig;
  metadata?: ThreadMetadata;
  /** A managed tenant's residency and quotas; absent for a tenant of the static keys. */
  policy?: TenantPolicy;
  idempotency?: IdempotencyKey;
}

/**
 * Requests that may start a task (or, for `inject`, record input) carry the tenant's quotas, so
 * the thread checks them before the provider is called (design §15 invariant 13). A tenant with
 * no quota set costs these requests no call to its object.
 */
export interface WithPolicy {
  policy?: TenantPolicy;
}

/**
 * A request's `Idempotency-Key` (IETF draft-ietf-httpapi-idempotency-key-header): a retry with
 * the same key and the same request answers with what the first one did instead of doing it
 * again; the same key with another request is `idempotency_key_reused`.
 */
export interface IdempotencyKey {
  key: string;
  /** Identifies the request (route, turn and body), computed by the worker. */
  fingerprint: string;
}

/**
 * The edge request a call comes from: the last argument of the methods that start work (turns,
 * creates, hook deliveries), so the object's log lines and the webhook events the work causes
 * name the request (`x-request-id`) and one turn can be followed through the logs. Absent for a
 * caller that is not an edge request (an object's own call, a test).
 */
export interface Trace {
  requestId: string;
}

export interface StartTurnRequest extends WithPolicy {
  /**
   * The content of the turn's user message (`turnContent`: a string body is one text part);
   * empty only with `replayed` (the turn then records no user message).
   */
  content: ContentItem[];
  /**
   * Items a client sends again before the input (the OpenAI surface's replayed transcript),
   * recorded after the context; a turn with them never queues or steers (`thread_busy`).
   */
  replayed?: ResponseItem[];
  /** Absent when the request had none; what it sets becomes the thread's new default. */
  overrides?: ThreadConfig;
  /** The turn's `additional_context`, absent when the request had none. */
  additionalContext?: Record<string, string>;
  onBusy: BusyPolicy;
  /** With `onBusy: "steer"` (always set then): the turn the input must join, else `turn_mismatch`. */
  expectedTurnId?: string;
  /**
   * The turn that must still be the thread's newest, else `turn_mismatch` (checked after a keyed
   * retry is answered): the OpenAI surface's continuation of `previous_response_id`.
   */
  afterTurn?: string;
  idempotency?: IdempotencyKey;
}

export interface ListHistoryRequest {
  /** 1-1000. */
  limit: number;
  /** Opaque; only ever a `next_cursor` this DO produced (not verified by the worker). */
  cursor?: string;
}

export interface ListTurnsRequest {
  /** 1-100. */
  limit: number;
  /** Opaque; only ever a `next_cursor` this DO produced (not verified by the worker). */
  cursor?: string;
}

/** `events`: where the replay starts. */
export interface EventsRequest {
  /**
   * Replay every retained event with `seq > after`, then tail. Absent: no replay, live events
   * only (from the moment of the call).
   */
  after?: number;
}

/** `submitOutputs` / `streamOutputs`. */
export interface SubmitOutputsRequest extends WithPolicy {
  /** 1-128 answers, each call or approval request answered once (checked by the worker). */
  items: PendingCallAnswerInput[];
  idempotency?: IdempotencyKey;
}

/** `steer`. */
export interface SteerRequest {
  /** The content of the steered user message, as for `startTurn`. */
  content: ContentItem[];
  idempotency?: IdempotencyKey;
}

/** `rollback`. */
export interface RollbackRequest {
  /** ≥ 1. More than the thread has drops every user turn (reference §4.5 step 3). */
  turns: number;
  idempotency?: IdempotencyKey;
}

/** `compact`. */
export interface CompactRequest extends WithPolicy {
  idempotency?: IdempotencyKey;
}

/** `inject`. */
export interface InjectRequest extends WithPolicy {
  /**
   * 1-256 items: user messages (a `{text}` body arrives as one `input_text` message), or, from the
   * OpenAI surface, any client item (`clientItems`); while a turn runs, only user messages.
   */
  items: ResponseItem[];
  idempotency?: IdempotencyKey;
}

/** `exportRollout`. */
export interface ExportRequest {
  /** Answer with the lines that can be read when some cannot, instead of failing. */
  allowIncomplete: boolean;
}

/** `exportRollout`'s answer. */
export interface RolloutExport {
  /** The rollout as Codex JSONL. */
  lines: ReadableStream<Uint8Array>;
  /** Lines of the rollout that `lines` lacks because they cannot be read (0: it is whole). */
  missingLines: number;
}

/** `forkSource`. */
export interface ForkSourceRequest {
  /** A turn id of this thread: the fork ends just before that turn's first line. */
  beforeTurn?: string;
  /** A turn id of this thread: the fork ends with that turn's last line (not with `beforeTurn`). */
  afterTurn?: string;
  /**
   * The fork's thread id, when the fork may borrow this thread's R2 segments: the answer's
   * `shared` lists them, and each owner marks the loan before the answer (design §14).
   */
  borrower?: string;
}

/** An R2 segment a fork borrows, and the seq range of it the fork uses. */
export interface SharedSegment {
  r2_key: string;
  first_seq: number;
  last_seq: number;
  bytes: number;
  sha256: string;
}

/** `forkSource`'s answer: the prefix to copy, read by the worker and piped to the target. */
export interface ForkSource {
  /** The prefix as Codex JSONL (the `exportRollout` format). */
  lines: ReadableStream<Uint8Array>;
  /** The source thread's id, recorded as the fork's `forked_from`. */
  forkedFrom: string;
  /** What reading the source's rollout skipped (a damaged segment or line, a gap). */
  warnings: string[];
  /**
   * With `borrower`: the segments holding `lines` from the second on, which the fork refers to
   * instead of writing them again (absent when lines were skipped: the fork copies).
   */
  shared?: SharedSegment[];
}

/** `createFromRollout`, called on the TARGET thread's DO (design §7 fork and import). */
export interface CreateFromRolloutRequest {
  /** The caller's tenant: the target is always in the same tenant as the request. */
  tenant: string;
  threadId: string;
  /**
   * The rollout as Codex JSONL: UTF-8, one `RolloutLine` per line (`\n` or `\r\n`), blank lines
   * ignored but counted, the final newline optional. Read to its end or cancelled; never kept
   * after the call answers. It may error mid-read (the worker aborts an import over its size
   * limit): the DO then creates nothing and answers `invalid_request` (the worker reports 413).
   */
  lines: ReadableStream<Uint8Array>;
  /** The source thread's id for a fork; absent for an import. */
  forkedFrom?: string;
  /**
   * A fork's `ForkSource.warnings`: lines the copy lacks. The new thread starts with them as its
   * warnings and without a context baseline, so its first turn re-sends the full context.
   */
  warnings?: string[];
  /** A fork's `ForkSource.shared`: segments it borrows for the lines they hold. */
  shared?: SharedSegment[];
  /**
   * `import?parent=`: the parent thread of a paginated Codex fork, its lines from `forkSource`.
   * Read only when the upload's `session_meta` has a `history_base` (cancelled otherwise).
   */
  parent?: { threadId: string; lines: ReadableStream<Uint8Array>; warnings: string[] };
  /** `fork`: lines from `forkSource`; `import`: a client's upload, to be checked line by line. */
  source: "fork" | "import";
  /** The new thread's metadata; absent: the newest `spindle_metadata` line of `lines`, if any. */
  metadata?: ThreadMetadata;
  policy?: TenantPolicy;
  idempotency?: IdempotencyKey;
}

/** `restore`: the tenant's placement, for an object whose own record of it was lost. */
export type RestoreRequest = WithPolicy;

/**
 * Event streams: a body of NDJSON, one `ThreadEvent` (`events.ts`) per `\n`-terminated line,
 * UTF-8, in `seq` order. `seq` is the thread's event sequence: strictly increasing, persistent
 * across eviction and never reused, but not contiguous (a client must not infer lost events
 * from gaps). Cancelling the stream (`ReadableStream.cancel`, a client that left) only detaches
 * that reader: it never interrupts, fails or otherwise changes a turn.
 */
export type EventStream = ReadableStream<Uint8Array>;

/**
 * The Thread DO's public RPC methods. Expected failures and their codes:
 * - `createThread` → `thread_exists`, `unknown_model`, `invalid_request`; a retry with the
 *   `idempotency` key the thread was created with answers with the thread, the same key with
 *   another request is `idempotency_key_reused`;
 * - every method but `createThread`/`createFromRollout`, on a thread that does not exist →
 *   `not_found`;
 * - `startTurn`/`streamTurn` → `thread_busy` (with `onBusy: "reject"`), `turn_mismatch` and
 *   `turn_not_steerable` (with `onBusy: "steer"`), `unknown_model`, `invalid_request`,
 *   `context_window_exceeded` (the input cannot fit the window even after a compaction, found
 *   before anything is recorded);
 * - `getTurn` → `turn_not_found`;
 * - `listHistory`, `listTurns` → `invalid_request` for a cursor they cannot read;
 * - the rest as documented on each method.
 *
 * "Answers when the turn ends or pauses" means: once the turn's last line (`task_complete`,
 * `turn_aborted`, or the pause for client tool calls) is durable in SQLite (design §10
 * invariant 5). A provider that fails during a turn ends that turn `failed`: the result is ok,
 * with the Turn's `error` set (`provider_error`, or the core's own code, e.g. a compaction whose
 * summary came back empty).
 */
export interface ThreadRpc {
  createThread(req: CreateThreadRequest, trace?: Trace): Promise<RpcResult<ThreadResource>>;
  getThread(): Promise<RpcResult<ThreadResource>>;
  /** Deletes DO state and the thread's R2 objects. */
  deleteThread(trace?: Trace): Promise<RpcResult<null>>;
  /**
   * The tenant's object wants back what admission `grant` (or an older one) holds: the thread
   * drops its lease, and its running slot too unless a task runs (`released: false`; the slot
   * is released when that task ends).
   */
  yieldQuota(grant: number): Promise<RpcResult<YieldedQuota>>;
  /**
   * Resolves when the turn ends or pauses (`requires_action`), or at once when queued. With an
   * `idempotency` key already used by the same request: nothing new is done, and the answer is
   * the turn that request started (or joined, or queued), awaited if it is still running. The
   * key used by another request: `idempotency_key_reused`; by one still starting:
   * `idempotency_key_in_use`.
   */
  startTurn(req: StartTurnRequest, trace?: Trace): Promise<RpcResult<TurnResource>>;
  /**
   * `startTurn`, answered at once (before any model call) with the turn's `EventStream`: it
   * starts with `turn.started` and ends with exactly one terminal event (`turn.completed`,
   * `turn.requires_action`, `turn.interrupted` or `turn.failed`, carrying the Turn), after which
   * the DO closes it. A provider failure after the answer arrives as `turn.failed`, never as a
   * broken stream. `onBusy: "queue"`: the stream stays silent until the queued turn starts;
   * `"steer"`: the input joins the running turn and the stream follows that turn from now on.
   * Failures that precede the turn (`not_found`, `thread_busy`, `unknown_model`,
   * `invalid_request`, `context_window_exceeded`) are answered as a failed result, never inside
   * the stream. Cancelling the stream does not stop the turn; its events stay available through
   * `events` (same `seq`s). A retry with the same `idempotency` key and request replays the
   * stream the first request got, from the same event on, as `events` replays it (`event_expired`
   * once those events are gone); the key failures are those of `startTurn`.
   */
  streamTurn(req: StartTurnRequest, trace?: Trace): Promise<RpcResult<EventStream>>;
  getTurn(turnId: string): Promise<RpcResult<TurnResource>>;
  /**
   * The turn an earlier request with this key started here, when it was this same request (null:
   * none); the same key with another request is `idempotency_key_reused`. The OpenAI surface
   * tells a retried continuation from a branch with it.
   */
  keyedTurn(key: IdempotencyKey): Promise<RpcResult<string | null>>;
  /**
   * The thread's `EventStream`: the retained events with `seq > after`, in order, then live
   * events as they happen, across turns, until the reader cancels (or the object goes away, when
   * the stream simply ends). The retained window is bounded (by count, bytes and age, the DO's
   * choice); replay may leave out `item.delta` (the `item.completed` that follows holds the whole
   * item). Failures: `event_expired` when events after `after` have already been dropped (the
   * client must re-read the thread; it must not resume from a gap); `invalid_request` with
   * `errors[0].path` `"after"` when `after` is greater than the newest `seq`.
   */
  events(req: EventsRequest): Promise<RpcResult<EventStream>>;
  /**
   * Records `function_call_output` items for the turn's pending calls and resumes the turn (a new
   * step, design §5 step 5); answers when it ends or pauses again. Every pending call must be
   * answered in the one request (a turn never samples with some of its calls still open), in any
   * order. All-or-nothing: a failure records none of the items. Failures: `turn_not_found`;
   * `no_pending_calls` when the turn is not `requires_action` (or its calls were superseded);
   * `unknown_call_id` when an item's `call_id` is not pending, with `errors[i].path`
   * `/items/{i}/call_id` for each such item; `invalid_request` when pending calls are left
   * without an output; `thread_busy` while another task runs.
   */
  submitOutputs(
    turnId: string,
    req: SubmitOutputsRequest,
    trace?: Trace,
  ): Promise<RpcResult<TurnResource>>;
  /**
   * `submitOutputs` answered at once with an `EventStream` of the resumed turn (as `streamTurn`,
   * minus `turn.started`: the turn started earlier). Same failures, all before the stream.
   */
  streamOutputs(
    turnId: string,
    req: SubmitOutputsRequest,
    trace?: Trace,
  ): Promise<RpcResult<EventStream>>;
  /**
   * Adds user input to the running turn: recorded as a user message before its next sampling
   * step. Answers at once with the Turn as it stands (`in_progress`). Failures:
   * `turn_not_found`; `turn_mismatch` when the turn is not the thread's running turn (it ended,
   * or none or another one runs); `turn_not_steerable` when it is the running turn but cannot
   * take input (paused in `requires_action`, where outputs are due, or a compaction turn).
   */
  steer(turnId: string, req: SteerRequest): Promise<RpcResult<TurnResource>>;
  /**
   * Ends the turn as `interrupted` (a `turn_aborted` line and the `<turn_aborted>` user fragment,
   * design §5 step 6): a running turn stops its model call, a paused one drops its pending calls,
   * a queued one never starts. Answers when the turn has ended. Idempotent: a turn that already
   * ended is answered as it is. Failures: `turn_not_found`.
   */
  interrupt(turnId: string, trace?: Trace): Promise<RpcResult<TurnResource>>;
  /**
   * Drops the last `turns` user turns from history (reference §4.5) and records a
   * `thread_rolled_back` line. Failures: `thread_busy` unless the thread is `idle`.
   */
  rollback(req: RollbackRequest): Promise<RpcResult<ThreadResource>>;
  /**
   * Runs a manual compaction turn (reference §5.6: no reference context, so the next turn
   * re-injects the full context) and answers when it ends, with its Turn. It emits events like
   * any turn; a provider failure ends it `failed` like any turn. Failures: `thread_busy` unless
   * the thread is `idle`. A retry with the same `idempotency` key runs nothing and answers with
   * the first request's compaction turn (awaited while it runs); the key failures are those of
   * `startTurn`.
   */
  compact(req: CompactRequest, trace?: Trace): Promise<RpcResult<TurnResource>>;
  /**
   * Records user messages without a turn (reference §5.5): no `task_started`, `turn_context` or
   * reference update; they count as user turns for rollback. Each is an `item.completed` event
   * with `turn_id` null. While a turn is running they are queued as pending input for it (and
   * their events carry that turn's id). Failures: `invalid_request` (the worker never sends an
   * empty list). A retry with the same `idempotency` key and request records nothing and answers
   * with the thread; the key failures are those of `startTurn`.
   */
  inject(req: InjectRequest): Promise<RpcResult<ThreadResource>>;
  /**
   * The whole rollout as Codex JSONL, `\n`-terminated lines in `seq` order (R2 segments, then
   * the SQLite tail): the lines durable when the call was made, none added later. Failures:
   * `rollout_incomplete` when some of them cannot be read (a damaged segment whose lines SQLite
   * no longer holds), unless `allowIncomplete`; the detail says which.
   */
  exportRollout(req: ExportRequest): Promise<RpcResult<RolloutExport>>;
  /**
   * The rollout prefix a fork copies, in the `exportRollout` format. Without `beforeTurn`: every
   * line durable at the call except those of a turn still `in_progress`. Failures:
   * `turn_not_found` for an unknown `beforeTurn`.
   */
  forkSource(req: ForkSourceRequest): Promise<RpcResult<ForkSource>>;
  /**
   * Creates this (target) thread from a rollout: checks that it does not exist before reading
   * `lines`, reconstructs the state (design §6; invariant 1: no context is written before turn
   * 1), writes its own `session_meta` (its id, `forked_from_id`) in place of the source's and
   * persists the other lines as they came. Its configuration is the rollout's newest
   * `spindle_config` line, or else one resolved over the catalog defaults from the newest
   * `turn_context` (a plain Codex rollout has no `spindle_config`). Answers the new Thread
   * (`forked_from` = `forkedFrom`, or null). A retry with the `idempotency` key the thread was
   * created with answers with the thread (`lines` cancelled unread); the same key with another
   * request is `idempotency_key_reused`. An import's fingerprint covers only its route and query:
   * this method reads `lines` and adds their digest before it compares or records the key. Failures: `thread_exists` (then `lines` is cancelled unread);
   * `invalid_request` for a line that does not decode or a rollout that cannot be reconstructed
   * (no `session_meta` first, no line at all), with `errors[0].path` `/line/{n}` (1-based line
   * number; `/line/1` for an empty rollout) and the reason as `message`; nothing is kept on any
   * failure.
   */
  createFromRollout(
    req: CreateFromRolloutRequest,
    trace?: Trace,
  ): Promise<RpcResult<ThreadResource>>;
  listHistory(req: ListHistoryRequest): Promise<RpcResult<ListResource<ResponseItem>>>;
  /** The thread's turns that recorded lines, newest first (`GET /v1/threads/{id}/turns`). */
  listTurns(req: ListTurnsRequest): Promise<RpcResult<ListResource<TurnSummary>>>;
  /** The exact next provider request (design §7 `GET …/prompt`). */
  getPrompt(): Promise<RpcResult<Prompt>>;
  /** A turn's provider requests, rebuilt from the rollout (design §13); `turn_not_found`. */
  turnRequests(turnId: string): Promise<RpcResult<TurnRequestsResource>>;
  /** Rebuilds the thread from its R2 rollout (design §6). */
  restore(req: RestoreRequest): Promise<RpcResult<ThreadResource>>;
  /**
   * Applies a JSON merge patch to the thread's metadata and records the result as a
   * `spindle_metadata` line. `invalid_request` (path `/metadata`) when the result would hold more
   * than 16 keys.
   */
  patchThread(req: PatchThreadBody): Promise<RpcResult<ThreadResource>>;
  /**
   * Takes a verified hook delivery (design §12): creates the thread from `threadConfig` when it
   * does not exist, then in one synchronous step records the delivery (its dedup key, for 72
   * hours) and queues its turn, which starts after the answer; so an accepted delivery becomes
   * exactly one turn even when the instance goes away right after answering. A delivery id seen
   * before within 72 hours starts nothing and answers the first delivery (`duplicate`).
   * Failures: `thread_busy` (`onBusy: "reject"` while a turn runs), `quota_exceeded`, and the
   * create's (`unknown_model`, `invalid_request`, …); none of them records the delivery.
   */
  acceptDelivery(req: AcceptDeliveryRequest, trace?: Trace): Promise<RpcResult<AcceptedDelivery>>;
}
