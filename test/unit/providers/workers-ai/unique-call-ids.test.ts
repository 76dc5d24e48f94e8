import { describe, expect, it } from "vitest";
import { PromptInput } from "../../../../shared/context-manager/index.ts";
import type { KnownResponseItem } from "../../../../shared/protocol/index.ts";
import type { ModelClient, ModelEvent, ModelPrompt } from "../../../../shared/providers/index.ts";
import { withUniqueCallIds } from "../../../../shared/providers/workers-ai/unique-call-ids.ts";

const call = (call_id: string): KnownResponseItem => ({
  type: "function_call",
  name: "lookup",
  arguments: "{}",
  call_id,
});

function promptWith(items: KnownResponseItem[]): ModelPrompt {
  return {
    instructions: "",
    input: PromptInput.of(items),
    tools: [],
    parallel_tool_calls: true,
  };
}

/** A client that answers every request with `events`. */
const answering = (events: ModelEvent[]): ModelClient => ({
  async *stream() {
    yield* events;
  },
});

async function collect(client: ModelClient, prompt: ModelPrompt): Promise<ModelEvent[]> {
  const out: ModelEvent[] = [];
  for await (const event of client.stream(prompt)) out.push(event);
  return out;
}

const idsOf = (events: ModelEvent[]) =>
  events.flatMap((e) =>
    e.type === "output_item_done" && e.item.type === "function_call" ? [e.item.call_id] : [],
  );

describe("withUniqueCallIds", () => {
  it("renames a call whose id an earlier call of the thread holds, and keeps new ids as they are", async () => {
    const events: ModelEvent[] = [
      { type: "output_text_delta", delta: "x" },
      { type: "output_item_done", item: call("call_0") },
      { type: "output_item_done", item: call("call_9") },
      { type: "completed" },
    ];
    const prompt = promptWith([call("call_0"), call("call_0_2")]);
    const out = await collect(withUniqueCallIds(answering(events)), prompt);
    expect(idsOf(out)).toEqual(["call_0_3", "call_9"]);
    // Everything else passes unchanged, in order.
    expect(out.map((e) => e.type)).toEqual(events.map((e) => e.type));
    expect(out[2]).toBe(events[2]);
  });

  it("keeps two calls of one answer apart when the model gave them one id", async () => {
    const events: ModelEvent[] = [
      { type: "output_item_done", item: call("call_0") },
      { type: "output_item_done", item: call("call_0") },
      { type: "completed" },
    ];
    const out = await collect(withUniqueCallIds(answering(events)), promptWith([]));
    expect(idsOf(out)).toEqual(["call_0", "call_0_2"]);
  });
});
