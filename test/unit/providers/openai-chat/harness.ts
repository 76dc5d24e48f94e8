import { PromptInput } from "../../../../shared/context-manager/index.ts";
import type { FunctionTool, KnownResponseItem } from "../../../../shared/protocol/index.ts";
import {
  type ModelEvent,
  type ModelPrompt,
  OpenAIChatClient,
  type OpenAIChatClientConfig,
} from "../../../../shared/providers/index.ts";

export const user = (text: string): KnownResponseItem => ({
  type: "message",
  role: "user",
  content: [{ type: "input_text", text }],
});

export const assistant = (text: string): KnownResponseItem => ({
  type: "message",
  role: "assistant",
  content: [{ type: "output_text", text }],
});

export const LOOKUP: FunctionTool = {
  type: "function",
  name: "lookup",
  description: "find things",
  parameters: { type: "object", properties: { q: { type: "string" } } },
};

export function prompt(
  input: KnownResponseItem[] = [user("hi")],
  extra: Partial<ModelPrompt> = {},
): ModelPrompt {
  return {
    instructions: "be helpful",
    input: PromptInput.of(input),
    tools: [],
    parallel_tool_calls: true,
    ...extra,
  };
}

export interface Harness {
  client: OpenAIChatClient;
  sleeps: number[];
}

export function harness(baseUrl: string, overrides: Partial<OpenAIChatClientConfig> = {}): Harness {
  const sleeps: number[] = [];
  const client = new OpenAIChatClient({
    fetch: (input, init) => fetch(input, init),
    baseUrl,
    apiKey: "sk-test-chat",
    model: "qwen3-test",
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    random: () => 0.5,
    clock: { nowMs: () => Date.UTC(2030, 0, 1) },
    ...overrides,
  });
  return { client, sleeps };
}

/** Drains the stream; returns what was yielded and what it threw (if anything). */
export async function drain(
  client: OpenAIChatClient,
  p: ModelPrompt = prompt(),
  signal?: AbortSignal,
  onEvent?: (e: ModelEvent) => void,
): Promise<{ events: ModelEvent[]; error: unknown }> {
  const events: ModelEvent[] = [];
  try {
    for await (const e of client.stream(p, signal)) {
      events.push(e);
      onEvent?.(e);
    }
    return { events, error: undefined };
  } catch (error) {
    return { events, error };
  }
}

/** The items of the `output_item_done` events. */
export const itemsOf = (events: ModelEvent[]) =>
  events.flatMap((e) => (e.type === "output_item_done" ? [e.item] : []));

/** The text of the `output_text_delta` events, in order. */
export const deltasOf = (events: ModelEvent[]) =>
  events.flatMap((e) => (e.type === "output_text_delta" ? [e.delta] : []));
