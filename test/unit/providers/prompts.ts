/** What the provider unit tests build prompts from, and how they read a client's stream. */
import { PromptInput } from "../../../shared/context-manager/index.ts";
import type { FunctionTool, KnownResponseItem } from "../../../shared/protocol/index.ts";
import type { ModelClient, ModelEvent, ModelPrompt } from "../../../shared/providers/index.ts";

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

/** Drains the stream; returns what was yielded and what it threw (if anything). */
export async function drain(
  client: ModelClient,
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
