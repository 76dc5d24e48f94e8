import type { ModelEvent } from "../../../../shared/providers/index.ts";
import {
  OpenAIChatClient,
  type OpenAIChatClientConfig,
} from "../../../../shared/providers/index.ts";

export { assistant, drain, LOOKUP, prompt, user } from "../prompts.ts";

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

/** The items of the `output_item_done` events. */
export const itemsOf = (events: ModelEvent[]) =>
  events.flatMap((e) => (e.type === "output_item_done" ? [e.item] : []));

/** The text of the `output_text_delta` events, in order. */
export const deltasOf = (events: ModelEvent[]) =>
  events.flatMap((e) => (e.type === "output_text_delta" ? [e.delta] : []));
