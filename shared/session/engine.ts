import { ContextManager } from "../context-manager/index.ts";
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
} from "../protocol/index.ts";
import type { ModelClient } from "../providers/index.ts";
import { resolveSessionConfiguration } from "./configuration.ts";
import { previousTurnSettingsOf, recordContextUpdates, withTurnId } from "./context-updates.ts";
import { buildPrompt } from "./prompt.ts";
import type { RolloutSink } from "./rollout-sink.ts";
import {
  buildTurnContext,
  captureStepContext,
  type StepContext,
  type TurnContext,
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

export type TurnEvent =
  | { type: "turn.started"; turn_id: string }
  | { type: "item.completed"; turn_id: string; item: ResponseItem; context: boolean }
  | { type: "item.delta"; turn_id: string; delta: string }
  | { type: "token_count"; turn_id: string; info: TokenUsageInfo | undefined };

export type TurnOutcome =
  | { status: "completed"; turn_id: string; last_agent_message: string | undefined }
  | { status: "requires_action"; turn_id: string; pending_calls: FunctionCallItem[] };

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

/**
 * One thread's turn engine (design §5). Owns the ContextManager and the configuration; writes every
 * rollout item through the synchronous sink at the moment it changes memory.
 */
export class ThreadSession {
  readonly state: SessionState;
  readonly #deps: EngineDeps;

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

  #model(slug: string): ModelInfo {
    const model = this.#deps.catalog.get(slug);
    if (model === undefined) throw new Error(`model ${slug} left the catalog`);
    return model;
  }

  /** Applies overrides (they become the new defaults) and freezes the turn's settings. */
  startTurnContext(overrides: ThreadConfig | undefined): TurnContext {
    const { catalog, defaultModel, clock, ids } = this.#deps;
    if (overrides !== undefined) {
      this.state.config = resolveSessionConfiguration(
        this.state.config,
        overrides,
        catalog,
        defaultModel,
      );
    }
    const config = this.state.config;
    return buildTurnContext(
      `turn_${ids.uuidv7()}`,
      config,
      this.#model(config.model),
      clock.nowMs(),
    );
  }

  /** The prompt the next sampling step would send with the current configuration. */
  previewPrompt(): Prompt {
    const turn = buildTurnContext(
      "preview",
      this.state.config,
      this.#model(this.state.config.model),
      this.#deps.clock.nowMs(),
    );
    return buildPrompt(
      this.history,
      turn,
      captureStepContext(turn, this.#deps.clock.nowMs(), undefined),
    );
  }

  #record(item: ResponseItem, turn: TurnContext): ResponseItem {
    const stamped = withTurnId(this.#withId(item), turn.turnId);
    this.history.recordItems([stamped], turn.truncationPolicy);
    this.#deps.sink.append({ type: "response_item", payload: stamped });
    return stamped;
  }

  #withId<T extends ResponseItem>(item: T): T {
    if (item.type === "other" || item.id) return item;
    const prefix = ID_PREFIXES[item.type];
    return prefix ? { ...item, id: `${prefix}_${this.#deps.ids.uuidv7()}` } : item;
  }

  /**
   * Runs one turn: `task_started`, context updates (full or diff), the user input and its
   * `user_message` event, then sampling until the model answers without a tool call
   * (`task_complete`) or calls client tools (`requires_action`, resumed by the caller).
   */
  async *runTurn(
    input: UserInput,
    overrides?: ThreadConfig,
    signal?: AbortSignal,
  ): AsyncGenerator<TurnEvent, TurnOutcome> {
    const { sink, clock } = this.#deps;
    const turn = this.startTurnContext(overrides);
    const startedAtMs = clock.nowMs();
    sink.append({
      type: "event_msg",
      payload: {
        type: "task_started",
        turn_id: turn.turnId,
        started_at: Math.floor(startedAtMs / 1000),
        model_context_window: turn.model.contextWindowTokens,
        collaboration_mode_kind: turn.config.collaboration_mode?.mode ?? "default",
      },
    });
    yield { type: "turn.started", turn_id: turn.turnId };

    const step = captureStepContext(turn, clock.nowMs(), this.state.previousTurnSettings?.model);
    const update = recordContextUpdates(this.history, turn, step, sink);
    for (const item of update.items) {
      yield { type: "item.completed", turn_id: turn.turnId, item, context: true };
    }

    const userItem: MessageItem = { type: "message", role: "user", content: [...input.content] };
    const recorded = this.#record(userItem, turn);
    sink.append({ type: "event_msg", payload: userMessageEvent(input.content) });
    yield { type: "item.completed", turn_id: turn.turnId, item: recorded, context: false };
    this.state.previousTurnSettings = previousTurnSettingsOf(turn);

    return yield* this.#sample(turn, step, startedAtMs, signal);
  }

  async *#sample(
    turn: TurnContext,
    step: StepContext,
    startedAtMs: number,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<TurnEvent, TurnOutcome> {
    const { sink, clock } = this.#deps;
    const client = this.#deps.modelClient(turn.model, turn.config.provider);
    for (;;) {
      const prompt = buildPrompt(this.history, turn, step);
      const calls: FunctionCallItem[] = [];
      let lastMessage: string | undefined;
      let usage: TokenUsage | undefined;
      for await (const event of client.stream(prompt, signal)) {
        if (event.type === "output_text_delta") {
          yield { type: "item.delta", turn_id: turn.turnId, delta: event.delta };
        } else if (event.type === "output_item_done") {
          const item = this.#record(event.item, turn);
          if (item.type === "function_call") calls.push(item);
          if (item.type === "message" && item.role === "assistant") lastMessage = messageText(item);
          yield { type: "item.completed", turn_id: turn.turnId, item, context: false };
        } else {
          usage = event.usage;
        }
      }
      this.history.updateTokenInfo(usage, turn.model.contextWindowTokens);
      const info = this.history.tokenInfo;
      sink.append({
        type: "event_msg",
        payload: { type: "token_count", info: info ?? null, rate_limits: null },
      });
      yield { type: "token_count", turn_id: turn.turnId, info };

      if (calls.length > 0)
        return { status: "requires_action", turn_id: turn.turnId, pending_calls: calls };
      const completedAtMs = clock.nowMs();
      sink.append({
        type: "event_msg",
        payload: {
          type: "task_complete",
          turn_id: turn.turnId,
          last_agent_message: lastMessage ?? null,
          completed_at: Math.floor(completedAtMs / 1000),
          duration_ms: completedAtMs - startedAtMs,
        },
      });
      return { status: "completed", turn_id: turn.turnId, last_agent_message: lastMessage };
    }
  }
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
