import { DEFAULT_MODEL_CATALOG, DEFAULT_MODEL_SLUG } from "../../../shared/models/index.ts";
import { fixedClock, sequentialIds } from "../../../shared/ports/index.ts";
import type { Prompt, RolloutItem, ThreadConfig } from "../../../shared/protocol/index.ts";
import { LocalModelClient, type ModelClient } from "../../../shared/providers/index.ts";
import {
  type EngineDeps,
  MemoryRolloutSink,
  ThreadSession,
  type TurnOutcome,
} from "../../../shared/session/index.ts";

/** 2026-03-01T12:00:00Z */
export const T0 = Date.UTC(2026, 2, 1, 12, 0, 0);

/** A local model that remembers every prompt it was sent. */
export class RecordingClient implements ModelClient {
  readonly prompts: Prompt[] = [];
  readonly #inner = new LocalModelClient();
  stream(prompt: Prompt, signal?: AbortSignal) {
    this.prompts.push(structuredClone(prompt));
    return this.#inner.stream(prompt, signal);
  }
}

export interface Harness {
  session: ThreadSession;
  sink: MemoryRolloutSink;
  client: RecordingClient;
  deps: EngineDeps;
}

export function newSession(config: ThreadConfig = {}, stepMs = 1000): Harness {
  const sink = new MemoryRolloutSink();
  const client = new RecordingClient();
  const deps: EngineDeps = {
    clock: fixedClock(T0, stepMs),
    ids: sequentialIds("u"),
    catalog: DEFAULT_MODEL_CATALOG,
    defaultModel: DEFAULT_MODEL_SLUG,
    modelClient: () => client,
    sink,
  };
  return { session: ThreadSession.create(config, deps), sink, client, deps };
}

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

/** Serialized prompt input without its closing bracket: a byte-prefix test on the JSON. */
export function isBytePrefix(earlier: Prompt, later: Prompt): boolean {
  const a = JSON.stringify(earlier.input).slice(0, -1);
  return JSON.stringify(later.input).startsWith(a);
}
