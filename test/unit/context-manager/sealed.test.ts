import { describe, expect, it } from "vitest";
import {
  ContextManager,
  estimateItemBytes,
  SealedItems,
} from "../../../shared/context-manager/index.ts";
import type { ResponseItem } from "../../../shared/protocol/index.ts";
import {
  assistant,
  DEFAULT_POLICY,
  functionCall,
  functionOutput,
  historyWith,
  user,
} from "./builders.ts";

/** A run as a checkpoint store makes one: JSON text, parsed by `read`, which counts its calls. */
function storedRun(items: ResponseItem[], bytes?: number[]) {
  const text = JSON.stringify({ items, ...(bytes ? { bytes } : {}) });
  const reads = { count: 0 };
  const run = new SealedItems(items.length, () => {
    reads.count += 1;
    return JSON.parse(text);
  });
  return { run, reads };
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
    const { run, reads } = storedRun([user("a"), assistant("b")], [1000, 2000]);
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
