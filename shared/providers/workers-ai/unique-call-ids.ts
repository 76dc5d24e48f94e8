import type { ModelClient, ModelEvent, ModelPrompt } from "../model-client.ts";

/**
 * A client whose function calls never reuse a call id of the prompt or of each other. Workers
 * AI hands out the same tool-call ids again in later turns (reference providers.md §3.3), and
 * a thread pairs each output with its call by `call_id` across its whole history: a repeated id
 * is given a suffix (`_2`, `_3`, …) before the call is recorded, and the model sees it renamed
 * from then on.
 */
export function withUniqueCallIds(client: ModelClient): ModelClient {
  return {
    async *stream(prompt: ModelPrompt, signal?: AbortSignal): AsyncGenerator<ModelEvent> {
      const taken = new Set<string>();
      for (const item of prompt.input.toArray()) {
        if (item.type === "function_call") taken.add(item.call_id);
      }
      for await (const event of client.stream(prompt, signal)) {
        if (event.type !== "output_item_done" || event.item.type !== "function_call") {
          yield event;
          continue;
        }
        let id = event.item.call_id;
        for (let n = 2; taken.has(id); n++) id = `${event.item.call_id}_${n}`;
        taken.add(id);
        yield id === event.item.call_id
          ? event
          : { ...event, item: { ...event.item, call_id: id } };
      }
    },
  };
}
