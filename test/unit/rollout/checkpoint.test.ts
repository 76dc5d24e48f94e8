import { describe, expect, it } from "vitest";
import {
  ContextManager,
  estimateItemBytes,
  estimateItemTokenCount,
  SealedItems,
} from "../../../shared/context-manager/index.ts";
import type { RolloutLine } from "../../../shared/protocol/index.ts";
import {
  type Checkpoint,
  createCheckpoint,
  DEFAULT_MAX_ROLLBACK_TURNS,
  extendCheckpoint,
  type ReconstructedState,
  reconstructFromCheckpoint,
  reconstructRollout,
  restoreCheckpoint,
} from "../../../shared/rollout/index.ts";
import {
  assistant,
  compacted,
  ctx,
  item,
  POLICY,
  rollback,
  taskComplete,
  taskStarted,
  tokenCount,
  turn,
  turnContext,
  usage,
  user,
  worldStateFull,
  worldStatePatch,
} from "./builders.ts";

const opts = { truncation: POLICY };

const TWO_TURNS: RolloutLine[] = [
  ...turn({
    id: "t1",
    input: "U1",
    reply: "A1",
    model: "m1",
    worldState: worldStateFull({ env: { cwd: "/a" } }),
  }),
  ...turn({
    id: "t2",
    input: "U2",
    reply: "A2",
    model: "m2",
    worldState: worldStatePatch({ env: { cwd: "/b" } }),
  }),
];

function json(checkpoint: Checkpoint): Checkpoint {
  return JSON.parse(JSON.stringify(checkpoint)) as Checkpoint;
}

describe("restoreCheckpoint", () => {
  it("freezes the parsed items, which a restored history then shares instead of copying", () => {
    const parsed = restoreCheckpoint(json(createCheckpoint(TWO_TURNS, opts)));
    expect(parsed.items).toEqual([user("U1"), assistant("A1"), user("U2"), assistant("A2")]);
    for (const item of parsed.items) {
      expect(Object.isFrozen(item)).toBe(true);
      if (item.type === "message") expect(Object.isFrozen(item.content[0])).toBe(true);
    }
    const history = new ContextManager({ items: parsed.items });
    history.items.forEach((item, i) => {
      expect(item).toBe(parsed.items[i]);
    });
  });

  it("gives the items their saved byte counts, unless those do not fit the items", () => {
    const stored = json(createCheckpoint(TWO_TURNS, opts));
    // Marker values no estimator would produce for these items show the cache was seeded.
    const primed = restoreCheckpoint(json({ ...stored, itemBytes: [400, 404, 408, 412] }));
    expect(primed.items.map(estimateItemBytes)).toEqual([400, 404, 408, 412]);
    expect(primed.items.map(estimateItemTokenCount)).toEqual([100, 101, 102, 103]);
    for (const itemBytes of [[400, 404, 408], [1, 2, -3, 4], ["1", 2, 3, 4], undefined]) {
      const ignored = restoreCheckpoint(json({ ...stored, itemBytes } as Checkpoint));
      expect(ignored.items.map(estimateItemBytes)).toEqual(stored.itemBytes);
    }
  });
});

describe("checkpoint contents", () => {
  it("holds the materialized items, totals, the recent window's scan entries and a summary of the rest", () => {
    const checkpoint = createCheckpoint(TWO_TURNS, { ...opts, maxRollbackTurns: 1 });
    expect(checkpoint).toEqual({
      version: 1,
      lastSeq: 14,
      lineCount: 14,
      truncation: POLICY,
      maxRollbackTurns: 1,
      items: [user("U1"), assistant("A1"), user("U2"), assistant("A2")],
      itemBytes: [user("U1"), assistant("A1"), user("U2"), assistant("A2")].map(estimateItemBytes),
      rewrites: 0,
      legacyCompactions: 0,
      compactions: 0,
      tasksStarted: true,
      recent: [
        { type: "turn_started", turnId: "t2" },
        { type: "turn_context", item: ctx("m2", { turn_id: "t2" }) },
        { type: "world_state", record: { kind: "patch", patch: { env: { cwd: "/b" } } } },
        { type: "items", userTurn: true },
        { type: "turn_complete", turnId: "t2" },
      ],
      older: {
        previousTurnSettings: { ordinal: 1, value: { model: "m1" } },
        reference: { ordinal: 1, item: ctx("m1", { turn_id: "t1" }) },
        worldState: { baseline: { env: { cwd: "/a" } }, warnings: [] },
      },
    });
    expect(json(checkpoint)).toEqual(checkpoint);
  });

  it("keeps every line in its window while the rollout has fewer user turns than the window", () => {
    const checkpoint = createCheckpoint(TWO_TURNS, opts);
    expect(checkpoint.maxRollbackTurns).toBe(DEFAULT_MAX_ROLLBACK_TURNS);
    expect(checkpoint.older).toBeUndefined();
    expect(checkpoint.recent).toHaveLength(10);
  });

  it("stores a full world-state snapshot once, as written, however many turns patch it", () => {
    const lines = [
      ...turn({
        id: "t0",
        input: "U0",
        worldState: worldStateFull({ env: { cwd: "/unique-root" } }),
      }),
      ...Array.from({ length: 6 }, (_, i) =>
        turn({ id: `t${i + 1}`, input: `U${i + 1}`, worldState: worldStatePatch({ n: i }) }),
      ).flat(),
    ];
    const text = JSON.stringify(createCheckpoint(lines, opts));
    expect(text.split("/unique-root").length - 1).toBe(1);
  });

  it("lastSeq follows the caller's numbering when given", () => {
    const first = createCheckpoint(TWO_TURNS.slice(0, 7), { ...opts, lastSeq: 107 });
    expect(first.lastSeq).toBe(107);
    const second = extendCheckpoint(first, TWO_TURNS.slice(7), opts);
    expect(second).toMatchObject({ lastSeq: 114, lineCount: 14 });
  });
});

describe("reconstructFromCheckpoint (design §10 invariant 7)", () => {
  it("with no later lines equals full replay", () => {
    const checkpoint = json(createCheckpoint(TWO_TURNS, { ...opts, maxRollbackTurns: 1 }));
    expect(reconstructFromCheckpoint(checkpoint, [], opts)).toEqual(
      reconstructRollout(TWO_TURNS, opts),
    );
    expect(reconstructFromCheckpoint(createCheckpoint([], opts), [], opts)).toEqual(
      reconstructRollout([], opts),
    );
  });

  it("a rollback into the checkpoint's window restores the older turn's settings, reference and baseline", () => {
    const checkpoint = json(createCheckpoint(TWO_TURNS, { ...opts, maxRollbackTurns: 1 }));
    const state = reconstructFromCheckpoint(checkpoint, [rollback(1)], opts);
    expect(state).toEqual({
      history: {
        items: [user("U1"), assistant("A1")],
        historyVersion: 1,
        referenceContextItem: ctx("m1", { turn_id: "t1" }),
        worldStateBaseline: { env: { cwd: "/a" } },
      },
      previousTurnSettings: { model: "m1" },
      windowNumber: 0,
      rewrites: 1,
      warnings: [],
    });
    expect(state).toEqual(reconstructRollout([...TWO_TURNS, rollback(1)], opts));
  });

  it("a rollback past the checkpoint's window needs a full replay", () => {
    const checkpoint = createCheckpoint(TWO_TURNS, { ...opts, maxRollbackTurns: 1 });
    expect(reconstructFromCheckpoint(checkpoint, [rollback(2)], opts)).toEqual({
      needsFullReplay: true,
      reason: "a rollback reaches 1 user turn(s) past the checkpoint's window",
    });
  });

  it("a turn that continues across the checkpoint is rebuilt exactly", () => {
    const lines = [
      ...TWO_TURNS,
      taskStarted("t3"),
      turnContext(ctx("m3", { turn_id: "t3" })),
      worldStatePatch({ env: { cwd: "/c" } }),
      item(user("U3")),
      item(assistant("A3")),
      tokenCount(usage(33)),
      taskComplete("t3"),
    ];
    for (let k = 14; k < lines.length; k++) {
      const checkpoint = json(
        createCheckpoint(lines.slice(0, k), { ...opts, maxRollbackTurns: 0 }),
      );
      expect(reconstructFromCheckpoint(checkpoint, lines.slice(k), opts)).toEqual(
        reconstructRollout(lines, opts),
      );
    }
  });

  it("a message injected after the checkpoint joins its last turn, as in full replay", () => {
    const later = [item(user("injected")), rollback(1)];
    const checkpoint = createCheckpoint(TWO_TURNS, { ...opts, maxRollbackTurns: 0 });
    const state = reconstructFromCheckpoint(checkpoint, later, opts);
    expect(state).toEqual(reconstructRollout([...TWO_TURNS, ...later], opts));
    expect(state).toMatchObject({ previousTurnSettings: { model: "m1" } });
  });

  it("a compaction after the checkpoint rebuilds history from its replacement history", () => {
    const later = [
      taskStarted("c"),
      compacted("summary", [user("summary")], 4),
      taskComplete("c"),
      ...turn({ id: "t3", input: "U3", reply: "A3", model: "m3" }),
    ];
    const checkpoint = createCheckpoint(TWO_TURNS, { ...opts, maxRollbackTurns: 1 });
    const state = reconstructFromCheckpoint(checkpoint, later, opts);
    expect(state).toEqual(reconstructRollout([...TWO_TURNS, ...later], opts));
    expect(state).toMatchObject({
      history: { items: [user("summary"), user("U3"), assistant("A3")], historyVersion: 1 },
      windowNumber: 4,
    });
  });

  it("a rollback that discards the checkpoint's base compaction counts history rewrites from the older base", () => {
    const lines = [
      ...TWO_TURNS,
      taskStarted("t3"),
      turnContext(ctx("m3", { turn_id: "t3" })),
      item(user("U3")),
      compacted("s3", [user("U3"), user("s3")]),
      item(assistant("A3")),
      taskComplete("t3"),
    ];
    const checkpoint = createCheckpoint(lines, { ...opts, maxRollbackTurns: 2 });
    const state = reconstructFromCheckpoint(checkpoint, [rollback(1)], opts);
    expect(state).toEqual(reconstructRollout([...lines, rollback(1)], opts));
    expect(state).toMatchObject({
      history: { historyVersion: 2 },
      previousTurnSettings: { model: "m2" },
    });
  });

  it("a line that pulls the window's first turn into a later one needs a full replay", () => {
    const checkpoint = createCheckpoint(TWO_TURNS, { ...opts, maxRollbackTurns: 0 });
    const stray = [turnContext(ctx("stray", { turn_id: "elsewhere" }))];
    expect(reconstructFromCheckpoint(checkpoint, stray, opts)).toEqual({
      needsFullReplay: true,
      reason: "a turn reaches back past the start of the checkpoint's window",
    });
  });

  it("another truncation policy needs a full replay", () => {
    const checkpoint = createCheckpoint(TWO_TURNS, opts);
    const other = { truncation: { mode: "bytes" as const, limit: 10_000 } };
    const reason = "the truncation policy differs from the checkpoint's";
    expect(reconstructFromCheckpoint(checkpoint, [], other)).toEqual({
      needsFullReplay: true,
      reason,
    });
    expect(extendCheckpoint(checkpoint, [], other)).toEqual({ needsFullReplay: true, reason });
  });
});

describe("extendCheckpoint", () => {
  it("equals a checkpoint of all the lines", () => {
    const lines = [...TWO_TURNS, ...turn({ id: "t3", input: "U3", model: "m3" })];
    for (let k = 0; k <= lines.length; k++) {
      const first = json(createCheckpoint(lines.slice(0, k), { ...opts, maxRollbackTurns: 1 }));
      expect(extendCheckpoint(first, lines.slice(k), opts)).toEqual(
        createCheckpoint(lines, { ...opts, maxRollbackTurns: 1 }),
      );
    }
  });

  it("after a rollback deeper than the window, keeps answering with full replays until rebuilt", () => {
    const first = createCheckpoint(TWO_TURNS, { ...opts, maxRollbackTurns: 1 });
    const later = [
      rollback(2),
      ...turn({ id: "t3", input: "U3" }),
      ...turn({ id: "t4", input: "U4" }),
    ];
    const second = extendCheckpoint(first, later, opts);
    if ("needsFullReplay" in second) throw new Error(second.reason);
    expect(reconstructFromCheckpoint(second, [], opts)).toMatchObject({ needsFullReplay: true });
    const rebuilt = createCheckpoint([...TWO_TURNS, ...later], { ...opts, maxRollbackTurns: 1 });
    expect(reconstructFromCheckpoint(rebuilt, [], opts)).toEqual(
      reconstructRollout([...TWO_TURNS, ...later], opts),
    );
  });
});

describe("a checkpoint whose first items are stored runs (a store loads them unread)", () => {
  const lines = [...TWO_TURNS, ...turn({ id: "t3", input: "U3", reply: "A3", model: "m3" })];

  /** The checkpoint with its first `split` items moved into a stored run that counts its reads. */
  function withRun(checkpoint: Checkpoint, split: number) {
    const stored = json(checkpoint);
    const text = JSON.stringify({ items: stored.items.slice(0, split) });
    const reads = { count: 0 };
    const run = new SealedItems(split, () => {
      reads.count += 1;
      return JSON.parse(text);
    });
    const sealed: Checkpoint = {
      ...stored,
      sealed: [run],
      items: stored.items.slice(split),
      itemBytes: stored.itemBytes?.slice(split) ?? [],
    };
    return { checkpoint: restoreCheckpoint(sealed), run, reads };
  }

  /** The state with its runs read into plain items. */
  function plain(state: ReconstructedState): ReconstructedState {
    const history = new ContextManager(state.history);
    history.readSealed();
    return { ...state, history: history.toState() };
  }

  it("reconstructs the same state, and later lines that only append leave the run unread", () => {
    const base = createCheckpoint(TWO_TURNS, opts);
    const later = lines.slice(TWO_TURNS.length);
    const { checkpoint, run, reads } = withRun(base, 3);
    const state = reconstructFromCheckpoint(checkpoint, later, opts);
    if ("needsFullReplay" in state) throw new Error(state.reason);
    expect(reads.count).toBe(0);
    expect(state.history.sealed?.[0]).toBe(run);
    expect(plain(state)).toEqual(reconstructRollout(lines, opts));
  });

  it("extends into a checkpoint holding the very same run, still unread", () => {
    const base = createCheckpoint(TWO_TURNS, opts);
    const { checkpoint, run, reads } = withRun(base, 3);
    const next = extendCheckpoint(checkpoint, lines.slice(TWO_TURNS.length), opts);
    if ("needsFullReplay" in next) throw new Error(next.reason);
    expect(next.sealed).toEqual([run]);
    expect(next.sealed?.[0]).toBe(run);
    expect(reads.count).toBe(0);
    const whole = createCheckpoint(lines, opts);
    expect(next.items).toEqual(whole.items.slice(3));
    expect(next.itemBytes).toEqual(whole.itemBytes?.slice(3));
  });

  it("a rollback in the later lines reads the run, and the next checkpoint holds plain items", () => {
    const base = createCheckpoint(lines, opts);
    const later = [rollback(1), ...turn({ id: "t4", input: "U4" })];
    const { checkpoint, reads } = withRun(base, 4);
    const next = extendCheckpoint(checkpoint, later, opts);
    if ("needsFullReplay" in next) throw new Error(next.reason);
    expect(reads.count).toBe(1);
    expect(next.sealed).toBeUndefined();
    expect(next).toEqual(createCheckpoint([...lines, ...later], opts));
  });
});
