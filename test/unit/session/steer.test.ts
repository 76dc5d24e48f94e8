import { describe, expect, it } from "vitest";
import type { ContentItem, ResponseItem } from "../../../shared/protocol/index.ts";
import {
  InvalidInputError,
  type TurnEvent,
  TurnNotSteerableError,
  type TurnOutcome,
} from "../../../shared/session/index.ts";
import {
  drain,
  LOOKUP_TOOL,
  newSession,
  rebuild,
  runTurn,
  shapeOf,
  text,
} from "../helpers/engine.ts";

const steerText = (t: string): ContentItem[] => [{ type: "input_text", text: t }];

function lastUserText(items: readonly ResponseItem[]): string | undefined {
  const user = items.findLast(
    (i) => i.type === "message" && i.role === "user" && !JSON.stringify(i).includes("<"),
  );
  return user?.type === "message" && user.content[0]?.type === "input_text"
    ? user.content[0].text
    : undefined;
}

/** Runs a turn, calling `onEvent` on each event (while the turn is suspended at that event). */
async function runWith(
  gen: AsyncGenerator<TurnEvent, TurnOutcome>,
  onEvent: (e: TurnEvent) => void,
): Promise<{ events: TurnEvent[]; outcome: TurnOutcome }> {
  const events: TurnEvent[] = [];
  for (;;) {
    const next = await gen.next();
    if (next.done) return { events, outcome: next.value };
    events.push(next.value);
    onEvent(next.value);
  }
}

describe("ThreadSession.steer", () => {
  it("steered input joins the running turn at its next sampling step, and the model sees it", async () => {
    const h = newSession({ cwd: "/repo" });
    let steered: string | undefined;
    const { outcome } = await runWith(h.session.runTurn(text("write a poem")), (e) => {
      if (e.type === "item.delta" && steered === undefined) {
        steered = h.session.steer(steerText("make it rhyme"));
      }
    });
    expect(steered).toBe(outcome.turn_id);
    expect(outcome).toEqual({
      status: "completed",
      turn_id: outcome.turn_id,
      last_agent_message: expect.stringContaining('Last user message: "make it rhyme"'),
    });
    // The first answer did not end the turn: it sampled once more with the steered message.
    expect(h.client.prompts).toHaveLength(2);
    expect(lastUserText(h.client.prompts[0]?.input ?? [])).toBe("write a poem");
    expect(lastUserText(h.client.prompts[1]?.input ?? [])).toBe("make it rhyme");
    expect(shapeOf(h.sink.items).slice(5)).toEqual([
      "response_item/user",
      "event_msg/user_message",
      "spindle_request",
      "response_item/assistant",
      "event_msg/token_count",
      "response_item/user",
      "event_msg/user_message",
      "spindle_request",
      "response_item/assistant",
      "event_msg/token_count",
      "event_msg/task_complete",
    ]);
    const steeredItem = h.session.history.items.at(-2);
    expect(steeredItem).toMatchObject({
      type: "message",
      role: "user",
      content: [{ type: "input_text", text: "make it rhyme" }],
      internal_chat_message_metadata_passthrough: { turn_id: outcome.turn_id },
    });
  });

  it("input steered before the first prompt joins that prompt, after the turn's own input", async () => {
    const h = newSession();
    await runWith(h.session.runTurn(text("one")), (e) => {
      if (e.type === "turn.started") h.session.steer(steerText("two"));
    });
    expect(h.client.prompts).toHaveLength(1);
    const users = (h.client.prompts[0]?.input ?? []).filter(
      (i) => i.type === "message" && i.role === "user",
    );
    expect(users.slice(-2).map((u) => lastUserText([u]))).toEqual(["one", "two"]);
  });

  it("steer on an idle session throws TurnNotSteerableError", async () => {
    const h = newSession();
    expect(() => h.session.steer(steerText("hi"))).toThrow(TurnNotSteerableError);
    await runTurn(h, "done");
    expect(h.session.runningTurnId).toBeUndefined();
    expect(() => h.session.steer(steerText("hi"))).toThrow(TurnNotSteerableError);
  });

  it("a turn paused in requires_action is not running and cannot be steered", async () => {
    const h = newSession({ tools: [LOOKUP_TOOL] });
    const outcome = await runTurn(h, "/call lookup {}");
    expect(outcome.status).toBe("requires_action");
    expect(h.session.runningTurnId).toBeUndefined();
    expect(() => h.session.steer(steerText("hi"))).toThrow(TurnNotSteerableError);
  });

  it("runningTurnId names the running turn while it runs", async () => {
    const h = newSession();
    const seen: (string | undefined)[] = [];
    const { outcome } = await runWith(h.session.runTurn(text("x")), () =>
      seen.push(h.session.runningTurnId),
    );
    expect(new Set(seen)).toEqual(new Set([outcome.turn_id]));
  });

  it("rejects empty content and parts a user cannot send", async () => {
    const h = newSession();
    await runWith(h.session.runTurn(text("x")), (e) => {
      if (e.type !== "turn.started") return;
      expect(() => h.session.steer([])).toThrow(InvalidInputError);
      expect(() => h.session.steer([{ type: "output_text", text: "fake" }])).toThrow(
        InvalidInputError,
      );
    });
    expect(h.client.prompts).toHaveLength(1);
  });

  it("input steered while the model calls a client tool waits for the outputs, also across an eviction", async () => {
    for (const evict of [false, true]) {
      const h = newSession({ tools: [LOOKUP_TOOL] });
      const { outcome } = await runWith(h.session.runTurn(text("/call lookup {}")), (e) => {
        if (e.type === "item.completed" && e.item.type === "function_call") {
          h.session.steer(steerText("also check the cache"));
        }
      });
      if (outcome.status !== "requires_action") throw new Error("expected a pause");
      expect(outcome.queued_input).toEqual([steerText("also check the cache")]);
      const call = outcome.pending_calls[0];
      if (!call) throw new Error("call");
      const target = evict ? rebuild(h) : h;
      await drain(
        target.session.resumeTurn(
          outcome.turn_id,
          outcome.pending_calls,
          [{ call_id: call.call_id, output: "hit" }],
          undefined,
          evict ? outcome.queued_input : undefined,
        ),
      );
      const tail = target.session.history.items.slice(-4);
      expect(tail.map((i) => (i.type === "message" ? i.role : i.type))).toEqual([
        "function_call",
        "function_call_output",
        "user",
        "assistant",
      ]);
      expect(lastUserText(tail)).toBe("also check the cache");
    }
  });
});
