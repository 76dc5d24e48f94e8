import { describe, expect, it } from "vitest";
import {
  ContextManager,
  estimateItemBytes,
  estimateSentItemTokenCount,
  freezeItemsInPlace,
} from "../../../shared/context-manager/index.ts";
import type { MessageItem, ResponseItem } from "../../../shared/protocol/index.ts";
import { assistant, user } from "./builders.ts";

const POLICY = { mode: "tokens", limit: 10_000 } as const;
const jsonBytes = (item: unknown) => new TextEncoder().encode(JSON.stringify(item)).length;

describe("byte counts kept on history items", () => {
  it("are invisible to JSON, keys, spreads, structuredClone and deep equality", () => {
    const history = new ContextManager();
    history.recordItems([user("hello")], POLICY);
    const [stored] = history.items;
    expect(JSON.stringify(stored)).toBe(JSON.stringify(user("hello")));
    expect(Object.keys(stored ?? {})).toEqual(Object.keys(user("hello")));
    expect(stored).toEqual(user("hello"));
    expect(structuredClone(stored)).toEqual(user("hello"));
    expect(Object.getOwnPropertySymbols({ ...stored })).toEqual([]);
    expect(estimateItemBytes(stored as ResponseItem)).toBe(jsonBytes(user("hello")));
  });

  it("never follow an item into a changed copy of it", () => {
    const history = new ContextManager();
    history.recordItems([user("short")], POLICY);
    const stored = history.items[0] as MessageItem;
    const changed: MessageItem = { ...stored, content: user("a longer text").content };
    expect(estimateItemBytes(changed)).toBe(jsonBytes(changed));
    history.replace([changed]);
    expect(estimateItemBytes(history.items[0] as ResponseItem)).toBe(jsonBytes(changed));
  });

  it("travel with the item between managers, so a clone or reload re-serializes nothing", () => {
    const items: ResponseItem[] = JSON.parse(JSON.stringify([user("U1"), assistant("A1")]));
    // Marker values no serializer would produce show they were read, not recomputed.
    freezeItemsInPlace(items, [1000, 2000]);
    const history = new ContextManager({ items });
    expect(history.items[0]).toBe(items[0]);
    expect(history.items.map(estimateItemBytes)).toEqual([1000, 2000]);
    expect(history.clone().items.map(estimateItemBytes)).toEqual([1000, 2000]);
    expect(new ContextManager(history.toState()).items.map(estimateItemBytes)).toEqual([
      1000, 2000,
    ]);
    // The sent size derives from the saved count too (these items carry no passthrough).
    expect(history.items.map(estimateSentItemTokenCount)).toEqual([250, 500]);
  });

  it("let a restored history share the frozen array until its first write", () => {
    const items: ResponseItem[] = JSON.parse(JSON.stringify([user("U1"), assistant("A1")]));
    freezeItemsInPlace(items, [1000, 2000]);
    const history = new ContextManager({ items });
    expect(history.items).toBe(items);
    const other = new ContextManager({ items });
    history.recordItems([user("U2")], POLICY);
    history.removeFirstItem();
    expect(history.items.map(estimateItemBytes)).toEqual([2000, jsonBytes(user("U2"))]);
    expect(items).toHaveLength(2);
    expect(other.items).toBe(items);
    other.removeLastItem();
    expect(other.items).toHaveLength(1);
    expect(items.map(estimateItemBytes)).toEqual([1000, 2000]);
    // A manager's own state (what a reload hands over) is shared the same way.
    const state = history.toState();
    expect(Object.isFrozen(state.items)).toBe(true);
    expect(new ContextManager(state).items).toBe(state.items);
  });

  it("are not trusted on an item someone else froze: the history copies it", () => {
    const foreign = Object.freeze(user("U1")) as ResponseItem;
    const items: ResponseItem[] = [foreign, JSON.parse(JSON.stringify(assistant("A1")))];
    freezeItemsInPlace(items, [1000, 2000]);
    const history = new ContextManager({ items });
    expect(history.items).not.toBe(items);
    expect(history.items[0]).not.toBe(foreign);
    expect(history.items[0]).toEqual(foreign);
    expect(history.items[1]).toBe(items[1]);
    expect(estimateItemBytes(history.items[0] as ResponseItem)).toBe(jsonBytes(user("U1")));
  });

  it("are computed when the saved ones do not fit the items", () => {
    for (const bytes of [[1000], [1000, -1], [1000, "2000"], undefined]) {
      const items: ResponseItem[] = JSON.parse(JSON.stringify([user("U1"), assistant("A1")]));
      freezeItemsInPlace(items, bytes);
      expect(items.map(estimateItemBytes)).toEqual([
        jsonBytes(user("U1")),
        jsonBytes(assistant("A1")),
      ]);
      expect(Object.isFrozen(items[0])).toBe(true);
    }
  });
});
