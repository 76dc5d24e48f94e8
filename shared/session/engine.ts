import { ContextManager, frozenItem } from "../context-manager/index.ts";
import type { ModelCatalog, ModelInfo } from "../models/index.ts";
import type { Clock, IdSource } from "../ports/index.ts";
import type {
  ContentItem,
  FunctionCallItem,
  KnownResponseItem,
  MessageItem,
  PreviousTurnSettings,
  Prompt,
  ResponseItem,
  SessionConfiguration,
  ThreadConfig,
  TokenUsage,
  TokenUsageInfo,
  ToolOutput,
} from "../protocol/index.ts";
import type { ModelClient, ModelEvent, ModelPrompt } from "../providers/index.ts";
import {
  buildCompactedHistory,
  type CompactionTrigger,
  collectUserMessages,
  compactUserMessagesBudgetTokens,
  DEFAULT_AUTO_COMPACT_FRACTION,
  exceedsAutoCompactLimit,
} from "./compaction.ts";
import { effectiveBaseInstructions, resolveSessionConfiguration } from "./configuration.ts";
import {
  previousTurnSettingsOf,
  recordContextUpdates,
  recordWorldStateUpdate,
  withTurnId,
} from "./context-updates.ts";
import {
  CompactionFailedError,
  DuplicateCallOutputError,
  InvalidInputError,
  MissingCallOutputsError,
  NoPendingCallsError,
  SessionBusyError,
  TurnNotSteerableError,
  UnknownCallIdError,
} from "./errors.ts";
import { turnAbortedMessage } from "./notices.ts";
import { buildCompactionPrompt, buildPrompt, modelVisiblePrompt } from "./prompt.ts";
import type { RolloutSink } from "./rollout-sink.ts";
import {
  buildTurnContext,
  captureStepContext,
  type StepContext,
  type TurnContext,
  truncationPolicyOf,
} from "./turn-context.ts";

/** Everything the engine needs from outside, passed in (design §2: the core never reaches out). */
export interface EngineDeps {
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly catalog: ModelCatalog;
  readonly defaultModel: string;
  readonly modelClient: (model: ModelInfo, provider: string) => ModelClient;
  readonly sink: RolloutSink;
}

/** A thread's live state: what a checkpoint or a replay restores. */
export interface SessionState {
  config: SessionConfiguration;
  history: ContextManager;
  /** undefined: no real user turn has run yet (or none survived a rollback). */
  previousTurnSettings?: PreviousTurnSettings;
}

export interface UserInput {
  readonly content: readonly ContentItem[];
}

/** The output a client posts for one pending function call. */
export interface ToolCallOutput {
  readonly call_id: string;
  readonly output: ToolOutput;
}

/** A task is a user turn or a compaction; each has its own turn id and task_started/_complete. */
export type TaskKind = "turn" | "compaction";

/**
 * What the engine streams while a task runs (design §7 SSE events). `turn.completed` and
 * `turn.requires_action` are not events: the generator's return value (the outcome) carries them.
 */
export type TurnEvent =
  | { type: "turn.started"; turn_id: string; kind: TaskKind }
  /** Every item recorded into history; `context` flags context items (initial context, diffs, `<turn_aborted>`). */
  | { type: "item.completed"; turn_id: string; item: ResponseItem; context: boolean }
  | { type: "item.delta"; turn_id: string; delta: string }
  | { type: "token_count"; turn_id: string; info: TokenUsageInfo | undefined }
  /** The task ended because the caller's signal aborted (after its `turn_aborted` line). */
  | { type: "turn.interrupted"; turn_id: string; kind: TaskKind }
  /** A compaction task finished: history is now `replacement_history`. */
  | {
      type: "compaction.completed";
      turn_id: string;
      trigger: CompactionTrigger;
      summary: string;
      replacement_history: ResponseItem[];
    };

/** How a user turn ended (or paused). */
export type TurnOutcome =
  | { status: "completed"; turn_id: string; last_agent_message: string | undefined }
  | {
      status: "requires_action";
      turn_id: string;
      pending_calls: FunctionCallItem[];
      /**
       * Steered input that arrived while the model was producing these calls and has not joined
       * the turn yet (present only when non-empty). It joins after the outputs when the turn
       * resumes; after an eviction, pass it back to `resumeTurn`.
       */
      queued_input?: ContentItem[][];
    }
  /** `turn_id` is the interrupted task's: the user turn, or the auto-compaction before it. */
  | { status: "interrupted"; turn_id: string };

/** How a compaction task ended. */
export type CompactionOutcome =
  | { status: "completed"; turn_id: string; summary: string; replacement_history: ResponseItem[] }
  | { status: "interrupted"; turn_id: string };

/** Id prefixes of items the session assigns (reference §1.2). */
const ID_PREFIXES: Partial<Record<KnownResponseItem["type"], string>> = {
  message: "msg",
  reasoning: "rs",
  function_call: "fc",
  function_call_output: "fco",
  custom_tool_call: "ctc",
  custom_tool_call_output: "ctco",
  local_shell_call: "lsh",
  web_search_call: "ws",
  compaction: "cmp",
};

/** The task that owns the session right now. */
interface RunningTask {
  readonly turnId: string;
  readonly kind: TaskKind;
  /** Steered input waiting for the next sampling step. */
  readonly queue: ContentItem[][];
}

/** What one model request produced: the recorded items' calls and text, or an interrupt. */
interface StepResult {
  readonly interrupted: boolean;
  readonly calls: FunctionCallItem[];
  readonly lastMessage: string | undefined;
  readonly usage: TokenUsage | undefined;
}

/**
 * One thread's turn engine (design §5). Owns the ContextManager and the configuration; writes every
 * rollout item through the synchronous sink at the moment it changes memory.
 *
 * One task (turn or compaction) runs at a time: `runTurn`, `resumeTurn`, `compact`, `inject` and
 * `recordRollback` throw `SessionBusyError` while another task runs; `steer` is the only way to
 * reach a running turn. The caller serializes requests; this guard catches mistakes.
 */
export class ThreadSession {
  readonly state: SessionState;
  readonly #deps: EngineDeps;
  #running: RunningTask | undefined;
  /** Steered input left over when a turn paused for client tools (see `TurnOutcome.queued_input`). */
  #carried: { turnId: string; input: ContentItem[][] } | undefined;

  constructor(state: SessionState, deps: EngineDeps) {
    this.state = state;
    this.#deps = deps;
  }

  static create(config: ThreadConfig, deps: EngineDeps): ThreadSession {
    const resolved = resolveSessionConfiguration(
      undefined,
      config,
      deps.catalog,
      deps.defaultModel,
    );
    return new ThreadSession({ config: resolved, history: new ContextManager() }, deps);
  }

  get history(): ContextManager {
    return this.state.history;
  }

  /**
   * The id of the task running now (a user turn or a compaction), undefined when idle. A turn
   * paused in `requires_action` is not running. Callers compare it with a request's turn id to
   * answer `turn_mismatch`.
   */
  get runningTurnId(): string | undefined {
    return this.#running?.turnId;
  }

  #model(slug: string): ModelInfo {
    const model = this.#deps.catalog.get(slug);
    if (model === undefined) throw new Error(`model ${slug} left the catalog`);
    return model;
  }

  #assertIdle(): void {
    if (this.#running !== undefined) throw new SessionBusyError(this.#running.turnId);
  }

  #applyOverrides(overrides: ThreadConfig | undefined): void {
    if (overrides === undefined) return;
    const { catalog, defaultModel } = this.#deps;
    this.state.config = resolveSessionConfiguration(
      this.state.config,
      overrides,
      catalog,
      defaultModel,
    );
  }

  #newTurnContext(turnId: string): TurnContext {
    const config = this.state.config;
    return buildTurnContext(turnId, config, this.#model(config.model), this.#deps.clock.nowMs());
  }

  /** Applies overrides (they become the new defaults) and freezes the turn's settings. */
  startTurnContext(overrides: ThreadConfig | undefined): TurnContext {
    this.#applyOverrides(overrides);
    return this.#newTurnContext(`turn_${this.#deps.ids.uuidv7()}`);
  }

  /** The prompt the next sampling step would send with the current configuration, as the model sees it. */
  previewPrompt(): Prompt {
    const turn = buildTurnContext(
      "preview",
      this.state.config,
      this.#model(this.state.config.model),
      this.#deps.clock.nowMs(),
    );
    return modelVisiblePrompt(
      buildPrompt(
        this.history,
        turn,
        captureStepContext(turn, this.#deps.clock.nowMs(), undefined),
      ),
    );
  }

  /**
   * Records one item: id assigned, turn id stamped (when there is a turn), into history (tool
   * outputs truncated by the turn's, else the thread's, truncation policy) and as a `response_item` line. The rollout keeps the item as
   * given; replay truncates it again the same way (reference §6.2). Returns the item as history
   * holds it, i.e. a tool output truncated as the model will see it.
   */
  #record(item: ResponseItem, turn: TurnContext | undefined): ResponseItem {
    const withId = this.#withId(item);
    // Frozen before it is recorded, so history and the rollout line share one object (unless
    // truncation changes it): a checkpoint extended from the line keeps sharing it.
    const stamped = frozenItem(turn === undefined ? withId : withTurnId(withId, turn.turnId));
    const policy = turn?.truncationPolicy ?? truncationPolicyOf(this.state.config);
    const [stored] = this.history.recordItems([stamped], policy);
    this.#deps.sink.append({ type: "response_item", payload: stamped });
    const isOutput =
      stamped.type === "function_call_output" || stamped.type === "custom_tool_call_output";
    return isOutput && stored !== undefined ? stored : stamped;
  }

  #withId<T extends ResponseItem>(item: T): T {
    if (item.type === "other" || item.id) return item;
    const prefix = ID_PREFIXES[item.type];
    if (!prefix) return item;
    // `id` right after `type`, where Codex serializes it (an empty or null id is replaced).
    const { type, id: _empty, ...rest } = item;
    return { type, id: `${prefix}_${this.#deps.ids.uuidv7()}`, ...rest } as unknown as T;
  }

  #taskStarted(turn: TurnContext, startedAtMs: number): void {
    this.#deps.sink.append({
      type: "event_msg",
      payload: {
        type: "task_started",
        turn_id: turn.turnId,
        started_at: Math.floor(startedAtMs / 1000),
        model_context_window: turn.model.contextWindowTokens,
        collaboration_mode_kind: turn.config.collaboration_mode?.mode ?? "default",
      },
    });
  }

  #taskComplete(turn: TurnContext, lastMessage: string | undefined, startedAtMs?: number): void {
    const completedAtMs = this.#deps.clock.nowMs();
    this.#deps.sink.append({
      type: "event_msg",
      payload: {
        type: "task_complete",
        turn_id: turn.turnId,
        last_agent_message: lastMessage ?? null,
        completed_at: Math.floor(completedAtMs / 1000),
        ...(startedAtMs === undefined ? {} : { duration_ms: completedAtMs - startedAtMs }),
      },
    });
  }

  /**
   * Runs one turn: `task_started`, context updates (full or diff), the user input and its
   * `user_message` event, then sampling until the model answers without a tool call
   * (`task_complete`) or calls client tools (`requires_action`, resumed by `resumeTurn`).
   *
   * Overrides are applied first (they become the new defaults). Then, when the estimated context
   * (`history.estimateTokenCount` with the turn's base instructions) is above
   * `auto_compact_fraction` (default 0.9) × the turn model's window, an `auto` compaction runs as
   * a task of its own — its own turn id, `task_started` … `task_complete` — before this turn's
   * `task_started`. (Codex compacts inside the turn, after `task_started`; a separate task keeps one
   * task_started/task_complete pair per turn id and keeps the compaction's lines out of the turn.)
   * If that compaction is interrupted, the user turn does not start and the outcome is the
   * compaction's `interrupted`.
   *
   * Steered input (`steer`) joins at each sampling step; an abort of `signal` ends the turn as
   * `interrupted` (see `#interrupt`). A turn left in `requires_action` is abandoned by starting a
   * new one: its calls stay unanswered in history and `forPrompt` pairs them with `aborted`.
   */
  async *runTurn(
    input: UserInput,
    overrides?: ThreadConfig,
    signal?: AbortSignal,
    options: { turnId?: string } = {},
  ): AsyncGenerator<TurnEvent, TurnOutcome> {
    this.#assertIdle();
    this.#applyOverrides(overrides);
    this.#carried = undefined;
    const compaction = this.#autoCompactionModel();
    if (compaction !== undefined) {
      const outcome = yield* this.#compactTask("auto", compaction, signal);
      if (outcome.status === "interrupted") return outcome;
    }

    const { sink, clock, ids } = this.#deps;
    // A caller may fix the id up front (a queued or streamed turn is addressed before it starts).
    const turn = this.#newTurnContext(options.turnId ?? `turn_${ids.uuidv7()}`);
    this.#running = { turnId: turn.turnId, kind: "turn", queue: [] };
    try {
      const startedAtMs = clock.nowMs();
      this.#taskStarted(turn, startedAtMs);
      yield { type: "turn.started", turn_id: turn.turnId, kind: "turn" };

      const step = captureStepContext(turn, clock.nowMs(), this.state.previousTurnSettings?.model);
      const update = recordContextUpdates(this.history, turn, step, sink);
      for (const item of update.items) {
        yield { type: "item.completed", turn_id: turn.turnId, item, context: true };
      }

      const recorded = this.#recordUserInput(input.content, turn);
      yield { type: "item.completed", turn_id: turn.turnId, item: recorded, context: false };
      this.state.previousTurnSettings = previousTurnSettingsOf(turn);

      return yield* this.#sample(turn, step, startedAtMs, signal);
    } finally {
      this.#running = undefined;
    }
  }

  /**
   * The sync part of `resumeTurn`'s checks, for callers that want to answer 4xx before opening a
   * stream. Throws, in this order: `SessionBusyError`; `NoPendingCallsError` (no pending calls);
   * `UnknownCallIdError` (an output for a call that is not pending); `DuplicateCallOutputError`;
   * `MissingCallOutputsError` (all pending calls must be answered in one request — partial outputs
   * are refused, so a turn never samples with some of its calls still open); `NoPendingCallsError`
   * with the stale ids (the calls are not, or no longer, open calls of `turnId` at the end of
   * history: answered already, abandoned for a later turn, rolled back or compacted away).
   */
  checkResume(
    turnId: string,
    pendingCalls: readonly FunctionCallItem[],
    outputs: readonly ToolCallOutput[],
  ): void {
    this.#assertIdle();
    if (pendingCalls.length === 0) throw new NoPendingCallsError(turnId);
    const pending = new Set(pendingCalls.map((c) => c.call_id));
    const answered = new Set<string>();
    for (const output of outputs) {
      if (!pending.has(output.call_id)) throw new UnknownCallIdError(output.call_id);
      if (answered.has(output.call_id)) throw new DuplicateCallOutputError(output.call_id);
      answered.add(output.call_id);
    }
    const missing = [...pending].filter((id) => !answered.has(id));
    if (missing.length > 0) throw new MissingCallOutputsError(missing);
    const stale = this.#stalePendingCalls(turnId, pending);
    if (stale.length > 0) throw new NoPendingCallsError(turnId, stale);
  }

  /**
   * Pending calls of `turnId` that history does not hold as open calls: missing, already answered,
   * stamped with another turn, or followed by an item of another turn (the thread moved on).
   */
  #stalePendingCalls(turnId: string, pending: ReadonlySet<string>): string[] {
    const items = this.history.items;
    const callIndex = new Map<string, number>();
    const answered = new Set<string>();
    items.forEach((item, index) => {
      if (item.type === "function_call" && pending.has(item.call_id)) {
        if (turnIdOf(item) === turnId) callIndex.set(item.call_id, index);
      } else if (item.type === "function_call_output" && pending.has(item.call_id)) {
        answered.add(item.call_id);
      }
    });
    const first = Math.min(...callIndex.values());
    const movedOn = items.slice(first + 1).some((item) => {
      const owner = turnIdOf(item);
      return owner !== undefined && owner !== turnId;
    });
    return [...pending].filter((id) => movedOn || !callIndex.has(id) || answered.has(id));
  }

  /**
   * Resumes a turn paused in `requires_action` with the client's outputs (design §5 step 5). Works
   * on a session rebuilt after an eviction: the caller passes the turn id and the pending calls it
   * persisted, and the TurnContext is rebuilt from the current configuration with that turn id.
   *
   * Checks as `checkResume` (nothing is recorded when it throws). Then each `function_call_output`
   * is recorded in the order of `pendingCalls` (id assigned, turn id stamped, truncated by the
   * truncation policy), and sampling continues with a fresh StepContext: if the world state moved
   * since the baseline (e.g. the date rolled over) its diff is recorded first, as at turn start but
   * without a new `turn_context` (see `recordWorldStateUpdate`). `queuedInput` (from the paused
   * outcome) replaces any steered input this session still holds for the turn; it joins right after
   * the outputs. No `turn.started` event is emitted and `task_complete` carries no `duration_ms`
   * (the turn's start is not known here).
   */
  async *resumeTurn(
    turnId: string,
    pendingCalls: readonly FunctionCallItem[],
    outputs: readonly ToolCallOutput[],
    signal?: AbortSignal,
    queuedInput?: readonly (readonly ContentItem[])[],
  ): AsyncGenerator<TurnEvent, TurnOutcome> {
    this.checkResume(turnId, pendingCalls, outputs);
    const carried = this.#carried?.turnId === turnId ? this.#carried.input : [];
    const queue = queuedInput === undefined ? carried : queuedInput.map((c) => [...c]);
    this.#carried = undefined;

    const turn = this.#newTurnContext(turnId);
    this.#running = { turnId, kind: "turn", queue: [...queue] };
    try {
      const byCallId = new Map(outputs.map((o) => [o.call_id, o.output]));
      for (const call of pendingCalls) {
        const output = byCallId.get(call.call_id);
        if (output === undefined) continue;
        const item = this.#record(
          { type: "function_call_output", call_id: call.call_id, output },
          turn,
        );
        yield { type: "item.completed", turn_id: turnId, item, context: false };
      }
      return yield* this.#sample(turn, undefined, undefined, signal);
    } finally {
      this.#running = undefined;
    }
  }

  /**
   * Queues input for the running turn (design §7 `steer`). It joins at the turn's next sampling
   * step, recorded as a user message (a turn boundary) with its `user_message` event right before
   * that step's prompt is built; if the model's answer would end the turn while input is queued,
   * the turn samples once more. Returns the id of the turn it joined.
   *
   * Throws `TurnNotSteerableError` when no turn is running (idle, or paused in `requires_action`)
   * or the running task is a compaction, and `InvalidInputError` for empty content or parts other
   * than `input_text`/`input_image`.
   */
  steer(content: readonly ContentItem[]): string {
    const running = this.#running;
    if (running?.kind !== "turn") throw new TurnNotSteerableError(running?.turnId);
    running.queue.push(checkUserContent(content, "steer"));
    return running.turnId;
  }

  /**
   * Records user-role messages without a turn (reference §5.5): each as a `response_item` line,
   * with an id but no turn id; no `task_started`, `turn_context` or `user_message`, and the
   * reference context item and world-state baseline stay as they are. Non-contextual ones are
   * user-turn boundaries, so rollback counts them. Only `role: "user"` with `input_text` /
   * `input_image` parts is accepted, and the list must not be empty (`InvalidInputError`). Items
   * are rebuilt from their role and parts: ids and metadata the caller sent are not kept.
   * Returns the recorded items.
   */
  inject(items: readonly MessageItem[]): ResponseItem[] {
    this.#assertIdle();
    if (items.length === 0) throw new InvalidInputError("inject needs at least one item");
    const messages = items.map((item, i): MessageItem => {
      if (item.type !== "message" || item.role !== "user") {
        throw new InvalidInputError(`inject item ${i}: only user messages can be injected`);
      }
      return { type: "message", role: "user", content: checkUserContent(item.content, "inject") };
    });
    return messages.map((message) => this.#record(message, undefined));
  }

  /**
   * Rolls back the last `numTurns` user turns (reference §4.5): writes `event_msg
   * thread_rolled_back {num_turns}` and applies `history.dropLastNUserTurns`. The live result
   * clears the world-state baseline (and the reference context item only when a mixed initial
   * bundle was trimmed) but keeps `previousTurnSettings` and token info as they were; the exact
   * state is what replaying the rollout gives (reference §6), so the caller should rebuild from
   * its rollout afterwards. `numTurns` must be a positive integer (`InvalidInputError`).
   */
  recordRollback(numTurns: number): void {
    this.#assertIdle();
    if (!Number.isInteger(numTurns) || numTurns < 1) {
      throw new InvalidInputError(`num_turns must be a positive integer, got ${numTurns}`);
    }
    this.#carried = undefined;
    this.#deps.sink.append({
      type: "event_msg",
      payload: { type: "thread_rolled_back", num_turns: numTurns },
    });
    this.history.dropLastNUserTurns(numTurns);
  }

  /**
   * A compaction task (reference §5.6): `task_started` with its own turn id; the thread's model is
   * asked for a summary (base instructions + `forPrompt` history + one summarization request that
   * is not recorded); history is replaced by the newest real user messages (text only, within
   * `compactUserMessagesBudgetTokens` of the window) followed by the summary message
   * (`history.replace`: history_version + 1, baseline cleared); the reference context item is
   * cleared so the next turn re-injects the full context; then `compacted {message,
   * replacement_history}`, a `token_count` (the request's usage added to the totals, the last usage
   * re-estimated from the new history) and `task_complete`. `options.turnId` names the task
   * (default: a new `turn_…` id), as for `runTurn`.
   *
   * An abort ends it as `interrupted` with a `turn_aborted` line and history untouched (no
   * `<turn_aborted>` fragment: nothing the model did was cut off). An empty summary throws
   * `CompactionFailedError` after `task_started`, history untouched.
   */
  async *compact(
    trigger: CompactionTrigger = "manual",
    signal?: AbortSignal,
    options: { turnId?: string } = {},
  ): AsyncGenerator<TurnEvent, CompactionOutcome> {
    this.#assertIdle();
    this.#carried = undefined;
    const summarizer = this.#model(this.state.config.model);
    return yield* this.#compactTask(trigger, summarizer, signal, options.turnId);
  }

  /**
   * The model that should summarize before the next turn, or undefined when no compaction is
   * needed. After a switch to a model with a smaller window (a downshift), the previous model
   * summarizes: the history was built for it and may not fit the new one.
   */
  #autoCompactionModel(): ModelInfo | undefined {
    const config = this.state.config;
    const model = this.#model(config.model);
    const fraction = config.auto_compact_fraction ?? DEFAULT_AUTO_COMPACT_FRACTION;
    // Codex's measure (reference §4.6): the provider's last reported total plus an estimate of
    // what was recorded since the model last answered, O(new items); the whole-history estimate
    // only until a provider has reported usage.
    const estimate = this.history.tokenInfo
      ? this.history.getTotalTokenUsage(true)
      : this.history.estimateTokenCount(effectiveBaseInstructions(config, model));
    if (!exceedsAutoCompactLimit(estimate, fraction, model.contextWindowTokens)) return undefined;
    const previous = this.state.previousTurnSettings?.model;
    const previousModel = previous === undefined ? undefined : this.#deps.catalog.get(previous);
    if (
      previousModel !== undefined &&
      previousModel.contextWindowTokens > model.contextWindowTokens
    ) {
      return previousModel;
    }
    return model;
  }

  async *#compactTask(
    trigger: CompactionTrigger,
    summarizer: ModelInfo,
    signal: AbortSignal | undefined,
    givenTurnId?: string,
  ): AsyncGenerator<TurnEvent, CompactionOutcome> {
    const { sink, clock, ids } = this.#deps;
    const config = this.state.config;
    const turnId = givenTurnId ?? `turn_${ids.uuidv7()}`;
    const turn = buildTurnContext(turnId, config, summarizer, clock.nowMs());
    this.#running = { turnId, kind: "compaction", queue: [] };
    try {
      const startedAtMs = clock.nowMs();
      this.#taskStarted(turn, startedAtMs);
      yield { type: "turn.started", turn_id: turnId, kind: "compaction" };

      const provider = summarizer.slug === config.model ? config.provider : summarizer.provider;
      const client = this.#deps.modelClient(summarizer, provider);
      let summary: string | undefined;
      let usage: TokenUsage | undefined;
      const interrupted = await streamModel(
        client,
        buildCompactionPrompt(this.history, turn),
        signal,
        (event) => {
          if (event.type === "completed") usage = event.usage;
          else if (event.type === "output_item_done" && isAssistantMessage(event.item)) {
            summary = messageText(event.item);
          }
        },
      );
      if (interrupted) {
        this.#turnAborted(turn, startedAtMs);
        yield { type: "turn.interrupted", turn_id: turnId, kind: "compaction" };
        return { status: "interrupted", turn_id: turnId };
      }
      if (summary === undefined || summary.trim() === "") throw new CompactionFailedError(turnId);

      // The budget follows the thread's model: the replacement must fit the model that reads it.
      const budget = compactUserMessagesBudgetTokens(this.#model(config.model).contextWindowTokens);
      const replacement = buildCompactedHistory(
        collectUserMessages(this.history.items),
        summary,
        budget,
      ).map((item) => this.#withId(item));
      this.history.replace(replacement);
      this.history.referenceContextItem = undefined;
      sink.append({
        type: "compacted",
        payload: { message: summary, replacement_history: replacement },
      });

      this.#recordCompactionUsage(usage, turn);
      const info = this.history.tokenInfo;
      sink.append({
        type: "event_msg",
        payload: { type: "token_count", info: info ?? null, rate_limits: null },
      });
      yield { type: "token_count", turn_id: turnId, info };

      this.#taskComplete(turn, undefined, startedAtMs);
      yield {
        type: "compaction.completed",
        turn_id: turnId,
        trigger,
        summary,
        replacement_history: replacement,
      };
      return { status: "completed", turn_id: turnId, summary, replacement_history: replacement };
    } finally {
      this.#running = undefined;
    }
  }

  /**
   * Adds the summarization request's usage to the totals, then sets the last usage to the estimate
   * of the new, shorter history: what the context holds now, not what the request cost.
   */
  #recordCompactionUsage(usage: TokenUsage | undefined, turn: TurnContext): void {
    const window = turn.model.contextWindowTokens;
    this.history.updateTokenInfo(usage, window);
    const estimate = this.history.estimateTokenCount(
      effectiveBaseInstructions(this.state.config, this.#model(this.state.config.model)),
    );
    const info = this.history.tokenInfo;
    const last = {
      input_tokens: 0,
      cached_input_tokens: 0,
      output_tokens: 0,
      reasoning_output_tokens: 0,
      total_tokens: estimate,
    };
    this.history.tokenInfo = {
      total_token_usage: info?.total_token_usage ?? { ...last, total_tokens: 0 },
      last_token_usage: last,
      model_context_window: info?.model_context_window ?? window,
    };
  }

  /** Records user input as a turn boundary message and its `user_message` event line. */
  #recordUserInput(content: readonly ContentItem[], turn: TurnContext): ResponseItem {
    const userItem: MessageItem = { type: "message", role: "user", content: [...content] };
    const recorded = this.#record(userItem, turn);
    this.#deps.sink.append({ type: "event_msg", payload: userMessageEvent(content) });
    return recorded;
  }

  /**
   * The sampling loop (design §5 step 5). Each step: stop if the signal aborted; capture a new
   * StepContext and record its world-state diff (except the turn's first step, which uses the
   * capture the context update was built from); record queued steered input; build the prompt;
   * stream and record the model's finished items; `token_count`. Function calls end the loop with
   * `requires_action`; an answer ends it with `task_complete`, unless steered input is queued,
   * which buys one more step.
   */
  async *#sample(
    turn: TurnContext,
    firstStep: StepContext | undefined,
    startedAtMs: number | undefined,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<TurnEvent, TurnOutcome> {
    const { sink, clock } = this.#deps;
    const client = this.#deps.modelClient(turn.model, turn.config.provider);
    const queue = this.#running?.queue ?? [];
    let step = firstStep;
    for (;;) {
      if (signal?.aborted) return yield* this.#interrupt(turn, startedAtMs);
      if (step === undefined) {
        step = captureStepContext(turn, clock.nowMs(), this.state.previousTurnSettings?.model);
        const update = recordWorldStateUpdate(this.history, turn, step, sink);
        for (const item of update.items) {
          yield { type: "item.completed", turn_id: turn.turnId, item, context: true };
        }
      }
      for (let content = queue.shift(); content !== undefined; content = queue.shift()) {
        const item = this.#recordUserInput(content, turn);
        yield { type: "item.completed", turn_id: turn.turnId, item, context: false };
      }

      const prompt = buildPrompt(this.history, turn, step);
      step = undefined;
      const result = yield* this.#stream(client, prompt, turn, signal);
      if (result.interrupted) return yield* this.#interrupt(turn, startedAtMs);

      this.history.updateTokenInfo(result.usage, turn.model.contextWindowTokens);
      const info = this.history.tokenInfo;
      sink.append({
        type: "event_msg",
        payload: { type: "token_count", info: info ?? null, rate_limits: null },
      });
      yield { type: "token_count", turn_id: turn.turnId, info };

      if (result.calls.length > 0) {
        const outcome: TurnOutcome = {
          status: "requires_action",
          turn_id: turn.turnId,
          pending_calls: result.calls,
        };
        if (queue.length > 0) {
          const input = queue.splice(0).map((c) => [...c]);
          this.#carried = { turnId: turn.turnId, input };
          outcome.queued_input = input.map((c) => [...c]);
        }
        return outcome;
      }
      if (queue.length > 0) continue;
      this.#taskComplete(turn, result.lastMessage, startedAtMs);
      return { status: "completed", turn_id: turn.turnId, last_agent_message: result.lastMessage };
    }
  }

  /**
   * One model request. Finished output items are recorded as they arrive; text deltas are only
   * streamed. Once the signal aborts, nothing more is recorded (no half item: providers yield only
   * finished items) and the result says `interrupted`, whether the stream threw or ended.
   */
  async *#stream(
    client: ModelClient,
    prompt: ModelPrompt,
    turn: TurnContext,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<TurnEvent, StepResult> {
    const calls: FunctionCallItem[] = [];
    let lastMessage: string | undefined;
    let usage: TokenUsage | undefined;
    try {
      for await (const event of client.stream(prompt, signal)) {
        if (signal?.aborted) break;
        if (event.type === "output_text_delta") {
          yield { type: "item.delta", turn_id: turn.turnId, delta: event.delta };
        } else if (event.type === "output_item_done") {
          const item = this.#record(event.item, turn);
          if (item.type === "function_call") calls.push(item);
          if (isAssistantMessage(item)) lastMessage = messageText(item);
          yield { type: "item.completed", turn_id: turn.turnId, item, context: false };
        } else {
          usage = event.usage;
        }
      }
    } catch (err) {
      if (!signal?.aborted) throw err;
    }
    return { interrupted: signal?.aborted === true, calls, lastMessage, usage };
  }

  /**
   * Ends a turn interrupted by the caller (reference §5.4 step 8): the `<turn_aborted>` user
   * fragment goes into history as a `response_item` (turn id stamped), then `event_msg
   * turn_aborted {turn_id, reason: "interrupted"}`. Items recorded before the abort stay, function
   * calls among them unanswered (`forPrompt` pairs them with `aborted`). Queued steered input that
   * had not joined yet is dropped: the user stopped the turn on purpose.
   */
  async *#interrupt(
    turn: TurnContext,
    startedAtMs: number | undefined,
  ): AsyncGenerator<TurnEvent, TurnOutcome> {
    this.#running?.queue.splice(0);
    const item = this.#record(turnAbortedMessage(), turn);
    yield { type: "item.completed", turn_id: turn.turnId, item, context: true };
    this.#turnAborted(turn, startedAtMs);
    yield { type: "turn.interrupted", turn_id: turn.turnId, kind: "turn" };
    return { status: "interrupted", turn_id: turn.turnId };
  }

  /**
   * Interrupts a turn paused in `requires_action` (its client tools will not be answered): the
   * same `<turn_aborted>` fragment and `turn_aborted` line as an interrupt while sampling. The
   * pending calls stay in history unanswered (`forPrompt` pairs them with `aborted`).
   */
  interruptPausedTurn(turnId: string): ResponseItem {
    this.#assertIdle();
    this.#carried = undefined;
    const turn = this.#newTurnContext(turnId);
    const item = this.#record(turnAbortedMessage(), turn);
    this.#turnAborted(turn, undefined);
    return item;
  }

  /**
   * Ends a turn that will not go on: one paused in `requires_action` whose outputs will not come
   * because a new turn replaces it (`replaced`) or a rollback removes it, or one cut off when its
   * instance was lost (`interrupted`). A `turn_aborted` line only: unlike an interrupt nothing
   * joins history, and calls stay unanswered (`forPrompt` pairs them with `aborted`).
   */
  recordTurnAborted(turnId: string, reason: "replaced" | "interrupted"): void {
    this.#assertIdle();
    this.#turnAborted({ turnId }, undefined, reason);
  }

  #turnAborted(
    turn: Pick<TurnContext, "turnId">,
    startedAtMs: number | undefined,
    reason: "replaced" | "interrupted" = "interrupted",
  ): void {
    const completedAtMs = this.#deps.clock.nowMs();
    this.#deps.sink.append({
      type: "event_msg",
      payload: {
        type: "turn_aborted",
        turn_id: turn.turnId,
        reason,
        completed_at: Math.floor(completedAtMs / 1000),
        ...(startedAtMs === undefined ? {} : { duration_ms: completedAtMs - startedAtMs }),
      },
    });
  }
}

/**
 * Drains one model request into `onEvent`; returns true when it ended because `signal` aborted
 * (the stream threw or ended after the abort). Events after the abort are not delivered.
 */
async function streamModel(
  client: ModelClient,
  prompt: ModelPrompt,
  signal: AbortSignal | undefined,
  onEvent: (event: ModelEvent) => void,
): Promise<boolean> {
  if (signal?.aborted) return true;
  try {
    for await (const event of client.stream(prompt, signal)) {
      if (signal?.aborted) break;
      onEvent(event);
    }
  } catch (err) {
    if (!signal?.aborted) throw err;
  }
  return signal?.aborted === true;
}

/** A user message's content as the API accepts it: non-empty, `input_text`/`input_image` only. */
function checkUserContent(content: readonly ContentItem[], what: string): ContentItem[] {
  if (content.length === 0) throw new InvalidInputError(`${what}: content must not be empty`);
  return content.map((part) => {
    if (part.type === "input_text") return { type: "input_text", text: part.text };
    if (part.type === "input_image") {
      return part.detail === undefined
        ? { type: "input_image", image_url: part.image_url }
        : { type: "input_image", image_url: part.image_url, detail: part.detail };
    }
    throw new InvalidInputError(`${what}: user content takes input_text and input_image parts`);
  });
}

function turnIdOf(item: ResponseItem): string | undefined {
  if (item.type === "other") return undefined;
  return item.internal_chat_message_metadata_passthrough?.turn_id || undefined;
}

function isAssistantMessage(item: ResponseItem): item is MessageItem {
  return item.type === "message" && item.role === "assistant";
}

function messageText(item: MessageItem): string {
  return item.content.map((p) => ("text" in p ? p.text : "")).join("");
}

function userMessageEvent(content: readonly ContentItem[]) {
  return {
    type: "user_message" as const,
    message: content.map((p) => (p.type === "input_text" ? p.text : "")).join(""),
    images: content.flatMap((p) => (p.type === "input_image" ? [p.image_url] : [])),
    local_images: [],
    text_elements: [],
  };
}
