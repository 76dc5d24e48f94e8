import { describe, expect, it } from "vitest";
import { turnRowsFromRollout } from "../../../durable-objects/thread/rollouts/turn-index.ts";
import type { ResponseItem, RolloutLine } from "../../../shared/protocol/index.ts";
import {
  createCheckpoint,
  reconstructFromCheckpoint,
  reconstructRollout,
} from "../../../shared/rollout/index.ts";
import {
  assistant,
  compacted,
  ctx,
  developer,
  item,
  POLICY,
  rollback,
  taskComplete,
  taskStarted,
  turnAborted,
  turnContext,
  user,
  userMessageEvent,
} from "./builders.ts";

/**
 * Rollouts of Codex before 0.100 have no turn-start events: every real user message starts a
 * turn. Reconstruction, turn rows and checkpoints agree on where those turns are.
 */

/** A 0.46-era turn: the user message and its event, then a turn_context per request. */
function oldTurn(input: string, model: string, reply = `reply to ${input}`): RolloutLine[] {
  return [
    item(user(input)),
    userMessageEvent(input),
    turnContext(ctx(model)),
    item(assistant(reply)),
  ];
}

const rebuild = (lines: RolloutLine[]) => reconstructRollout(lines, { truncation: POLICY });
const rows = (lines: RolloutLine[]) =>
  turnRowsFromRollout(lines.map((line, i) => ({ seq: i + 1, line }))).map((r) => ({
    id: r.id,
    kind: r.kind,
    status: r.status,
    first: r.first_seq,
    last: r.last_seq,
    pending: r.pending_calls.length,
  }));

const OLD = [
  item(user("<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>")),
  ...oldTurn("U1", "m1"),
  ...oldTurn("U2", "m2"),
  ...oldTurn("U3", "m3"),
];

describe("rollouts without turn-start events", () => {
  it("take previous turn settings and the reference from the newest user turn", () => {
    const state = rebuild(OLD);
    expect({
      previous: state.previousTurnSettings,
      reference: state.history.referenceContextItem,
    }).toEqual({ previous: { model: "m3" }, reference: ctx("m3") });
  });

  it("roll back user turns one at a time, settings included", () => {
    const state = rebuild([...OLD, rollback(1)]);
    expect({
      previous: state.previousTurnSettings,
      items: state.history.items.length,
      last: state.history.items.at(-1),
    }).toEqual({ previous: { model: "m2" }, items: 5, last: assistant("reply to U2") });
  });

  it("give one turn row per user message, ended by the next one, an abort or the end", () => {
    const lines = [
      ...OLD.slice(0, 5),
      item(user("stop")),
      userMessageEvent("stop"),
      turnAborted(),
      ...oldTurn("U4", "m4"),
    ];
    expect(rows(lines)).toEqual([
      { id: "turn_line_2", kind: "turn", status: "completed", first: 2, last: 5, pending: 0 },
      { id: "turn_line_6", kind: "turn", status: "interrupted", first: 6, last: 8, pending: 0 },
      { id: "turn_line_9", kind: "turn", status: "completed", first: 9, last: 12, pending: 0 },
    ]);
  });

  it("end with the first task_started: later turns are tracked, and messages with ids start none", () => {
    const injected: ResponseItem = { ...user("noted"), id: "msg_1" };
    const lines = [
      ...oldTurn("U1", "m1"),
      item(injected),
      taskStarted("t2"),
      item(user("U2")),
      item(assistant("A2")),
      taskComplete("t2"),
      item(user("between tasks")),
    ];
    expect(rows(lines)).toEqual([
      { id: "turn_line_1", kind: "turn", status: "completed", first: 1, last: 5, pending: 0 },
      { id: "t2", kind: "turn", status: "completed", first: 6, last: 9, pending: 0 },
    ]);
  });

  it("leave a last turn waiting on a call it made as requires_action", () => {
    const call: ResponseItem = { type: "function_call", name: "f", arguments: "{}", call_id: "c" };
    expect(rows([item(user("go")), item(call)])).toEqual([
      { id: "turn_line_1", kind: "turn", status: "requires_action", first: 1, last: 2, pending: 1 },
    ]);
  });

  it("reconstruct from a checkpoint taken anywhere as from the whole rollout", () => {
    const lines = [
      ...OLD,
      rollback(1),
      ...oldTurn("U4", "m4"),
      taskStarted("t5"),
      item(user("U5")),
      turnContext(ctx("m5", { turn_id: "t5" })),
      taskComplete("t5"),
      rollback(2),
    ];
    let compared = 0;
    for (let cut = 0; cut <= lines.length; cut++) {
      const checkpoint = createCheckpoint(lines.slice(0, cut), {
        truncation: POLICY,
        maxRollbackTurns: 1,
      });
      const state = reconstructFromCheckpoint(checkpoint, lines.slice(cut), { truncation: POLICY });
      if ("needsFullReplay" in state) continue;
      expect({ cut, state }).toEqual({ cut, state: rebuild(lines) });
      compared += 1;
    }
    // A cut inside the last task (3 of them) leaves the closing rollback of two turns
    // reaching past the checkpoint's window of one.
    expect(compared).toBe(lines.length + 1 - 3);
  });
});

describe("compactions inside user turns (Codex 0.169 compacts before sampling)", () => {
  it("leave the turn a user turn; a task that only compacts is a compaction", () => {
    const lines = [
      taskStarted("t1"),
      compacted("s", [user("U0"), user("summary")]),
      turnContext(ctx("m", { turn_id: "t1" })),
      item(user("U1")),
      item(assistant("A1")),
      taskComplete("t1"),
      taskStarted("c"),
      compacted("s2", [user("U1"), user("summary 2")]),
      taskComplete("c"),
    ];
    expect(rows(lines)).toEqual([
      { id: "t1", kind: "turn", status: "completed", first: 1, last: 6, pending: 0 },
      { id: "c", kind: "compaction", status: "completed", first: 7, last: 9, pending: 0 },
    ]);
  });

  it("keep additional_tools and other items history cannot hold out of the replaced history", () => {
    const tools = {
      type: "other",
      original_type: "additional_tools",
    } as unknown as ResponseItem;
    const state = rebuild([
      taskStarted("t1"),
      item(user("U1")),
      compacted("", [tools, developer("<permissions instructions>"), user("U1"), user("sum")]),
      taskComplete("t1"),
    ]);
    expect(state.history.items).toEqual([
      developer("<permissions instructions>"),
      user("U1"),
      user("sum"),
    ]);
  });
});
