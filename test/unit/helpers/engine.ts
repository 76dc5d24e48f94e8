import { ContextManager } from "../../../shared/context-manager/index.ts";
import {
  DEFAULT_MODEL_CATALOG,
  DEFAULT_MODEL_SLUG,
  type ModelCatalog,
} from "../../../shared/models/index.ts";
import { type Clock, fixedClock, sequentialIds } from "../../../shared/ports/index.ts";
import type {
  FunctionCallItem,
  Prompt,
  RolloutItem,
  RolloutLine,
  ThreadConfig,
} from "../../../shared/protocol/index.ts";
import {
  LocalModelClient,
  type ModelClient,
  type ModelEvent,
  type ModelPrompt,
} from "../../../shared/providers/index.ts";
import { reconstructRollout } from "../../../shared/rollout/index.ts";
import {
  type EngineDeps,
  MemoryRolloutSink,
  type SessionState,
  ThreadSession,
  type ToolCallOutput,
  type TurnEvent,
  type TurnOutcome,
  truncationPolicyOf,
} from "../../../shared/session/index.ts";

/** 2026-03-01T12:00:00Z */
export const T0 = Date.UTC(2026, 2, 1, 12, 0, 0);

/** A model (the local one by default) that remembers every prompt it was sent. */
export class RecordingClient implements ModelClient {
  readonly prompts: Prompt[] = [];
  /** The same prompts with history's own item objects, for identity checks. */
  readonly received: Prompt[] = [];
  readonly #inner: ModelClient;
  constructor(inner: ModelClient = new LocalModelClient()) {
    this.#inner = inner;
  }
  stream(prompt: ModelPrompt, signal?: AbortSignal) {
    const plain = { ...prompt, input: prompt.input.toArray() };
    this.prompts.push(structuredClone(plain));
    this.received.push(plain);
    return this.#inner.stream(prompt, signal);
  }
}

export interface Harness {
  session: ThreadSession;
  sink: MemoryRolloutSink;
  client: RecordingClient;
  deps: EngineDeps;
}

export interface HarnessOptions {
  clock?: Clock;
  /** Serves every model request instead of the recording local model (which still records). */
  model?: ModelClient;
  /** Default: the built-in catalog. */
  catalog?: ModelCatalog;
  /** Default: a new one. */
  sink?: MemoryRolloutSink;
  requestSent?: EngineDeps["requestSent"];
}

export function newSession(
  config: ThreadConfig = {},
  stepMs = 1000,
  options: HarnessOptions = {},
): Harness {
  const sink = options.sink ?? new MemoryRolloutSink();
  const client = new RecordingClient(options.model);
  const deps: EngineDeps = {
    clock: options.clock ?? fixedClock(T0, stepMs),
    ids: sequentialIds("u"),
    catalog: options.catalog ?? DEFAULT_MODEL_CATALOG,
    defaultModel: DEFAULT_MODEL_SLUG,
    modelClient: () => client,
    sink,
    ...(options.requestSent ? { requestSent: options.requestSent } : {}),
  };
  return { session: ThreadSession.create(config, deps), sink, client, deps };
}

/**
 * A fresh session over a copy of `h`'s state and the same deps (sink, client, ids): what the
 * Durable Object has after an eviction and a rebuild from its checkpoint.
 */
export function rebuild(h: Harness): Harness {
  const { config, history, previousTurnSettings } = h.session.state;
  const state: SessionState = {
    config: structuredClone(config),
    history: new ContextManager(structuredClone(history.toState())),
  };
  if (previousTurnSettings !== undefined) state.previousTurnSettings = { ...previousTurnSettings };
  return { ...h, session: new ThreadSession(state, h.deps) };
}

/** Rollout items as stored lines (every line gets the same timestamp). */
export function asLines(items: readonly RolloutItem[]): RolloutLine[] {
  return items.map((item) => ({ timestamp: "2026-03-01T12:00:00.000Z", ...item }) as RolloutLine);
}

/**
 * A fresh session rebuilt from rollout items alone (default: all of `h`'s), with `h`'s
 * configuration and deps: a cold start that replays the rollout, or a fork of a prefix of it.
 */
export function replayed(h: Harness, items: readonly RolloutItem[] = h.sink.items): Harness {
  const config = structuredClone(h.session.state.config);
  const rebuilt = reconstructRollout(asLines(items), { truncation: truncationPolicyOf(config) });
  const state: SessionState = { config, history: new ContextManager(rebuilt.history) };
  if (rebuilt.previousTurnSettings !== undefined) {
    state.previousTurnSettings = rebuilt.previousTurnSettings;
  }
  return { ...h, session: new ThreadSession(state, h.deps) };
}

/** A clock the test sets by hand. */
export class ManualClock implements Clock {
  constructor(public ms: number) {}
  nowMs(): number {
    return this.ms;
  }
}

/** Drains a task's generator: every event and the outcome. */
export async function drain<R>(
  gen: AsyncGenerator<TurnEvent, R>,
): Promise<{ events: TurnEvent[]; outcome: R }> {
  const events: TurnEvent[] = [];
  for (;;) {
    const next = await gen.next();
    if (next.done) return { events, outcome: next.value };
    events.push(next.value);
  }
}

/** Resumes a paused turn with outputs and returns the outcome. */
export async function resume(
  h: Harness,
  outcome: TurnOutcome,
  outputs: (calls: FunctionCallItem[]) => ToolCallOutput[],
): Promise<TurnOutcome> {
  if (outcome.status !== "requires_action") throw new Error(`not paused: ${outcome.status}`);
  const gen = h.session.resumeTurn(
    outcome.turn_id,
    outcome.pending_calls,
    outputs(outcome.pending_calls),
  );
  return (await drain(gen)).outcome;
}

/** A model that streams one delta and then waits until the signal aborts (then throws, as a provider does). */
export class StallingClient implements ModelClient {
  started = 0;
  async *stream(_prompt: ModelPrompt, signal?: AbortSignal): AsyncIterable<ModelEvent> {
    this.started += 1;
    yield { type: "output_text_delta", delta: "Partial ans" };
    await new Promise<void>((_, reject) => {
      if (signal?.aborted) reject(signal.reason);
      signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
    yield { type: "output_text_delta", delta: "wer that never finishes" };
  }
}

/** Text of about `tokens` estimated tokens (4 bytes each). */
export function textOfTokens(tokens: number, fill = "lorem ipsum "): string {
  return fill.repeat(Math.ceil((tokens * 4) / fill.length)).slice(0, tokens * 4);
}

/** A declared client tool for `/call` tests. */
export const LOOKUP_TOOL = {
  type: "function" as const,
  name: "lookup",
  description: "find things",
  parameters: { type: "object" },
};

export function text(t: string) {
  return { content: [{ type: "input_text" as const, text: t }] };
}

/** Runs a turn to its end and returns the outcome. */
export async function runTurn(
  h: Harness,
  input: string,
  overrides?: ThreadConfig,
): Promise<TurnOutcome> {
  const gen = h.session.runTurn(text(input), overrides);
  for (;;) {
    const next = await gen.next();
    if (next.done) return next.value;
  }
}

/** `type` or `type/subtype` of each rollout item, for order assertions. */
export function shapeOf(items: readonly RolloutItem[]): string[] {
  return items.map((i) => {
    if (i.type === "event_msg") return `event_msg/${i.payload.type}`;
    if (i.type === "response_item" && i.payload.type === "message") {
      return `response_item/${i.payload.role}`;
    }
    if (i.type === "response_item") return `response_item/${i.payload.type}`;
    return i.type;
  });
}

/** The lines a turn wrote from `from` (its `task_started`) up to its user message, both left out. */
export function contextLinesOf(items: readonly RolloutItem[], from: number): RolloutItem[] {
  const lines = items.slice(from);
  const user = lines.findIndex((l) => l.type === "event_msg" && l.payload.type === "user_message");
  // The user's response_item comes right before its user_message event.
  return lines.slice(1, user - 1);
}

/** The lines of a turn that sends no context and answers in one step. */
export const QUIET_TURN_LINES = [
  "event_msg/task_started",
  "turn_context",
  "response_item/user",
  "event_msg/user_message",
  "spindle_request",
  "response_item/assistant",
  "event_msg/token_count",
  "event_msg/task_complete",
];

/** The lines of an automatic compaction task before a turn (it re-injects the turn's context). */
export const AUTO_COMPACTION_TASK_LINES = [
  "event_msg/task_started",
  "spindle_request",
  "compacted",
  "world_state",
  "turn_context",
  "event_msg/token_count",
  "event_msg/task_complete",
];

/** Serialized prompt input without its closing bracket: a byte-prefix test on the JSON. */
export function isBytePrefix(earlier: Prompt, later: Prompt): boolean {
  const a = JSON.stringify(earlier.input).slice(0, -1);
  return JSON.stringify(later.input).startsWith(a);
}
