import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ContextManager,
  estimateItemBytes,
  SealedItems,
  summarizeRun,
} from "../../../shared/context-manager/index.ts";
import type { ResponseItem } from "../../../shared/protocol/index.ts";
import { LocalModelClient } from "../../../shared/providers/index.ts";
import { historyArb, modalitiesArb } from "./arbitraries.ts";
import {
  assistant,
  DEFAULT_POLICY,
  developer,
  ENV_CONTEXT,
  functionCall,
  functionOutput,
  historyWith,
  PERMISSIONS,
  user,
} from "./builders.ts";

/** A run as a checkpoint store makes one: JSON text, parsed by `read`, which counts its calls. */
function storedRun(items: ResponseItem[], { bytes, summarized = false }: RunOptions = {}) {
  const text = JSON.stringify({ items, ...(bytes ? { bytes } : {}) });
  const reads = { count: 0 };
  const summary = summarized ? summarizeRun(items) : undefined;
  const run = new SealedItems(
    items.length,
    () => {
      reads.count += 1;
      return JSON.parse(text);
    },
    summary,
  );
  return { run, reads };
}

interface RunOptions {
  bytes?: number[];
  /** Saved with a summary, as a checkpoint store writes runs now. */
  summarized?: boolean;
}

const first = [user("q1"), assistant("a1"), functionCall("c1")];
const second = [functionOutput("c1"), user("q2"), assistant("a2")];
const tail = [user("q3")];

/** A history of two stored runs and one item of its own, and the same history built plainly. */
function restored() {
  const a = storedRun(first);
  const b = storedRun(second);
  const cm = new ContextManager({ sealed: [a.run, b.run], items: tail, historyVersion: 2 });
  const plain = new ContextManager({ items: [...first, ...second, ...tail], historyVersion: 2 });
  return { cm, plain, runs: [a, b] };
}

describe("SealedItems", () => {
  it("reads its items once, frozen, with their byte counts as saved", () => {
    const { run, reads } = storedRun([user("a"), assistant("b")], { bytes: [1000, 2000] });
    expect(run.parsed).toBe(false);
    expect(reads.count).toBe(0);
    const items = run.items;
    expect(items).toEqual([user("a"), assistant("b")]);
    expect(run.items).toBe(items);
    expect(reads.count).toBe(1);
    expect(run.parsed).toBe(true);
    expect(Object.isFrozen(items[0])).toBe(true);
    expect(items.map(estimateItemBytes)).toEqual([1000, 2000]);
  });

  it("throws when the stored run holds another number of items than recorded", () => {
    const run = new SealedItems(3, () => ({ items: [user("a"), user("b")] }));
    expect(() => run.items).toThrow(/run of 3 history items/);
  });
});

describe("a history that starts with stored runs", () => {
  it("holds the same items as one built from plain items, read only when items are asked for", () => {
    const { cm, plain, runs } = restored();
    expect(cm.length).toBe(7);
    expect(runs.map((r) => r.reads.count)).toEqual([0, 0]);
    expect(cm.items).toEqual(plain.items);
    expect(runs.map((r) => r.reads.count)).toEqual([1, 1]);
    expect(cm.forPrompt(["text"])).toEqual(plain.forPrompt(["text"]));
    expect(cm.toState()).toEqual(plain.toState());
  });

  it("appends without reading its runs, and the appended items come after them", () => {
    const { cm, plain, runs } = restored();
    const recorded = cm.recordItems([assistant("a3"), user("q4")], DEFAULT_POLICY);
    plain.recordItems([assistant("a3"), user("q4")], DEFAULT_POLICY);
    expect(recorded).toEqual([assistant("a3"), user("q4")]);
    expect(Object.isFrozen(recorded[0])).toBe(true);
    expect(cm.length).toBe(9);
    expect(runs.map((r) => r.reads.count)).toEqual([0, 0]);
    expect(cm.items).toEqual(plain.items);
  });

  it("slice reads only the runs the range falls in", () => {
    const { cm, plain, runs } = restored();
    expect(cm.slice(0, 2)).toEqual(plain.items.slice(0, 2));
    expect(runs.map((r) => r.reads.count)).toEqual([1, 0]);
    expect(cm.slice(6, 7)).toEqual([user("q3")]);
    expect(runs.map((r) => r.reads.count)).toEqual([1, 0]);
    expect(cm.slice(2, 5)).toEqual(plain.items.slice(2, 5));
    expect(cm.slice(5, 50)).toEqual(plain.items.slice(5));
    expect(cm.slice(7, 9)).toEqual([]);
    expect(runs.map((r) => r.reads.count)).toEqual([1, 1]);
  });

  it("keeps unread runs in its state and its clones, and reads them once for all", () => {
    const { cm, runs } = restored();
    const state = cm.toState();
    expect(state.sealed?.map((r) => r.count)).toEqual([3, 3]);
    expect(state.items).toEqual(tail);
    const copy = cm.clone();
    copy.recordItems([assistant("a3")], DEFAULT_POLICY);
    const rebuilt = new ContextManager(state);
    expect(runs.map((r) => r.reads.count)).toEqual([0, 0]);
    expect(copy.items).toEqual([...first, ...second, ...tail, assistant("a3")]);
    expect(rebuilt.items).toEqual([...first, ...second, ...tail]);
    expect(cm.items).toEqual([...first, ...second, ...tail]);
    // The runs keep what they read: every manager shares the same item objects.
    expect(runs.map((r) => r.reads.count)).toEqual([1, 1]);
    expect(copy.items[0]).toBe(cm.items[0]);
    cm.readSealed();
    expect(cm.toState().sealed).toBeUndefined();
  });

  it("a replacement drops its runs unread; a removal or rollback reads them first", () => {
    const replaced = restored();
    replaced.cm.replace([user("summary")]);
    expect(replaced.cm.items).toEqual([user("summary")]);
    expect(replaced.runs.map((r) => r.reads.count)).toEqual([0, 0]);

    const { cm, plain } = restored();
    cm.removeFirstItem();
    plain.removeFirstItem();
    expect(cm.items).toEqual(plain.items);

    const rolled = restored();
    rolled.cm.dropLastNUserTurns(2);
    rolled.plain.dropLastNUserTurns(2);
    expect(rolled.cm.items).toEqual(rolled.plain.items);
    expect(rolled.cm.historyVersion).toBe(rolled.plain.historyVersion);
  });

  it("with summaries, what a turn asks of history reads no run", () => {
    const runA = [developer(PERMISSIONS), user(ENV_CONTEXT), ...first];
    const a = storedRun(runA, { summarized: true });
    const b = storedRun(second, { summarized: true });
    const tailItems = [user("q3"), assistant("a3")];
    const cm = new ContextManager({ sealed: [a.run, b.run], items: tailItems });
    const plain = new ContextManager({ items: [...runA, ...second, ...tailItems] });
    const model = new LocalModelClient();
    const prompt = (h: ContextManager) => ({
      instructions: "",
      input: h.promptInput(["text"]),
      tools: [],
      parallel_tool_calls: false,
    });
    expect(model.respond(prompt(cm))).toEqual(model.respond(prompt(plain)));
    expect(model.usage(prompt(cm), assistant("x"))).toEqual(
      model.usage(prompt(plain), assistant("x")),
    );
    expect(cm.someRetainedText((_r, text) => text === PERMISSIONS)).toBe(true);
    expect(
      cm.someRetainedText(
        (_r, text) => text === "<environment_context>other</environment_context>",
      ),
    ).toBe(false);
    expect(cm.estimateTokenCount("base")).toBe(plain.estimateTokenCount("base"));
    expect(cm.getTotalTokenUsage(false)).toBe(plain.getTotalTokenUsage(false));
    expect([a.run.parsed, b.run.parsed]).toEqual([false, false]);
    // A run that needs a synthetic output is read, and only that one.
    const open = storedRun([functionCall("lost")], { summarized: true });
    const clean = storedRun([user("x"), assistant("y")], { summarized: true });
    new ContextManager({ sealed: [open.run, clean.run], items: [user("q")] }).promptInput(["text"]);
    expect([open.run.parsed, clean.run.parsed]).toEqual([true, false]);
  });

  it("estimates tokens as a plain history does", () => {
    const { cm, plain } = restored();
    expect(cm.estimateTokenCount("base")).toBe(plain.estimateTokenCount("base"));
    expect(cm.getTotalTokenUsage(false)).toBe(plain.getTotalTokenUsage(false));
  });

  it("a plain history is unchanged by the new methods", () => {
    const cm = historyWith([user("a"), assistant("b")]);
    expect(cm.length).toBe(2);
    expect(cm.slice(1, 2)).toEqual([assistant("b")]);
    expect(cm.toState().sealed).toBeUndefined();
  });
});

type HistoryOp =
  | { kind: "record"; items: ResponseItem[] }
  | { kind: "removeFirst" | "removeLast" | "images" }
  | { kind: "rollback"; turns: number }
  | { kind: "replace"; keep: number }
  | { kind: "slice"; start: number; length: number }
  | { kind: "prompt"; modalities: ("text" | "image")[] }
  | { kind: "tokens"; serverReasoning: boolean }
  | { kind: "retained" }
  | { kind: "local"; modalities: ("text" | "image")[] }
  | { kind: "clone" };

const historyOpArb: fc.Arbitrary<HistoryOp> = fc.oneof(
  historyArb.map((items) => ({ kind: "record" as const, items })),
  fc.constantFrom(
    { kind: "removeFirst" as const },
    { kind: "removeLast" as const },
    { kind: "images" as const },
    { kind: "clone" as const },
    { kind: "retained" as const },
  ),
  fc.constantFrom(user(ENV_CONTEXT), developer(PERMISSIONS)).map((item) => ({
    kind: "record" as const,
    items: [item],
  })),
  modalitiesArb.map((modalities) => ({ kind: "local" as const, modalities })),
  fc.nat({ max: 3 }).map((turns) => ({ kind: "rollback" as const, turns })),
  fc.nat({ max: 4 }).map((keep) => ({ kind: "replace" as const, keep })),
  fc
    .record({ start: fc.nat({ max: 40 }), length: fc.nat({ max: 40 }) })
    .map((r) => ({ kind: "slice" as const, ...r })),
  modalitiesArb.map((modalities) => ({ kind: "prompt" as const, modalities })),
  fc.boolean().map((serverReasoning) => ({ kind: "tokens" as const, serverReasoning })),
);

/** What an operation answers, for comparing two histories. */
function apply(cm: ContextManager, op: HistoryOp): unknown {
  switch (op.kind) {
    case "record":
      return cm.recordItems(op.items, DEFAULT_POLICY);
    case "removeFirst":
      return cm.removeFirstItem();
    case "removeLast":
      return cm.removeLastItem();
    case "images":
      return cm.replaceLastTurnImages("[image removed]");
    case "rollback":
      return cm.dropLastNUserTurns(op.turns);
    case "replace":
      return cm.replace(cm.slice(0, op.keep));
    case "slice":
      return cm.slice(op.start, op.start + op.length);
    case "prompt":
      return cm.forPrompt(op.modalities);
    case "tokens":
      return [cm.getTotalTokenUsage(op.serverReasoning), cm.estimateTokenCount("base"), cm.length];
    case "retained":
      // The world-state sections' kind of matcher: a fragment's markers.
      return [ENV_CONTEXT, PERMISSIONS].map((fragment) =>
        cm.someRetainedText((_role, text) => text === fragment),
      );
    case "local": {
      // The local model reads the input's length, last user message and token estimate.
      const model = new LocalModelClient();
      const prompt = {
        instructions: "",
        input: cm.promptInput(op.modalities),
        tools: [],
        parallel_tool_calls: false,
      };
      return [model.respond(prompt), model.usage(prompt, assistant("answer")), prompt.input.length];
    }
    case "clone": {
      // A clone writes on its own: the original must not see it.
      const copy = cm.clone();
      copy.recordItems([user("in the clone")], DEFAULT_POLICY);
      return copy.items;
    }
  }
}

describe("a history with stored runs, under any operations", () => {
  it("answers and ends exactly like the same history held as plain items", () => {
    fc.assert(
      fc.property(
        historyArb,
        fc.subarray([user(ENV_CONTEXT), developer(PERMISSIONS)]),
        fc.nat({ max: 40 }),
        fc.array(fc.record({ at: fc.nat({ max: 40 }), summarized: fc.boolean() }), {
          maxLength: 4,
        }),
        fc.array(historyOpArb, { maxLength: 12 }),
        (generated, fragments, at, cuts, ops) => {
          const history = [...generated];
          history.splice(Math.min(at, history.length), 0, ...fragments);
          // Cut history into runs (as a store's groups) and a tail of plain items.
          const bounds = new Map(cuts.map((c) => [Math.min(c.at, history.length), c.summarized]));
          let from = 0;
          const sealed = [...bounds.keys()]
            .sort((a, b) => a - b)
            .map((to) => {
              const items = history.slice(from, to);
              from = to;
              return storedRun(items, { summarized: bounds.get(to) ?? false }).run;
            });
          const restored = new ContextManager({ sealed, items: history.slice(from) });
          const plain = new ContextManager({ items: history });
          for (const op of ops) {
            expect(apply(restored, op)).toEqual(apply(plain, op));
            expect(restored.length).toBe(plain.length);
          }
          restored.readSealed();
          expect(restored.toState()).toEqual(plain.toState());
        },
      ),
      { numRuns: 500 },
    );
  });
});
