import { ContextManager, frozenItem } from "../context-manager/index.ts";
import type { ServerTool } from "../mcp/index.ts";
import type { ModelInfo } from "../models/index.ts";
import type {
  ContentItem,
  FunctionCallItem,
  KnownResponseItem,
  Prompt,
  ResponseItem,
  SessionConfiguration,
  ThreadConfig,
} from "../protocol/index.ts";
import { checkUserContent, clientItems } from "./client-items.ts";
import type { CompactionTrigger } from "./compaction.ts";
import { autoCompactionModel, contextTokens, runCompaction } from "./compaction-task.ts";
import { resolveSessionConfiguration } from "./configuration.ts";
import { assertContextFits } from "./context-fit.ts";
import { previousTurnSettingsOf, recordContextUpdates, withTurnId } from "./context-updates.ts";
import { InvalidInputError, SessionBusyError, TurnNotSteerableError } from "./errors.ts";
import { turnAbortedMessage } from "./notices.ts";
import { buildPrompt, modelVisiblePrompt } from "./prompt.ts";
import { type PlannedWork, reservation } from "./reservation.ts";
import { recordUserInput, sampleTurn } from "./sampling.ts";
import {
  deniedOutput,
  runServerCalls,
  type ServerCall,
  usesServerTools,
  withServerTools,
} from "./server-calls.ts";
import { taskStartedLine, turnAbortedLine } from "./task-lines.ts";
import type {
  CompactionOutcome,
  EngineDeps,
  PendingCallAnswer,
  SessionState,
  TaskKind,
  TaskScope,
  TurnEvent,
  TurnOutcome,
  UserInput,
} from "./task-scope.ts";
import { checkToolOutputs } from "./tool-calls.ts";
import {
  buildTurnContext,
  captureStepContext,
  type TurnContext,
  truncationPolicyOf,
} from "./turn-context.ts";

export type {
  ApprovalDecision,
  CompactionOutcome,
  EngineDeps,
  PendingCallAnswer,
  SentRequest,
  SessionState,
  TaskKind,
  ToolCallOutput,
  TurnEvent,
  TurnOutcome,
  UserInput,
} from "./task-scope.ts";

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
interface SessionTask {
  readonly turnId: string;
  readonly kind: TaskKind;
  /** Steered input waiting for the next sampling step. */
  readonly queue: ContentItem[][];
}

/**
 * One thread's turn engine (design §5). Owns the ContextManager and the configuration; writes every
 * rollout item through the synchronous sink at the moment it changes memory. The sampling loop
 * (`sampling.ts`), the compaction task (`compaction-task.ts`) and the checks of tool outputs
 * (`tool-calls.ts`) are its parts, each in a file of its own.
 *
 * One task (turn or compaction) runs at a time: `runTurn`, `resumeTurn`, `compact`, `inject` and
 * `recordRollback` throw `SessionBusyError` while another task runs; `steer` is the only way to
 * reach a running turn. The caller serializes requests; this guard catches mistakes.
 */
export class ThreadSession {
  readonly state: SessionState;
  readonly #deps: EngineDeps;
  #running: SessionTask | undefined;
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

  /** What the running task's parts (sampling, compaction) may do to this session. */
  #scope(): TaskScope {
    return {
      state: this.state,
      deps: this.#deps,
      model: (slug) => this.#model(slug),
      record: (item, turn) => this.#record(item, turn),
      withId: (item) => this.#withId(item),
      queue: this.#running?.queue ?? [],
      carry: (turnId, input) => {
        this.#carried = { turnId, input };
      },
    };
  }

  #assertIdle(): void {
    if (this.#running !== undefined) throw new SessionBusyError(this.#running.turnId);
  }

  /**
   * Applies a turn's overrides (they become the new defaults) once the turn's input is known to
   * fit (`ContextWindowExceededError`, the configuration unchanged, otherwise).
   */
  #applyOverrides(overrides: ThreadConfig | undefined, input?: UserInput): void {
    const { catalog, defaultModel } = this.#deps;
    const next =
      overrides === undefined
        ? this.state.config
        : resolveSessionConfiguration(this.state.config, overrides, catalog, defaultModel);
    if (input !== undefined) this.#checkInputFits(next, input);
    this.state.config = next;
  }

  /** A turn whose smallest possible prompt cannot fit is refused before anything is recorded. */
  #checkInputFits(config: SessionConfiguration, input: UserInput): void {
    const model = this.#model(config.model);
    const previousModel = this.state.previousTurnSettings?.model;
    assertContextFits(config, model, this.#deps.clock.nowMs(), previousModel, input.content, [
      ...(input.replayed ?? []),
    ]);
  }

  /** `additionalContext`: a new turn's (`{}` when its request has none); undefined when resuming. */
  #newTurnContext(
    turnId: string,
    additionalContext?: UserInput["additional_context"],
  ): TurnContext {
    const config = this.state.config;
    const model = this.#model(config.model);
    return buildTurnContext(turnId, config, model, this.#deps.clock.nowMs(), additionalContext);
  }

  /** Applies overrides (they become the new defaults) and freezes the turn's settings. */
  startTurnContext(overrides: ThreadConfig | undefined): TurnContext {
    this.#applyOverrides(overrides);
    return this.#newTurnContext(`turn_${this.#deps.ids.uuidv7()}`);
  }

  /**
   * The tokens the context holds now, as auto-compaction measures them (`contextTokens`): what an
   * idle compaction's `min_context_tokens` is compared with.
   */
  contextTokens(): number {
    return contextTokens(this.state, this.#model(this.state.config.model));
  }

  /**
   * The tokens `work` may use (input and output of every request it makes, estimated from above:
   * `reservation.ts`), what a `tokens_per_day` admission reserves for it. Reads only.
   */
  reservation(work: PlannedWork): number {
    return reservation(this.state, this.#deps, work);
  }

  /**
   * The prompt the next sampling step would send with the current configuration, as the model
   * sees it: the client tools, then `serverTools` (`captureServerTools`).
   */
  previewPrompt(serverTools: readonly ServerTool[] = []): Prompt {
    const turn = buildTurnContext(
      "preview",
      this.state.config,
      this.#model(this.state.config.model),
      this.#deps.clock.nowMs(),
    );
    const captured = captureStepContext(turn, this.#deps.clock.nowMs(), undefined);
    const tools = [...captured.tools, ...serverTools.map((t) => t.spec)];
    return modelVisiblePrompt(buildPrompt(this.history, turn, { ...captured, tools }));
  }

  /**
   * The MCP servers' tools a step would offer now, under the current configuration (from the
   * listing cache while it is fresh). Reads only: the capture's warnings are not recorded.
   */
  async captureServerTools(signal?: AbortSignal): Promise<readonly ServerTool[]> {
    const refs = this.state.config.mcp_servers ?? [];
    const port = this.#deps.serverTools;
    if (refs.length === 0 || port === undefined) return [];
    return (await port.capture(refs, this.state.config.tools, signal)).tools;
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

  /**
   * Runs one turn: `task_started`, context updates (full or diff), the user input and its
   * `user_message` event, then sampling until the model answers without a tool call
   * (`task_complete`) or calls client tools (`requires_action`, resumed by `resumeTurn`).
   *
   * Overrides are applied first (they become the new defaults), unless the input cannot fit the
   * model's window even after a compaction (`ContextWindowExceededError`, nothing changed). Then,
   * when the estimated context is above `auto_compact_fraction` (default 0.9) × the turn model's
   * window, an `auto` compaction runs as a task of its own — its own turn id, `task_started` …
   * `task_complete` — before this turn's `task_started`, and re-injects the context this turn
   * would send above the last real user message, so the turn itself sends only its input.
   * (Codex compacts inside the turn, after `task_started`; a separate task keeps one
   * task_started/task_complete pair per turn id and keeps the compaction's lines out of the
   * turn.) If that compaction is interrupted, the user turn does not start and the outcome is the
   * compaction's `interrupted`. Later steps of the turn compact within it when the context passes
   * the limit again (`sampleTurn`).
   *
   * Steered input (`steer`) joins at each sampling step; an abort of `signal` ends the turn as
   * `interrupted`. A turn left in `requires_action` is abandoned by starting a new one: its calls
   * stay unanswered in history and `forPrompt` pairs them with `aborted`.
   */
  async *runTurn(
    input: UserInput,
    overrides?: ThreadConfig,
    signal?: AbortSignal,
    options: { turnId?: string } = {},
  ): AsyncGenerator<TurnEvent, TurnOutcome> {
    this.#assertIdle();
    input = { ...input, replayed: clientItems(input.replayed ?? [], "replayed") };
    if (input.content.length === 0 && input.replayed?.length === 0) {
      throw new InvalidInputError("a turn needs input: a user message or replayed items");
    }
    this.#applyOverrides(overrides, input);
    this.#carried = undefined;
    const current = this.#model(this.state.config.model);
    const compaction = autoCompactionModel(this.state, current, this.#deps.catalog);
    if (compaction !== undefined) {
      const outcome = yield* this.#compactTask("auto", compaction, signal);
      if (outcome.status === "interrupted") return outcome;
    }

    const { sink, clock, ids } = this.#deps;
    // A caller may fix the id up front (a queued or streamed turn is addressed before it starts).
    const turnId = options.turnId ?? `turn_${ids.uuidv7()}`;
    const turn = this.#newTurnContext(turnId, input.additional_context ?? {});
    this.#running = { turnId: turn.turnId, kind: "turn", queue: [] };
    try {
      const startedAtMs = clock.nowMs();
      sink.append(taskStartedLine(turn, startedAtMs));
      yield { type: "turn.started", turn_id: turn.turnId, kind: "turn" };

      const warned = new Set<string>();
      const captured = captureStepContext(
        turn,
        clock.nowMs(),
        this.state.previousTurnSettings?.model,
      );
      const step = usesServerTools(this.#scope(), turn)
        ? yield* withServerTools(this.#scope(), turn, captured, warned, signal)
        : captured;
      const update = recordContextUpdates(this.history, turn, step, sink);
      for (const item of update.items) {
        yield { type: "item.completed", turn_id: turn.turnId, item, context: true };
      }

      for (const item of input.replayed ?? []) {
        const replayed = this.#record(item, turn);
        yield { type: "item.completed", turn_id: turn.turnId, item: replayed, context: false };
      }
      if (input.content.length > 0) {
        const recorded = recordUserInput(this.#scope(), input.content, turn);
        yield { type: "item.completed", turn_id: turn.turnId, item: recorded, context: false };
      }
      this.state.previousTurnSettings = previousTurnSettingsOf(turn);

      return yield* sampleTurn(this.#scope(), turn, step, startedAtMs, signal, warned);
    } finally {
      this.#running = undefined;
    }
  }

  /**
   * The checks of `resumeTurn`, for callers that want to answer 4xx before opening a stream:
   * `SessionBusyError`, then those of `checkToolOutputs` (`tool-calls.ts`).
   */
  checkResume(
    turnId: string,
    pendingCalls: readonly FunctionCallItem[],
    outputs: readonly PendingCallAnswer[],
  ): void {
    this.#assertIdle();
    checkToolOutputs(this.history, turnId, pendingCalls, outputs);
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
    outputs: readonly PendingCallAnswer[],
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
      const byCallId = new Map(outputs.map((o) => [o.call_id, o]));
      const approved: ServerCall[] = [];
      for (const call of pendingCalls) {
        const answer = byCallId.get(call.call_id);
        if (answer === undefined) continue;
        if ("request" in answer && answer.approve) {
          approved.push({
            call,
            tool: { label: answer.request.server_label, tool: answer.request.name },
          });
          continue;
        }
        const output =
          "request" in answer ? deniedOutput(answer.request, answer.reason) : answer.output;
        const item = this.#record(
          { type: "function_call_output", call_id: call.call_id, output },
          turn,
        );
        yield { type: "item.completed", turn_id: turnId, item, context: false };
      }
      if (approved.length > 0) yield* runServerCalls(this.#scope(), turn, approved, signal);
      return yield* sampleTurn(this.#scope(), turn, undefined, undefined, signal);
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
   * Records client items without a turn (reference §5.5): each as a `response_item` line, with
   * an id but no turn id; no `task_started`, `turn_context` or `user_message`, and the reference
   * context item and world-state baseline stay as they are. Non-contextual user messages are
   * user-turn boundaries, so rollback counts them. The items are what `clientItems` accepts
   * (messages of any role, function calls and outputs, reasoning), rebuilt from their fields:
   * ids and metadata the caller sent are not kept. The list must not be empty
   * (`InvalidInputError`). Returns the recorded items.
   */
  inject(items: readonly ResponseItem[]): ResponseItem[] {
    this.#assertIdle();
    if (items.length === 0) throw new InvalidInputError("inject needs at least one item");
    return clientItems(items, "inject").map((item) => this.#record(item, undefined));
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
   * (`history.replace`: history_version + 1, baseline cleared); a `manual` one clears the reference
   * context item so the next turn re-injects the full context after the summary (an `auto` one
   * re-injects it above the last real user message, see `runCompaction`); then `compacted
   * {message, replacement_history}`, a `token_count` (the request's usage added to the totals, the
   * last usage re-estimated from the new history) and `task_complete`. `options.turnId` names the
   * task (default: a new `turn_…` id), as for `runTurn`.
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

  /** Runs a compaction task under its own turn id (`runCompaction`), as the running task. */
  async *#compactTask(
    trigger: CompactionTrigger,
    summarizer: ModelInfo,
    signal: AbortSignal | undefined,
    givenTurnId?: string,
  ): AsyncGenerator<TurnEvent, CompactionOutcome> {
    const turnId = givenTurnId ?? `turn_${this.#deps.ids.uuidv7()}`;
    this.#running = { turnId, kind: "compaction", queue: [] };
    try {
      return yield* runCompaction(this.#scope(), trigger, summarizer, signal, turnId);
    } finally {
      this.#running = undefined;
    }
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
    this.#deps.sink.append(turnAbortedLine(turnId, "interrupted", this.#deps.clock.nowMs()));
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
    this.#deps.sink.append(turnAbortedLine(turnId, reason, this.#deps.clock.nowMs()));
  }
}
