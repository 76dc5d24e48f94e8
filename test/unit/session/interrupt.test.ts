import { describe, expect, it } from "vitest";
import { isUserTurnBoundary, MARKERS } from "../../../shared/context/index.ts";
import type { KnownResponseItem } from "../../../shared/protocol/index.ts";
import {
  LocalModelClient,
  type ModelClient,
  type ModelEvent,
  type ModelPrompt,
} from "../../../shared/providers/index.ts";
import { TURN_ABORTED_GUIDANCE, type TurnEvent } from "../../../shared/session/index.ts";
import {
  LOOKUP_TOOL,
  newSession,
  runTurn,
  StallingClient,
  shapeOf,
  text,
} from "../helpers/engine.ts";

/** Stalls on the first request (until aborted), then answers as the local model. */
class StallOnce implements ModelClient {
  readonly #stall = new StallingClient();
  readonly #local = new LocalModelClient();
  stream(prompt: ModelPrompt, signal?: AbortSignal): AsyncIterable<ModelEvent> {
    return this.#stall.started === 0
      ? this.#stall.stream(prompt, signal)
      : this.#local.stream(prompt, signal);
  }
}

/** Streams `items` as finished output items, then waits for the abort. */
class ItemsThenStall implements ModelClient {
  constructor(readonly items: KnownResponseItem[]) {}
  async *stream(_prompt: ModelPrompt, signal?: AbortSignal): AsyncIterable<ModelEvent> {
    for (const item of this.items) yield { type: "output_item_done", item };
    await new Promise<void>((_, reject) => {
      if (signal?.aborted) reject(new Error("aborted"));
      signal?.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
    });
  }
}

async function interruptAfter(
  h: ReturnType<typeof newSession>,
  when: (e: TurnEvent) => boolean,
  input = "tell me a story",
) {
  const controller = new AbortController();
  const gen = h.session.runTurn(text(input), undefined, controller.signal);
  const events: TurnEvent[] = [];
  for (;;) {
    const next = await gen.next();
    if (next.done) return { events, outcome: next.value };
    events.push(next.value);
    if (when(next.value)) controller.abort();
  }
}

describe("interrupting a turn", () => {
  it("an abort mid-stream records no partial answer, then the <turn_aborted> message and the turn_aborted event", async () => {
    const h = newSession({ cwd: "/repo" }, 1000, { model: new StallingClient() });
    const { events, outcome } = await interruptAfter(h, (e) => e.type === "item.delta");
    expect(outcome).toEqual({ status: "interrupted", turn_id: outcome.turn_id });
    expect(shapeOf(h.sink.items)).toEqual([
      "event_msg/task_started",
      "response_item/developer",
      "response_item/user",
      "turn_context",
      "world_state",
      "response_item/user",
      "event_msg/user_message",
      "spindle_request",
      "response_item/user",
      "event_msg/turn_aborted",
    ]);
    const marker = h.sink.items[8];
    expect(marker?.type === "response_item" && marker.payload).toEqual({
      type: "message",
      role: "user",
      id: expect.stringMatching(/^msg_/),
      content: [
        {
          type: "input_text",
          text: `${MARKERS.turnAborted.start}\n${TURN_ABORTED_GUIDANCE}\n${MARKERS.turnAborted.end}`,
        },
      ],
      internal_chat_message_metadata_passthrough: { turn_id: outcome.turn_id },
    });
    expect(h.sink.items[9]).toMatchObject({
      type: "event_msg",
      payload: { type: "turn_aborted", turn_id: outcome.turn_id, reason: "interrupted" },
    });
    expect(
      h.session.history.items.some((i) => i.type === "message" && i.role === "assistant"),
    ).toBe(false);
    expect(h.session.history.items.at(-1)).toEqual(
      marker?.type === "response_item" ? marker.payload : undefined,
    );
    expect(events.at(-1)).toEqual({
      type: "turn.interrupted",
      turn_id: outcome.turn_id,
      kind: "turn",
    });
    expect(events.at(-2)).toMatchObject({ type: "item.completed", context: true });
    expect(h.session.runningTurnId).toBeUndefined();
  });

  it("the <turn_aborted> message is contextual, not a user turn boundary", async () => {
    const h = newSession({}, 1000, { model: new StallingClient() });
    await interruptAfter(h, (e) => e.type === "item.delta");
    const marker = h.session.history.items.at(-1);
    expect(marker && isUserTurnBoundary(marker)).toBe(false);
  });

  it("function calls recorded before the abort stay unanswered and the next prompt pairs them with aborted", async () => {
    const call: KnownResponseItem = {
      type: "function_call",
      name: "lookup",
      arguments: "{}",
      call_id: "call_1",
    };
    const h = newSession({ tools: [LOOKUP_TOOL] }, 1000, { model: new ItemsThenStall([call]) });
    const { outcome } = await interruptAfter(
      h,
      (e) => e.type === "item.completed" && e.item.type === "function_call",
    );
    expect(outcome.status).toBe("interrupted");
    const kinds = h.session.history.items.slice(-2).map((i) => i.type);
    expect(kinds).toEqual(["function_call", "message"]);
    const prompt = h.session.previewPrompt();
    const callIndex = prompt.input.findIndex((i) => i.type === "function_call");
    expect(prompt.input[callIndex + 1]).toMatchObject({
      type: "function_call_output",
      call_id: "call_1",
      output: "aborted",
    });
    expect(prompt.input[callIndex + 2]).toMatchObject({ type: "message", role: "user" });
  });

  it("an abort before the first sampling step still records the input, then the marker", async () => {
    const h = newSession();
    const controller = new AbortController();
    controller.abort();
    const gen = h.session.runTurn(text("hi"), undefined, controller.signal);
    let next = await gen.next();
    while (!next.done) next = await gen.next();
    expect(next.value.status).toBe("interrupted");
    expect(h.client.prompts).toEqual([]);
    expect(shapeOf(h.sink.items).slice(-4)).toEqual([
      "response_item/user",
      "event_msg/user_message",
      "response_item/user",
      "event_msg/turn_aborted",
    ]);
  });

  it("the next turn after an interrupt runs normally and its prompt carries the marker before the new input", async () => {
    const h = newSession({}, 1000, { model: new StallOnce() });
    await interruptAfter(h, (e) => e.type === "item.delta", "first");
    const outcome = await runTurn(h, "second");
    expect(outcome.status).toBe("completed");
    const texts = (h.client.prompts.at(-1)?.input ?? []).map((i) =>
      i.type === "message" && i.content[0]?.type === "input_text" ? i.content[0].text : "",
    );
    expect(texts.slice(-3, -2)).toEqual(["first"]);
    expect(texts.at(-2)?.startsWith(MARKERS.turnAborted.start)).toBe(true);
    expect(texts.at(-1)).toBe("second");
  });
});
