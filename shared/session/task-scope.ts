import type { ContextManager, PromptInput } from "../context-manager/index.ts";
import type { ServerTools, ServerToolWarning } from "../mcp/index.ts";
import type { ModelCatalog, ModelInfo } from "../models/index.ts";
import type { Clock, IdSource } from "../ports/index.ts";
import type {
  ContentItem,
  FunctionCallItem,
  McpApprovalRequest,
  ModelRequestLine,
  PreviousTurnSettings,
  ResponseItem,
  SessionConfiguration,
  TokenUsageInfo,
  ToolOutput,
} from "../protocol/index.ts";
import type { ModelClient } from "../providers/index.ts";
import type { CompactionTrigger } from "./compaction.ts";
import type { RequestChannels } from "./request-lines.ts";
import type { RolloutSink } from "./rollout-sink.ts";
import type { TurnContext } from "./turn-context.ts";

/** Everything the engine needs from outside, passed in (design §2: the core never reaches out). */
export interface EngineDeps {
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly catalog: ModelCatalog;
  readonly defaultModel: string;
  readonly modelClient: (model: ModelInfo, provider: string) => ModelClient;
  readonly sink: RolloutSink;
  /** The thread's MCP servers; absent: a step offers client tools only. */
  readonly serverTools?: ServerTools;
  /**
   * Whether the tenant's quotas admit the model request of a turn's next round, after its server
   * calls ran (the turn's admission reserved its first request only). Undefined: admitted at once.
   */
  readonly admitRound?: () => Promise<boolean> | undefined;
  /** Called right after a request's `spindle_request` line is written, before it is sent. */
  readonly requestSent?: (request: SentRequest) => void;
}

/** A provider request the engine is about to send: its model, channels and input. */
export interface SentRequest {
  readonly model: string;
  readonly kind: ModelRequestLine["kind"];
  readonly instructions: string;
  readonly tools: readonly unknown[];
  /** History's own frozen items, in order, stored runs unread. */
  readonly input: PromptInput;
}

/** A thread's live state: what a checkpoint or a replay restores. */
export interface SessionState {
  config: SessionConfiguration;
  history: ContextManager;
  /** undefined: no real user turn has run yet (or none survived a rollback). */
  previousTurnSettings?: PreviousTurnSettings;
  /** The channels of the newest `spindle_request` line written since the load (`recordModelRequest`). */
  lastRequest?: RequestChannels;
}

export interface UserInput {
  /** The user message's parts; empty only when `replayed` is not (the turn then records none). */
  readonly content: readonly ContentItem[];
  /**
   * Items a client sends again before the new input (a transcript replayed whole, or items it
   * adds), recorded in order after the context and before the user message (`clientItems`).
   */
  readonly replayed?: readonly ResponseItem[];
  /**
   * The turn's additional context (Codex's `additional_context`): key → value, each sent as
   * `<external_{key}>` before the input while it is new, changed or no longer in history.
   */
  readonly additional_context?: Readonly<Record<string, string>>;
}

/** The output a client posts for one pending function call. */
export interface ToolCallOutput {
  readonly call_id: string;
  readonly output: ToolOutput;
}

/** A person's answer to a server call held for approval (`mcp_approval_response`). */
export interface ApprovalDecision {
  readonly call_id: string;
  readonly request: McpApprovalRequest;
  readonly approve: boolean;
  readonly reason?: string;
}

/** What resumes a paused turn: one answer per pending call. */
export type PendingCallAnswer = ToolCallOutput | ApprovalDecision;

/** A task is a user turn or a compaction; each has its own turn id and task_started/_complete. */
export type TaskKind = "turn" | "compaction";

/**
 * What the engine streams while a task runs (design §7 SSE events). `turn.completed` and
 * `turn.requires_action` are not events: the generator's return value (the outcome) carries them.
 */
export type TurnEvent =
  /** `trigger`: what started a compaction task (absent for a user turn). */
  | { type: "turn.started"; turn_id: string; kind: TaskKind; trigger?: CompactionTrigger }
  /** Every item recorded into history; `context` flags context items (initial context, diffs, `<turn_aborted>`). */
  | { type: "item.completed"; turn_id: string; item: ResponseItem; context: boolean }
  /** Streamed model text of the message `item_id` (the id its `item.completed` will carry). */
  | { type: "item.delta"; turn_id: string; item_id: string; delta: string }
  | { type: "token_count"; turn_id: string; info: TokenUsageInfo | undefined }
  /** Tools a step could not offer (an MCP server unreachable, a tool left out); once per turn each. */
  | { type: "turn.warning"; turn_id: string; warning: ServerToolWarning }
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
      /** The calls the turn waits on: the client's, and server calls held for approval. */
      pending_calls: FunctionCallItem[];
      /** The approval requests of the held server calls (present only when non-empty). */
      pending_approvals?: McpApprovalRequest[];
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

/**
 * What a running task may do to its session: the parts of `ThreadSession` that the sampling loop
 * and the compaction task (each in its own file) work through. Internal to `shared/session/`.
 */
export interface TaskScope {
  readonly state: SessionState;
  readonly deps: EngineDeps;
  /** The catalog entry of `slug` (it must be there: configurations are resolved against it). */
  model(slug: string): ModelInfo;
  /**
   * Records one item into history (id assigned, turn id stamped, tool output truncated) and as a
   * `response_item` line; returns the item as history holds it.
   */
  record(item: ResponseItem, turn: TurnContext | undefined): ResponseItem;
  /** The item with a session-assigned id when it has none. */
  withId<T extends ResponseItem>(item: T): T;
  /** Steered input waiting for the running turn's next sampling step. */
  readonly queue: ContentItem[][];
  /** Keeps steered input a turn paused with, for its resume. */
  carry(turnId: string, input: ContentItem[][]): void;
}
