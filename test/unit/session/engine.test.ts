import { describe, expect, it } from "vitest";
import { isContextualUserMessageContent } from "../../../shared/context/index.ts";
import type { TurnEvent } from "../../../shared/session/index.ts";
import { newSession, runTurn, shapeOf, text } from "../helpers/engine.ts";

describe("ThreadSession.runTurn (design §5)", () => {
  it("records a new thread's first turn in the durable order", async () => {
    const h = newSession({ cwd: "/repo" });
    expect(h.sink.items).toEqual([]);
    expect(h.session.history.items).toEqual([]);
    const outcome = await runTurn(h, "hello");
    expect(outcome.status).toBe("completed");
    expect(shapeOf(h.sink.items)).toEqual([
      "event_msg/task_started",
      "response_item/developer",
      "response_item/user",
      "turn_context",
      "world_state",
      "response_item/user",
      "event_msg/user_message",
      "spindle_request",
      "response_item/assistant",
      "event_msg/token_count",
      "event_msg/task_complete",
    ]);
  });

  it("stamps the turn id and assigns prefixed ids to the items it records", async () => {
    const h = newSession();
    const outcome = await runTurn(h, "hello");
    const [, , user, answer] = h.session.history.items;
    expect(user?.type === "message" && user.id).toMatch(/^msg_/);
    expect(answer?.type === "message" && answer.internal_chat_message_metadata_passthrough).toEqual(
      {
        turn_id: outcome.turn_id,
      },
    );
  });

  it("streams events: turn.started first, context items flagged, deltas, token_count", async () => {
    const h = newSession();
    const events: TurnEvent[] = [];
    const gen = h.session.runTurn(text("hi"));
    for (let n = await gen.next(); !n.done; n = await gen.next()) events.push(n.value);
    expect(events[0]?.type).toBe("turn.started");
    const completed = events.filter((e) => e.type === "item.completed");
    expect(completed.map((e) => e.context)).toEqual([true, true, false, false]);
    const deltas = events
      .filter((e) => e.type === "item.delta")
      .map((e) => e.delta)
      .join("");
    const answer = completed[3]?.item;
    expect(
      answer?.type === "message" &&
        answer.content[0]?.type === "output_text" &&
        answer.content[0].text,
    ).toBe(deltas);
    expect(events.at(-1)?.type).toBe("token_count");
  });

  it("ends the turn with requires_action when the model calls a declared client tool", async () => {
    const h = newSession({
      tools: [
        { type: "function", name: "lookup", description: "find", parameters: { type: "object" } },
      ],
    });
    const outcome = await runTurn(h, '/call lookup {"q":"x"}');
    expect(outcome.status).toBe("requires_action");
    if (outcome.status !== "requires_action") return;
    expect(outcome.pending_calls).toHaveLength(1);
    expect(outcome.pending_calls[0]).toMatchObject({
      type: "function_call",
      name: "lookup",
      arguments: '{"q":"x"}',
    });
    expect(shapeOf(h.sink.items).at(-1)).toBe("event_msg/token_count");
    // The prompt pairs the unanswered call with a synthetic aborted output.
    const prompt = h.session.previewPrompt();
    const callIndex = prompt.input.findIndex((i) => i.type === "function_call");
    expect(prompt.input[callIndex + 1]).toMatchObject({
      type: "function_call_output",
      output: "aborted",
    });
  });

  it("keeps the token usage running across turns", async () => {
    const h = newSession();
    await runTurn(h, "one");
    const first = h.session.history.tokenInfo?.total_token_usage.total_tokens ?? 0;
    await runTurn(h, "two");
    const info = h.session.history.tokenInfo;
    expect(info?.total_token_usage.total_tokens).toBe(
      first + (info?.last_token_usage.total_tokens ?? 0),
    );
    // Codex's model_context_window: 95% of the window.
    expect(info?.model_context_window).toBe(950_000);
  });

  it("creates no model-visible context before the first turn (invariant 1)", () => {
    const h = newSession({ cwd: "/repo", agents_md: { directory: "/repo", text: "x" } });
    expect(h.session.history.items).toEqual([]);
    expect(h.session.previewPrompt().input).toEqual([]);
  });

  it("hands the provider history's own items and shows the prompt without bookkeeping", async () => {
    const h = newSession();
    await runTurn(h, "one");
    const sent = h.client.received[0]?.input ?? [];
    // No copies: the provider gets the frozen history items (providers strip local fields).
    sent.forEach((item, i) => {
      expect(item).toBe(h.session.history.items[i]);
    });
    expect(sent.some((i) => "internal_chat_message_metadata_passthrough" in i)).toBe(true);
    const preview = h.session.previewPrompt().input;
    expect(preview.length).toBeGreaterThan(sent.length);
    for (const item of preview) {
      expect(item).not.toHaveProperty("internal_chat_message_metadata_passthrough");
    }
    const contextual = sent.filter(
      (i) => i.type === "message" && i.role === "user" && isContextualUserMessageContent(i.content),
    );
    expect(contextual).toHaveLength(1);
  });
});
