import { describe, expect, it } from "vitest";
import { ContextManager } from "../../../shared/context-manager/index.ts";
import {
  assistant,
  customCall,
  customOutput,
  functionCall,
  functionOutput,
  historyWith,
  image,
  localShellCall,
  message,
  user,
} from "./builders.ts";

const BASELINE = { environments: { local: { cwd: "file:///repo" } } };

describe("removeFirstItem (reference §4.4)", () => {
  it("remove_first_item_removes_matching_output_for_function_call", () => {
    const cm = historyWith([functionCall("call-1"), functionOutput("call-1")]);
    cm.removeFirstItem();
    expect(cm.items).toEqual([]);
  });

  it("remove_first_item_removes_matching_call_for_output", () => {
    const cm = historyWith([functionOutput("call-2"), functionCall("call-2")]);
    cm.removeFirstItem();
    expect(cm.items).toEqual([]);
  });

  it("remove_first_item_handles_local_shell_pair", () => {
    const cm = historyWith([localShellCall("shell-1"), functionOutput("shell-1")]);
    cm.removeFirstItem();
    expect(cm.items).toEqual([]);
  });

  it("remove_first_item_handles_custom_tool_pair", () => {
    const cm = historyWith([customCall("tool-1"), customOutput("tool-1")]);
    cm.removeFirstItem();
    expect(cm.items).toEqual([]);
  });

  it("an output removes its function call before a local shell call with the same id", () => {
    const cm = historyWith([
      functionOutput("dup"),
      localShellCall("dup"),
      functionCall("dup"),
      user("rest"),
    ]);
    cm.removeFirstItem();
    expect(cm.items).toEqual([localShellCall("dup"), user("rest")]);
  });

  it("removes only the first counterpart and keeps unrelated items", () => {
    const cm = historyWith([
      functionCall("c"),
      user("u"),
      functionOutput("c", "first"),
      functionOutput("c", "second"),
    ]);
    cm.removeFirstItem();
    expect(cm.items).toEqual([user("u"), functionOutput("c", "second")]);
  });

  it("clears the world-state baseline but keeps historyVersion", () => {
    const cm = historyWith([user("a"), assistant("b")]);
    cm.worldStateBaseline = BASELINE;
    cm.removeFirstItem();
    expect(cm.items).toEqual([assistant("b")]);
    expect(cm.worldStateBaseline).toBeUndefined();
    expect(cm.historyVersion).toBe(0);
  });

  it("does nothing on an empty history", () => {
    const cm = new ContextManager({ worldStateBaseline: BASELINE });
    cm.removeFirstItem();
    expect(cm.items).toEqual([]);
    expect(cm.worldStateBaseline).toEqual(BASELINE);
  });
});

describe("removeLastItem (reference §4.4)", () => {
  it("remove_last_item_removes_matching_call_for_output", () => {
    const cm = historyWith([user("before tool call"), functionCall("c"), functionOutput("c")]);
    cm.removeLastItem();
    expect(cm.items).toEqual([user("before tool call")]);
  });

  it("removes the output of a removed call", () => {
    const cm = historyWith([user("u"), customOutput("t"), customCall("t")]);
    cm.removeLastItem();
    expect(cm.items).toEqual([user("u")]);
  });

  it("clears the world-state baseline", () => {
    const cm = historyWith([user("a"), assistant("b")]);
    cm.worldStateBaseline = BASELINE;
    cm.removeLastItem();
    expect(cm.items).toEqual([user("a")]);
    expect(cm.worldStateBaseline).toBeUndefined();
  });
});

describe("replace (reference §4.4)", () => {
  it("sets the items, bumps historyVersion and clears the world-state baseline", () => {
    const cm = historyWith([user("old")]);
    cm.worldStateBaseline = BASELINE;
    cm.replace([user("summary")]);
    expect(cm.items).toEqual([user("summary")]);
    expect(cm.historyVersion).toBe(1);
    expect(cm.worldStateBaseline).toBeUndefined();
    cm.replace([]);
    expect(cm.historyVersion).toBe(2);
  });

  it("stores copies of the given items", () => {
    const items = [user("a")];
    const cm = new ContextManager();
    cm.replace(items);
    items.push(user("b"));
    expect(cm.items).toEqual([user("a")]);
  });
});

describe("replaceLastTurnImages (reference §4.4)", () => {
  const png = "data:image/png;base64,AAA";

  it("replace_last_turn_images_replaces_tool_output_images", () => {
    const cm = historyWith([
      user("hi"),
      functionCall("call-1"),
      functionOutput("call-1", [{ type: "input_text", text: "ok" }, image(png)]),
    ]);
    expect(cm.replaceLastTurnImages("Invalid image")).toBe(true);
    expect(cm.items).toEqual([
      user("hi"),
      functionCall("call-1"),
      functionOutput("call-1", [
        { type: "input_text", text: "ok" },
        { type: "input_text", text: "Invalid image" },
      ]),
    ]);
    expect(cm.historyVersion).toBe(1);
  });

  it("replace_last_turn_images_does_not_touch_user_images", () => {
    const items = [
      functionCall("call-1"),
      functionOutput("call-1", [image(png)]),
      message("user", [{ type: "input_text", text: "see" }, image(png)]),
    ];
    const cm = historyWith(items);
    expect(cm.replaceLastTurnImages("Invalid image")).toBe(false);
    expect(cm.items).toEqual(items);
    expect(cm.historyVersion).toBe(0);
  });

  it("returns false and keeps the version when the last output has no images", () => {
    const cm = historyWith([functionCall("c"), functionOutput("c", "plain text")]);
    expect(cm.replaceLastTurnImages("x")).toBe(false);
    expect(cm.historyVersion).toBe(0);
  });

  it("writes a new item object, so a clone taken before keeps the image", () => {
    const cm = historyWith([functionCall("c"), functionOutput("c", [image(png)])]);
    const before = cm.clone();
    expect(cm.replaceLastTurnImages("gone")).toBe(true);
    expect(before.items[1]).toEqual(functionOutput("c", [image(png)]));
    expect(cm.items[1]).toEqual(functionOutput("c", [{ type: "input_text", text: "gone" }]));
  });
});
