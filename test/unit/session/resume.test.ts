import { describe, expect, it } from "vitest";
import type {
  FunctionCallItem,
  ResponseItem,
  RolloutItem,
} from "../../../shared/protocol/index.ts";
import {
  DuplicateCallOutputError,
  MissingCallOutputsError,
  NoPendingCallsError,
  UnknownCallIdError,
} from "../../../shared/session/index.ts";
import {
  drain,
  LOOKUP_TOOL,
  ManualClock,
  newSession,
  rebuild,
  resume,
  runTurn,
  shapeOf,
  T0,
} from "../helpers/engine.ts";

const TOOLS = { tools: [LOOKUP_TOOL] };

async function pausedTurn(h = newSession({ cwd: "/repo", ...TOOLS })) {
  const outcome = await runTurn(h, '/call lookup {"q":"x"}');
  if (outcome.status !== "requires_action") throw new Error(`expected a pause: ${outcome.status}`);
  const call = outcome.pending_calls[0];
  if (!call) throw new Error("expected a call");
  return { h, outcome, call };
}

function answers(output: string) {
  return (calls: FunctionCallItem[]) => calls.map((c) => ({ call_id: c.call_id, output }));
}

function turnIdOf(item: ResponseItem | undefined): string | undefined {
  return item && item.type !== "other"
    ? item.internal_chat_message_metadata_passthrough?.turn_id
    : undefined;
}

describe("ThreadSession.resumeTurn (client tool outputs)", () => {
  it("requires_action, then resumeTurn with the output, completes with an answer that quotes it", async () => {
    const { h, outcome, call } = await pausedTurn();
    const mark = h.sink.items.length;
    const resumed = await resume(h, outcome, answers("42 results"));
    expect(resumed).toEqual({
      status: "completed",
      turn_id: outcome.turn_id,
      last_agent_message: `Tool output received.\n${call.call_id}: 42 results`,
    });
    expect(shapeOf(h.sink.items.slice(mark))).toEqual([
      "response_item/function_call_output",
      "spindle_request",
      "response_item/assistant",
      "event_msg/token_count",
      "event_msg/task_complete",
    ]);
    const output = h.session.history.items.find((i) => i.type === "function_call_output");
    expect(output).toMatchObject({ call_id: call.call_id, output: "42 results" });
    expect(output?.type === "function_call_output" && output.id).toMatch(/^fco_/);
    expect(turnIdOf(output)).toBe(outcome.turn_id);
    const complete = h.sink.items.at(-1);
    expect(complete?.type === "event_msg" && complete.payload).toMatchObject({
      type: "task_complete",
      turn_id: outcome.turn_id,
    });
    // The model saw the call directly followed by the real output.
    const prompt = h.client.prompts.at(-1);
    const callIndex = prompt?.input.findIndex((i) => i.type === "function_call") ?? -1;
    expect(prompt?.input[callIndex + 1]).toMatchObject({
      type: "function_call_output",
      call_id: call.call_id,
      output: "42 results",
    });
  });

  it("rejects an output whose call_id is not pending with UnknownCallIdError and records nothing", async () => {
    const { h, outcome } = await pausedTurn();
    if (outcome.status !== "requires_action") return;
    const mark = h.sink.items.length;
    const history = [...h.session.history.items];
    const gen = h.session.resumeTurn(outcome.turn_id, outcome.pending_calls, [
      { call_id: "call_nope", output: "x" },
    ]);
    const error = await gen.next().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnknownCallIdError);
    expect(error).toMatchObject({ callId: "call_nope", code: "unknown_call_id" });
    expect(h.sink.items).toHaveLength(mark);
    expect(h.session.history.items).toEqual(history);
  });

  it("rejects an empty pending call list with NoPendingCallsError", async () => {
    const { h, outcome } = await pausedTurn();
    expect(() => h.session.checkResume(outcome.turn_id, [], [])).toThrow(NoPendingCallsError);
    await expect(drain(h.session.resumeTurn(outcome.turn_id, [], []))).rejects.toMatchObject({
      code: "no_pending_calls",
      callIds: [],
    });
  });

  it("requires every pending call to be answered in one request and lists the missing ids", async () => {
    const { h, outcome, call } = await pausedTurn();
    const mark = h.sink.items.length;
    let error: unknown;
    try {
      h.session.checkResume(outcome.turn_id, outcome.pending_calls, []);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MissingCallOutputsError);
    expect(error).toMatchObject({ callIds: [call.call_id], code: "invalid_request" });
    expect(h.sink.items).toHaveLength(mark);
  });

  it("rejects two outputs for the same call", async () => {
    const { h, outcome, call } = await pausedTurn();
    const outputs = [
      { call_id: call.call_id, output: "a" },
      { call_id: call.call_id, output: "b" },
    ];
    expect(() => h.session.checkResume(outcome.turn_id, outcome.pending_calls, outputs)).toThrow(
      DuplicateCallOutputError,
    );
  });

  it("resumes on a fresh ThreadSession rebuilt from history.toState() exactly as without eviction", async () => {
    const live = await pausedTurn();
    const evicted = await pausedTurn();
    const fresh = rebuild(evicted.h);
    const a = await resume(live.h, live.outcome, answers("found it"));
    const b = await resume(fresh, evicted.outcome, answers("found it"));
    expect(b).toEqual(a);
    expect(b.status).toBe("completed");
    // A rebuilt session has no request line to compare with: its first one writes every channel.
    const requestKinds = (items: readonly RolloutItem[]) =>
      items.map((item) =>
        item.type === "spindle_request"
          ? { ...item, payload: { kind: item.payload.kind, model: item.payload.model } }
          : item,
      );
    expect(requestKinds(fresh.sink.items)).toEqual(requestKinds(live.h.sink.items));
    const firstRequest = fresh.sink.items.find((item) => item.type === "spindle_request");
    expect(firstRequest?.payload).toHaveProperty("instructions");
    expect(fresh.session.history.toState()).toEqual(live.h.session.history.toState());
    expect(fresh.client.prompts.at(-1)).toEqual(live.h.client.prompts.at(-1));
  });

  it("leaves an abandoned call unanswered when a new turn starts instead, and the prompt pairs it with aborted", async () => {
    const { h, outcome, call } = await pausedTurn();
    const before = [...h.session.history.items];
    await runTurn(h, "never mind");
    // Nothing was added for the old call: history only grew by the new turn's items.
    expect(h.session.history.items.slice(0, before.length)).toEqual(before);
    expect(h.session.history.items.some((i) => i.type === "function_call_output")).toBe(false);
    const prompt = h.client.prompts.at(-1);
    const callIndex = prompt?.input.findIndex((i) => i.type === "function_call") ?? -1;
    expect(prompt?.input[callIndex + 1]).toEqual({
      type: "function_call_output",
      id: expect.stringMatching(/^fco_/),
      call_id: call.call_id,
      output: "aborted",
    });
    // The old turn cannot be resumed any more.
    expect(() =>
      h.session.checkResume(outcome.turn_id, outcome.pending_calls, answers("late")([call])),
    ).toThrow(NoPendingCallsError);
  });

  it("refuses to answer the same calls twice", async () => {
    const { h, outcome } = await pausedTurn();
    await resume(h, outcome, answers("first"));
    const mark = h.sink.items.length;
    await expect(resume(h, outcome, answers("again"))).rejects.toMatchObject({
      name: "NoPendingCallsError",
      callIds: [outcome.status === "requires_action" ? outcome.pending_calls[0]?.call_id : ""],
    });
    expect(h.sink.items).toHaveLength(mark);
  });

  it("records the output truncated by the truncation policy in history, in full in the rollout", async () => {
    const { h, outcome } = await pausedTurn(newSession({ ...TOOLS, truncation: { tokens: 10 } }));
    const big = "0123456789".repeat(100);
    const gen = h.session.resumeTurn(
      outcome.turn_id,
      outcome.status === "requires_action" ? outcome.pending_calls : [],
      answers(big)(outcome.status === "requires_action" ? outcome.pending_calls : []),
    );
    const { events } = await drain(gen);
    const stored = h.session.history.items.find((i) => i.type === "function_call_output");
    expect(stored?.type === "function_call_output" && stored.output).toContain("tokens truncated");
    const line = h.sink.items.find(
      (i) => i.type === "response_item" && i.payload.type === "function_call_output",
    );
    expect(line?.type === "response_item" && line.payload).toMatchObject({ output: big });
    // The event shows the output as the model sees it.
    const completed = events.find(
      (e) => e.type === "item.completed" && e.item.type === "function_call_output",
    );
    expect(completed?.type === "item.completed" && completed.item).toEqual(stored);
  });

  it("records the world-state diff (the date rolled over) before sampling again, without a turn_context", async () => {
    const clock = new ManualClock(T0);
    const h = newSession({ cwd: "/repo", ...TOOLS }, 0, { clock });
    const { outcome } = await pausedTurn(h);
    clock.ms = T0 + 24 * 3600 * 1000;
    const mark = h.sink.items.length;
    await resume(h, outcome, answers("ok"));
    const lines = h.sink.items.slice(mark);
    expect(shapeOf(lines)).toEqual([
      "response_item/function_call_output",
      "response_item/user",
      "world_state",
      "spindle_request",
      "response_item/assistant",
      "event_msg/token_count",
      "event_msg/task_complete",
    ]);
    const diff = lines[1];
    const text =
      diff?.type === "response_item" && diff.payload.type === "message"
        ? diff.payload.content.map((p) => ("text" in p ? p.text : "")).join("")
        : "";
    expect(text).toContain("<current_date>2026-03-02</current_date>");
    expect(lines[2]).toEqual({
      type: "world_state",
      payload: { full: false, state: { environments: { current_date: "2026-03-02" } } },
    });
    expect(h.session.history.worldStateBaseline).toMatchObject({
      environments: { current_date: "2026-03-02" },
    });
    // The reference context item is the turn's own, not rewritten mid-turn.
    expect(h.session.history.referenceContextItem?.current_date).toBe("2026-03-01");
  });

  it("records no world-state line when nothing changed between the pause and the resume", async () => {
    const { h, outcome } = await pausedTurn();
    const mark = h.sink.items.length;
    await resume(h, outcome, answers("ok"));
    expect(shapeOf(h.sink.items.slice(mark))).not.toContain("world_state");
  });
});
