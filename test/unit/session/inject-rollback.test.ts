import { describe, expect, it } from "vitest";
import { isUserTurnBoundary } from "../../../shared/context/index.ts";
import type { MessageItem, ResponseItem } from "../../../shared/protocol/index.ts";
import { InvalidInputError, SessionBusyError } from "../../../shared/session/index.ts";
import { newSession, runTurn, shapeOf, text } from "../helpers/engine.ts";

const user = (t: string): MessageItem => ({
  type: "message",
  role: "user",
  content: [{ type: "input_text", text: t }],
});

describe("ThreadSession.inject (reference §5.5)", () => {
  it("records user messages as response_item lines without a turn: no task_started, no turn_context, reference and baseline kept", async () => {
    const h = newSession({ cwd: "/repo" });
    await runTurn(h, "first");
    const reference = h.session.history.referenceContextItem;
    const baseline = h.session.history.worldStateBaseline;
    const mark = h.sink.items.length;
    const before = h.session.history.items.length;

    const recorded = h.session.inject([user("note one"), user("note two")]);

    expect(shapeOf(h.sink.items.slice(mark))).toEqual(["response_item/user", "response_item/user"]);
    expect(h.session.history.items.slice(before)).toEqual(recorded);
    expect(recorded).toEqual([
      { ...user("note one"), id: expect.stringMatching(/^msg_/) },
      { ...user("note two"), id: expect.stringMatching(/^msg_/) },
    ]);
    expect(recorded.every(isUserTurnBoundary)).toBe(true);
    expect(h.session.history.referenceContextItem).toBe(reference);
    expect(h.session.history.worldStateBaseline).toBe(baseline);
  });

  it("injected messages count as user turns for rollback", async () => {
    const h = newSession();
    await runTurn(h, "first");
    const afterTurn = [...h.session.history.items];
    h.session.inject([user("one"), user("two")]);
    h.session.recordRollback(2);
    expect(h.session.history.items).toEqual(afterTurn);
  });

  it("creates no context before the first turn; the first turn then injects the full context after the message", async () => {
    const h = newSession({ cwd: "/repo" });
    h.session.inject([user("background")]);
    expect(h.session.history.items).toHaveLength(1);
    await runTurn(h, "go");
    const roles = h.session.history.items.map((i) => (i.type === "message" ? i.role : i.type));
    expect(roles).toEqual(["user", "developer", "user", "user", "assistant"]);
  });

  it("rejects an empty list, items a client cannot add and parts a role cannot hold, recording nothing", () => {
    const h = newSession();
    const assistantImage: MessageItem = {
      type: "message",
      role: "assistant",
      content: [{ type: "input_image", image_url: "https://example.com/x.png" }],
    };
    const outputPart: MessageItem = {
      type: "message",
      role: "user",
      content: [{ type: "output_text", text: "x" }],
    };
    const empty: MessageItem = { type: "message", role: "user", content: [] };
    const compaction: ResponseItem = { type: "compaction", encrypted_content: "x" };
    for (const items of [[], [assistantImage], [user("ok"), outputPart], [empty], [compaction]]) {
      expect(() => h.session.inject(items)).toThrow(InvalidInputError);
    }
    expect(h.sink.items).toEqual([]);
    expect(h.session.history.items).toEqual([]);
  });

  it("records what a client may add: messages of any role, a tool call with its output", () => {
    const h = newSession();
    const recorded = h.session.inject([
      { type: "message", role: "developer", content: [{ type: "input_text", text: "be brief" }] },
      user("what is a spindle?"),
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "a rod" }] },
      { type: "function_call", name: "lookup", arguments: "{}", call_id: "call_1" },
      { type: "function_call_output", call_id: "call_1", output: "found" },
    ]);
    expect(recorded.map((item) => item.type)).toEqual([
      "message",
      "message",
      "message",
      "function_call",
      "function_call_output",
    ]);
    expect(h.session.history.items).toHaveLength(5);
  });

  it("drops ids and metadata the caller sent", () => {
    const h = newSession();
    const [item] = h.session.inject([
      {
        ...user("x"),
        id: "msg_forged",
        internal_chat_message_metadata_passthrough: { turn_id: "turn_forged" },
      },
    ]);
    expect(item).toEqual({ ...user("x"), id: expect.stringMatching(/^msg_u-/) });
  });
});

describe("ThreadSession.recordRollback (reference §4.5)", () => {
  it("writes thread_rolled_back and cuts history at the last user turn", async () => {
    const h = newSession({ cwd: "/repo" });
    await runTurn(h, "first");
    const afterFirst = [...h.session.history.items];
    await runTurn(h, "second");
    const version = h.session.history.historyVersion;

    h.session.recordRollback(1);

    expect(h.sink.items.at(-1)).toEqual({
      type: "event_msg",
      payload: { type: "thread_rolled_back", num_turns: 1 },
    });
    expect(h.session.history.items).toEqual(afterFirst);
    expect(h.session.history.historyVersion).toBe(version + 1);
    // The live result clears the baseline; the next turn re-renders what history lacks.
    expect(h.session.history.worldStateBaseline).toBeUndefined();
  });

  it("rolling back more turns than exist keeps the prefix before the first user turn", async () => {
    const h = newSession({ cwd: "/repo" });
    await runTurn(h, "first");
    await runTurn(h, "second");
    h.session.recordRollback(99);
    expect(h.session.history.items.map((i) => (i.type === "message" ? i.role : i.type))).toEqual([
      "developer",
      "user",
    ]);
  });

  it("rejects counts that are not positive integers", () => {
    const h = newSession();
    for (const n of [0, -1, 1.5, Number.NaN]) {
      expect(() => h.session.recordRollback(n)).toThrow(InvalidInputError);
    }
    expect(h.sink.items).toEqual([]);
  });

  it("refuses to run while a turn is running", async () => {
    const h = newSession();
    const gen = h.session.runTurn(text("x"));
    await gen.next();
    expect(() => h.session.recordRollback(1)).toThrow(SessionBusyError);
    expect(() => h.session.inject([user("y")])).toThrow(SessionBusyError);
    await gen.return({ status: "interrupted", turn_id: "" });
    expect(h.session.runningTurnId).toBeUndefined();
  });
});
