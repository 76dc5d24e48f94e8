import { describe, expect, it } from "vitest";
import type { ContextManagerState } from "../../../shared/context-manager/index.ts";
import { ContextManager } from "../../../shared/context-manager/index.ts";
import type { TokenUsageInfo, TurnContextItem } from "../../../shared/protocol/index.ts";
import {
  assistant,
  DEFAULT_POLICY,
  functionCall,
  functionOutput,
  historyWith,
  snapshot,
  user,
} from "./builders.ts";

const REFERENCE: TurnContextItem = { cwd: "/repo", model: "gpt-5.4" };
const BASELINE = { environments: { local: { cwd: "file:///repo" } } };
const TOKEN_INFO: TokenUsageInfo = {
  total_token_usage: {
    input_tokens: 1,
    cached_input_tokens: 0,
    output_tokens: 2,
    reasoning_output_tokens: 0,
    total_tokens: 3,
  },
  last_token_usage: {
    input_tokens: 1,
    cached_input_tokens: 0,
    output_tokens: 2,
    reasoning_output_tokens: 0,
    total_tokens: 3,
  },
  model_context_window: 1000,
};

describe("clone (copy-on-write)", () => {
  it("does not copy the items array: clone and original share it until one writes", () => {
    const cm = historyWith([user("a"), assistant("b")]);
    const copy = cm.clone();
    expect(copy.items).toBe(cm.items);
  });

  it("a write to the clone copies the array and leaves the original unchanged", () => {
    const cm = historyWith([user("a"), assistant("b")]);
    const originalArray = cm.items;
    const copy = cm.clone();
    copy.recordItems([user("c")], DEFAULT_POLICY);
    expect(copy.items).not.toBe(cm.items);
    expect(cm.items).toBe(originalArray);
    expect(cm.items).toEqual([user("a"), assistant("b")]);
    expect(copy.items).toEqual([user("a"), assistant("b"), user("c")]);
  });

  it("a write to the original leaves the clone unchanged", () => {
    const cm = historyWith([functionCall("c"), functionOutput("c"), user("u")]);
    const copy = cm.clone();
    cm.removeFirstItem();
    cm.recordItems([user("later")], DEFAULT_POLICY);
    expect(copy.items).toEqual([functionCall("c"), functionOutput("c"), user("u")]);
    expect(cm.items).toEqual([user("u"), user("later")]);
  });

  it("clones keep their own version, reference, baseline and token info", () => {
    const cm = new ContextManager({
      items: [user("a")],
      historyVersion: 4,
      referenceContextItem: REFERENCE,
      worldStateBaseline: BASELINE,
      tokenInfo: TOKEN_INFO,
    });
    const copy = cm.clone();
    expect(copy.toState()).toEqual(cm.toState());
    copy.replace([]);
    copy.referenceContextItem = undefined;
    copy.tokenInfo = undefined;
    expect(cm.historyVersion).toBe(4);
    expect(cm.referenceContextItem).toEqual(REFERENCE);
    expect(cm.worldStateBaseline).toEqual(BASELINE);
    expect(cm.tokenInfo).toEqual(TOKEN_INFO);
    expect(cm.items).toEqual([user("a")]);
  });

  it("after a shared write, further appends to the same manager do not copy again", () => {
    const cm = historyWith([user("a")]);
    cm.clone();
    cm.recordItems([user("b")], DEFAULT_POLICY);
    const array = cm.items;
    cm.recordItems([user("c")], DEFAULT_POLICY);
    expect(cm.items).toBe(array);
  });
});

describe("state (checkpoints)", () => {
  it("omits undefined fields", () => {
    expect(new ContextManager().toState()).toEqual({ items: [], historyVersion: 0 });
    expect(Object.keys(new ContextManager().toState())).toEqual(["items", "historyVersion"]);
  });

  it("round-trips through JSON", () => {
    const state: ContextManagerState = {
      items: [user("a"), functionCall("c"), functionOutput("c")],
      historyVersion: 3,
      tokenInfo: TOKEN_INFO,
      referenceContextItem: REFERENCE,
      worldStateBaseline: BASELINE,
    };
    const restored = new ContextManager(
      JSON.parse(JSON.stringify(new ContextManager(state).toState())),
    );
    expect(restored.toState()).toEqual(state);
    expect(restored.historyVersion).toBe(3);
  });

  it("copies the given state instead of keeping it", () => {
    const state = { items: [user("a")], worldStateBaseline: snapshot(BASELINE) };
    const cm = new ContextManager(state);
    state.items.push(user("b"));
    (state.worldStateBaseline.environments.local as { cwd: string }).cwd = "file:///other";
    expect(cm.items).toEqual([user("a")]);
    expect(cm.worldStateBaseline).toEqual(BASELINE);
  });

  it("returns a state whose items array does not change with later writes", () => {
    const cm = historyWith([user("a")]);
    const state = cm.toState();
    cm.recordItems([user("b")], DEFAULT_POLICY);
    expect(state.items).toEqual([user("a")]);
  });

  it("copies values passed to the setters", () => {
    const cm = new ContextManager();
    const reference = { ...REFERENCE };
    cm.referenceContextItem = reference;
    reference.model = "other";
    expect(cm.referenceContextItem).toEqual(REFERENCE);
  });
});
