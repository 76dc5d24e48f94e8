import { describe, expect, it } from "vitest";
import type { RolloutLine } from "../../../shared/protocol/index.ts";
import {
  decodeRolloutLine,
  isHistoryRewrite,
  reconstructRollout,
} from "../../../shared/rollout/index.ts";
import {
  assistant,
  compacted,
  ctx,
  developer,
  ENV_CONTEXT,
  interAgentLine,
  item,
  POLICY,
  rollback,
  taskComplete,
  taskStarted,
  tokenCount,
  turn,
  turnAborted,
  turnContext,
  unreadableWorldState,
  usage,
  user,
  userMessageEvent,
  worldStateFull,
  worldStatePatch,
} from "./builders.ts";

function rebuild(lines: RolloutLine[]) {
  return reconstructRollout(lines, { truncation: POLICY });
}

const PATCH_WITHOUT_SNAPSHOT = "world-state patch ignored: no full snapshot precedes it";
const UNREADABLE = "world-state baseline cleared: a world_state line could not be read";

/** A manual (pre-turn) compaction: its own task, no user message, no turn_context. */
function compactionTask(id: string, replacement: RolloutLine): RolloutLine[] {
  return [taskStarted(id), replacement, taskComplete(id)];
}

describe("reconstruction catalog (reference §7, 69-76)", () => {
  it("69 record_initial_history_resumed_bare_turn_context_does_not_hydrate_previous_turn_settings", () => {
    expect(rebuild([turnContext(ctx("gpt-5.4", { turn_id: "t1" }))])).toEqual({
      history: { items: [], historyVersion: 0 },
      windowNumber: 0,
      rewrites: 0,
      warnings: [],
    });
  });

  it("70 a lifecycle turn whose turn_context has no turn id hydrates previous turn settings", () => {
    const context = ctx("model-m", { comp_hash: "h", realtime_active: false });
    const state = rebuild([
      taskStarted("t"),
      userMessageEvent("hi"),
      turnContext(context),
      taskComplete("t"),
    ]);
    expect(state.previousTurnSettings).toEqual({
      model: "model-m",
      comp_hash: "h",
      realtime_active: false,
    });
    expect(state.history.referenceContextItem).toEqual(context);
  });

  it("72 rolling back an incomplete turn keeps history and metadata of the turn before", () => {
    const state = rebuild([
      ...turn({ id: "t1", input: "U1", reply: "A1", model: "m1" }),
      ...turn({ id: "t2", input: "U2", reply: "A2", model: "m2", complete: false }),
      rollback(1),
    ]);
    expect(state).toEqual({
      history: {
        items: [user("U1"), assistant("A1")],
        historyVersion: 1,
        referenceContextItem: ctx("m1", { turn_id: "t1" }),
      },
      previousTurnSettings: { model: "m1" },
      windowNumber: 0,
      rewrites: 1,
      warnings: [],
    });
  });

  it("72 rolling back a completed turn keeps history and metadata in sync, baseline included", () => {
    const lines = [
      ...turn({
        id: "t1",
        input: "U1",
        reply: "A1",
        model: "m1",
        worldState: worldStateFull({ test: { environment: "first" } }),
      }),
      ...turn({
        id: "t2",
        input: "U2",
        reply: "A2",
        model: "m2",
        worldState: worldStatePatch({ test: { environment: "rolled-back" } }),
      }),
    ];
    const before = rebuild(lines);
    expect(before.history.worldStateBaseline).toEqual({ test: { environment: "rolled-back" } });
    expect(before.previousTurnSettings).toEqual({ model: "m2" });

    const after = rebuild([...lines, rollback(1)]);
    expect(after).toEqual({
      history: {
        items: [user("U1"), assistant("A1")],
        historyVersion: 1,
        referenceContextItem: ctx("m1", { turn_id: "t1" }),
        worldStateBaseline: { test: { environment: "first" } },
      },
      previousTurnSettings: { model: "m1" },
      windowNumber: 0,
      rewrites: 1,
      warnings: [],
    });
  });

  it("73 reconstruct_history_rollback_skips_non_user_turns_for_history_and_metadata", () => {
    const standalone = [
      taskStarted("s"),
      turnContext(ctx("shell-model", { turn_id: "s" })),
      item(assistant("shell output")),
      taskComplete("s"),
    ];
    const lines = [
      ...turn({ id: "t1", input: "U1", reply: "A1", model: "m1" }),
      ...standalone,
      ...turn({ id: "t2", input: "U2", reply: "A2", model: "m2" }),
    ];
    const one = rebuild([...lines, rollback(1)]);
    expect(one.history.items).toEqual([user("U1"), assistant("A1"), assistant("shell output")]);
    expect(one.previousTurnSettings).toEqual({ model: "m1" });
    expect(one.history.referenceContextItem).toEqual(ctx("m1", { turn_id: "t1" }));

    // Two user turns back: the standalone turn in between is discarded without counting.
    const two = rebuild([...lines, rollback(2)]);
    expect(two.history.items).toEqual([]);
    expect(two.previousTurnSettings).toBeUndefined();
    expect(two.history.referenceContextItem).toBeUndefined();
  });

  it("76 reconstruct_history_legacy_compaction_without_replacement_history_does_not_inject_current_initial_context", () => {
    const state = rebuild([
      item(user("before compact")),
      item(assistant("reply")),
      compacted("legacy summary"),
    ]);
    expect(state).toEqual({
      history: { items: [user("before compact"), user("legacy summary")], historyVersion: 1 },
      windowNumber: 1,
      rewrites: 1,
      warnings: [],
    });
  });
});

describe("reverse scan (reference §6.1)", () => {
  it("a legacy compaction forces the reference to none even when a newer turn set one", () => {
    const state = rebuild([
      taskStarted("t1"),
      turnContext(ctx("m1", { turn_id: "t1" })),
      item(user("before compact")),
      userMessageEvent("before compact"),
      item(assistant("reply")),
      compacted("legacy summary"),
      taskComplete("t1"),
      ...turn({ id: "t2", input: "U2", reply: "A2", model: "m2" }),
    ]);
    expect(state.history.items).toEqual([
      user("before compact"),
      user("legacy summary"),
      user("U2"),
      assistant("A2"),
    ]);
    expect(state.history.referenceContextItem).toBeUndefined();
    expect(state.previousTurnSettings).toEqual({ model: "m2" });
  });

  it("a compaction newer than the turn's turn_context clears the reference", () => {
    const replacement = [user("q"), user("summary")];
    const state = rebuild([
      taskStarted("t1"),
      turnContext(ctx("m1", { turn_id: "t1" })),
      item(user("q")),
      userMessageEvent("q"),
      item(assistant("a")),
      compacted("summary", replacement, 1),
      taskComplete("t1"),
    ]);
    expect(state).toEqual({
      history: { items: replacement, historyVersion: 1 },
      previousTurnSettings: { model: "m1" },
      windowNumber: 1,
      rewrites: 1,
      warnings: [],
    });
  });

  it("a turn_context after a compaction in the same turn re-establishes the reference", () => {
    const reestablished = ctx("m1b", { turn_id: "t1" });
    const state = rebuild([
      taskStarted("t1"),
      turnContext(ctx("m1a", { turn_id: "t1" })),
      item(user("q")),
      userMessageEvent("q"),
      compacted("summary", [user("q"), user("summary")], 1),
      turnContext(reestablished),
      item(assistant("after")),
      taskComplete("t1"),
    ]);
    expect(state.history.referenceContextItem).toEqual(reestablished);
    // Settings come from the oldest turn_context of the turn, the reference from the newest.
    expect(state.previousTurnSettings).toEqual({ model: "m1a" });
    expect(state.history.items).toEqual([user("q"), user("summary"), assistant("after")]);
  });

  it("a manual compaction after a turn clears the reference; the next turn re-establishes it", () => {
    const lines = [
      ...turn({ id: "t1", input: "U1", reply: "A1", model: "m1" }),
      ...compactionTask("c", compacted("summary", [user("summary")], 1)),
    ];
    const cleared = rebuild(lines);
    expect(cleared.history.referenceContextItem).toBeUndefined();
    expect(cleared.previousTurnSettings).toEqual({ model: "m1" });
    expect(cleared.history.items).toEqual([user("summary")]);

    const next = rebuild([...lines, ...turn({ id: "t2", input: "U2", reply: "A2", model: "m2" })]);
    expect(next.history.referenceContextItem).toEqual(ctx("m2", { turn_id: "t2" }));
    expect(next.history.items).toEqual([user("summary"), user("U2"), assistant("A2")]);
  });

  it("a compaction task that re-injected context (full world_state and turn_context after it) is the reference and baseline; the previous settings stay the last user turn's", () => {
    const replacement = [
      user("U1"),
      developer("<permissions instructions>\np\n</permissions instructions>"),
      user(ENV_CONTEXT),
      user("summary"),
    ];
    const reference = ctx("m2", { turn_id: "c" });
    const state = rebuild([
      ...turn({ id: "t1", input: "U1", reply: "A1", model: "m1" }),
      taskStarted("c"),
      compacted("summary", replacement, 1),
      worldStateFull({ env: { cwd: "/repo" } }),
      turnContext(reference),
      taskComplete("c"),
    ]);
    expect(state).toEqual({
      history: {
        items: replacement,
        historyVersion: 1,
        referenceContextItem: reference,
        worldStateBaseline: { env: { cwd: "/repo" } },
      },
      previousTurnSettings: { model: "m1" },
      windowNumber: 1,
      rewrites: 1,
      warnings: [],
    });
  });

  it("without a full world_state after the compaction, a compaction task's turn_context hydrates nothing: the older turn's reference stands, with no baseline", () => {
    const state = rebuild([
      ...turn({ id: "t1", input: "U1", reply: "A1", model: "m1" }),
      taskStarted("c"),
      worldStateFull({ env: { cwd: "/repo" } }),
      compacted("summary", [user("summary")], 1),
      turnContext(ctx("m2", { turn_id: "c" })),
      taskComplete("c"),
    ]);
    expect(state.history.referenceContextItem).toEqual(ctx("m1", { turn_id: "t1" }));
    expect(state.history.worldStateBaseline).toBeUndefined();
  });

  it.each([
    ["before", false],
    ["after", true],
  ])(
    "a turn_context written %s the user message pairs with its turn by turn id",
    (_when, after) => {
      const state = rebuild([
        ...turn({ id: "t1", input: "U1", model: "m1" }),
        ...turn({ id: "t2", input: "U2", model: "m2", contextAfterUserMessage: after }),
      ]);
      expect(state.previousTurnSettings).toEqual({ model: "m2" });
      expect(state.history.referenceContextItem).toEqual(ctx("m2", { turn_id: "t2" }));
    },
  );

  it("a turn_context carrying another turn's id is not paired with the turn", () => {
    const state = rebuild([
      taskStarted("t1"),
      item(user("U1")),
      userMessageEvent("U1"),
      turnContext(ctx("stray", { turn_id: "t9" })),
      taskComplete("t1"),
    ]);
    expect(state.previousTurnSettings).toBeUndefined();
    expect(state.history.referenceContextItem).toBeUndefined();
  });

  it("a turn ended by turn_aborted still hydrates its settings", () => {
    const state = rebuild([
      taskStarted("t1"),
      turnContext(ctx("m1", { turn_id: "t1" })),
      item(user("U1")),
      userMessageEvent("U1"),
      turnAborted("t1"),
    ]);
    expect(state.previousTurnSettings).toEqual({ model: "m1" });
    expect(state.history.referenceContextItem).toEqual(ctx("m1", { turn_id: "t1" }));
  });

  it("a turn_aborted with a turn id and no open segment starts one, which closes only at that turn's task_started", () => {
    const lines = [
      ...turn({ id: "t1", input: "U1", model: "m1" }),
      ...turn({ id: "t2", input: "U2", model: "m2" }),
    ];
    expect(rebuild([...lines, rollback(1)]).previousTurnSettings).toEqual({ model: "m1" });
    // The abort of a turn whose start was never written groups both turns into one segment, so
    // one rolled-back turn discards both turns' metadata.
    expect(
      rebuild([...lines, turnAborted("t3"), rollback(1)]).previousTurnSettings,
    ).toBeUndefined();
    // Without a turn id it is ignored.
    expect(rebuild([...lines, turnAborted(), rollback(1)]).previousTurnSettings).toEqual({
      model: "m1",
    });
  });

  it("a message injected after a turn shares that turn's segment, so rolling it back drops the turn's metadata too", () => {
    const state = rebuild([
      ...turn({ id: "t1", input: "U1", reply: "A1", model: "m1" }),
      item(user("injected")),
      rollback(1),
    ]);
    // History loses only the injected message (drop_last_n_user_turns on the materialized
    // history), while the reverse scan discards the whole segment it joined.
    expect(state.history.items).toEqual([user("U1"), assistant("A1")]);
    expect(state.previousTurnSettings).toBeUndefined();
    expect(state.history.referenceContextItem).toBeUndefined();
  });

  it("an inter-agent communication is recorded as an assistant message and counts as a user turn", () => {
    const line = interAgentLine("continue");
    const text = JSON.stringify(line.payload);
    const state = rebuild([line, item(assistant("working"))]);
    expect(state.history.items).toEqual([assistant(text), assistant("working")]);
    expect(rebuild([line, item(assistant("working")), rollback(1)]).history.items).toEqual([]);
  });

  it("the scan stops once base, settings and reference are known, so an older window number is not read", () => {
    const older = [
      ...turn({ id: "t1", input: "U1", model: "m1" }),
      ...compactionTask("c1", compacted("s1", [user("s1")], 3)),
    ];
    const newer = [
      taskStarted("t2"),
      turnContext(ctx("m2", { turn_id: "t2" })),
      item(user("U2")),
      userMessageEvent("U2"),
      compacted("s2", [user("U2"), user("s2")]),
      taskComplete("t2"),
    ];
    // The newest compaction has no window number: the scan stopped before the older one's, so
    // the number falls back to the count of compactions.
    expect(rebuild([...older, ...newer]).windowNumber).toBe(2);
    // Without a base in the newest turn, the scan reads on and finds it.
    expect(rebuild([...older, ...turn({ id: "t2", input: "U2" })]).windowNumber).toBe(3);
  });
});

describe("isHistoryRewrite", () => {
  it("counts compactions (legacy ones too) and rollbacks of at least one turn, nothing else", () => {
    expect(isHistoryRewrite(compacted("summary", [user("U1")], 1))).toBe(true);
    expect(isHistoryRewrite(compacted("summary"))).toBe(true);
    expect(isHistoryRewrite(rollback(1))).toBe(true);
    expect(isHistoryRewrite(rollback(0))).toBe(false);
    expect(isHistoryRewrite(item(user("U1")))).toBe(false);
  });
});

describe("forward materialization (reference §6.2)", () => {
  it("history starts from the newest surviving replacement history; later rewrites bump the version", () => {
    const state = rebuild([
      ...turn({ id: "t1", input: "U1", reply: "A1", model: "m1" }),
      ...compactionTask("c", compacted("summary", [user("U1"), user("summary")], 2)),
      ...turn({ id: "t2", input: "U2", reply: "A2", model: "m2" }),
      rollback(1),
    ]);
    expect(state).toEqual({
      history: { items: [user("U1"), user("summary")], historyVersion: 2 },
      previousTurnSettings: { model: "m1" },
      windowNumber: 2,
      rewrites: 2,
      warnings: [],
    });
  });

  it("a rollback that discards a compaction's turn materializes from an older base", () => {
    const state = rebuild([
      ...turn({ id: "t1", input: "U1", reply: "A1", model: "m1" }),
      taskStarted("t2"),
      turnContext(ctx("m2", { turn_id: "t2" })),
      item(user("U2")),
      userMessageEvent("U2"),
      compacted("summary", [user("U1"), user("U2"), user("summary")]),
      item(assistant("A2")),
      taskComplete("t2"),
      rollback(1),
    ]);
    // The rollback drops the newest user boundary of the materialized history (the summary).
    expect(state.history).toEqual({
      items: [user("U1"), user("U2")],
      historyVersion: 2,
      referenceContextItem: ctx("m1", { turn_id: "t1" }),
    });
    expect(state.previousTurnSettings).toEqual({ model: "m1" });
  });

  it("re-recording drops non-API items and truncates tool outputs", () => {
    const long = Array.from({ length: 400 }, (_, i) => `line ${i}`).join("\n");
    const state = reconstructRollout(
      [
        item({ type: "message", role: "system", content: [{ type: "input_text", text: "sys" }] }),
        item({ type: "function_call", name: "exec", arguments: "{}", call_id: "c1" }),
        item({ type: "function_call_output", call_id: "c1", output: long }),
      ],
      { truncation: { mode: "tokens", limit: 50 } },
    );
    const [call, output] = state.history.items;
    expect(state.history.items).toHaveLength(2);
    expect(call).toEqual({ type: "function_call", name: "exec", arguments: "{}", call_id: "c1" });
    expect(output?.type).toBe("function_call_output");
    const text = output?.type === "function_call_output" ? output.output : undefined;
    expect(typeof text === "string" && text.includes("tokens truncated")).toBe(true);
    expect(typeof text === "string" && text.length < long.length).toBe(true);
  });

  it("contextual user messages survive a rollback as session prefix", () => {
    const state = rebuild([
      item(user(ENV_CONTEXT)),
      ...turn({ id: "t1", input: "U1", reply: "A1" }),
      rollback(1),
    ]);
    expect(state.history.items).toEqual([user(ENV_CONTEXT)]);
  });
});

describe("outputs (reference §6.3)", () => {
  it("token info is the newest token_count whose info is not null", () => {
    const state = rebuild([
      tokenCount(usage(10)),
      ...turn({ id: "t1", input: "U1" }),
      tokenCount(usage(20)),
      tokenCount(null),
    ]);
    expect(state.history.tokenInfo).toEqual(usage(20));
  });

  it("token info survives a rollback of the turn that reported it", () => {
    const state = rebuild([...turn({ id: "t1", input: "U1" }), tokenCount(usage(7)), rollback(1)]);
    expect(state.history.tokenInfo).toEqual(usage(7));
  });

  it("the window number is the newest surviving compaction's, else the count of compactions", () => {
    expect(rebuild([compacted("a", [user("a")], 7)]).windowNumber).toBe(7);
    expect(rebuild([compacted("a", [user("a")]), compacted("b", [user("b")])]).windowNumber).toBe(
      2,
    );
  });
});

describe("world-state replay (reference §6.4)", () => {
  it("a full snapshot sets the baseline and a patch merges into it (RFC 7386)", () => {
    const state = rebuild([
      ...turn({
        id: "t1",
        input: "U1",
        worldState: worldStateFull({ env: { cwd: "/a", shell: "zsh" }, perm: { on: true } }),
      }),
      ...turn({
        id: "t2",
        input: "U2",
        worldState: worldStatePatch({ env: { cwd: "/b", shell: null }, perm: null }),
      }),
    ]);
    expect(state.history.worldStateBaseline).toEqual({ env: { cwd: "/b" } });
    expect(state.warnings).toEqual([]);
  });

  it("a compaction resets the baseline until the next full snapshot", () => {
    const lines = [
      ...turn({ id: "t1", input: "U1", worldState: worldStateFull({ env: { cwd: "/a" } }) }),
      ...compactionTask("c", compacted("s", [user("s")])),
    ];
    expect(rebuild(lines).history.worldStateBaseline).toBeUndefined();
    const next = rebuild([
      ...lines,
      ...turn({ id: "t2", input: "U2", worldState: worldStateFull({ env: { cwd: "/c" } }) }),
    ]);
    expect(next.history.worldStateBaseline).toEqual({ env: { cwd: "/c" } });
  });

  it("a patch without a baseline is skipped with a warning", () => {
    const state = rebuild([
      ...turn({ id: "t1", input: "U1", worldState: worldStatePatch({ env: { cwd: "/x" } }) }),
    ]);
    expect(state.history.worldStateBaseline).toBeUndefined();
    expect(state.warnings).toEqual([PATCH_WITHOUT_SNAPSHOT]);

    const recovered = rebuild([
      ...turn({ id: "t1", input: "U1", worldState: worldStatePatch({ env: { cwd: "/x" } }) }),
      ...turn({ id: "t2", input: "U2", worldState: worldStateFull({ env: { cwd: "/y" } }) }),
      ...turn({ id: "t3", input: "U3", worldState: worldStatePatch({ perm: { on: true } }) }),
    ]);
    expect(recovered.history.worldStateBaseline).toEqual({
      env: { cwd: "/y" },
      perm: { on: true },
    });
    expect(recovered.warnings).toEqual([PATCH_WITHOUT_SNAPSHOT]);
  });

  it("an unreadable world_state line clears the baseline with a warning", () => {
    const corrupt = decodeRolloutLine(
      '{"timestamp":"t","type":"world_state","payload":{"full":true,"state":"oops"}}',
    );
    expect(corrupt).toEqual({
      ...unreadableWorldState(),
      timestamp: "t",
      payload: corrupt.payload,
    });
    const state = rebuild([
      ...turn({ id: "t1", input: "U1", worldState: worldStateFull({ env: { cwd: "/a" } }) }),
      ...turn({ id: "t2", input: "U2", worldState: corrupt }),
      ...turn({ id: "t3", input: "U3", worldState: worldStatePatch({ env: { cwd: "/b" } }) }),
    ]);
    expect(state.history.worldStateBaseline).toBeUndefined();
    expect(state.warnings).toEqual([UNREADABLE, PATCH_WITHOUT_SNAPSHOT]);
  });

  it("records older than the newest compaction are not replayed and raise no warnings", () => {
    const state = rebuild([
      ...turn({ id: "t1", input: "U1", worldState: worldStatePatch({ env: { cwd: "/x" } }) }),
      ...compactionTask("c", compacted("s", [user("s")])),
      ...turn({ id: "t2", input: "U2", worldState: worldStateFull({ env: { cwd: "/y" } }) }),
    ]);
    expect(state.history.worldStateBaseline).toEqual({ env: { cwd: "/y" } });
    expect(state.warnings).toEqual([]);
  });

  it("a rolled-back turn's patch never applies", () => {
    const state = rebuild([
      ...turn({ id: "t1", input: "U1", worldState: worldStateFull({ n: 1 }) }),
      ...turn({ id: "t2", input: "U2", worldState: worldStatePatch({ n: 2 }) }),
      rollback(1),
      ...turn({ id: "t3", input: "U3", worldState: worldStatePatch({ m: 3 }) }),
    ]);
    expect(state.history.worldStateBaseline).toEqual({ n: 1, m: 3 });
  });
});
