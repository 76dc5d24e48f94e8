import { describe, expect, it } from "vitest";
import { ContextManager } from "../../../shared/context-manager/index.ts";
import type { ResponseItem } from "../../../shared/protocol/index.ts";
import {
  assistant,
  customCall,
  customOutput,
  DEFAULT_POLICY,
  developer,
  functionCall,
  functionOutput,
  localShellCall,
  other,
  reasoning,
  snapshot,
  system,
  user,
} from "./builders.ts";

function outputText(item: ResponseItem | undefined): string {
  if (item?.type !== "function_call_output" && item?.type !== "custom_tool_call_output") {
    throw new Error(`not a tool output: ${item?.type}`);
  }
  if (typeof item.output !== "string") throw new Error("content-item output");
  return item.output;
}

describe("recordItems (reference §4.1)", () => {
  it("filters_non_api_messages: system messages and unknown items are dropped", () => {
    const cm = new ContextManager();
    cm.recordItems([system("sys"), reasoning("enc"), other()], DEFAULT_POLICY);
    cm.recordItems([user("hi"), assistant("hello")], DEFAULT_POLICY);
    expect(cm.items).toEqual([reasoning("enc"), user("hi"), assistant("hello")]);
  });

  it("keeps every API item type unchanged", () => {
    const items: ResponseItem[] = [
      developer("dev"),
      user("u"),
      assistant("a"),
      reasoning(),
      functionCall("c1"),
      functionOutput("c1"),
      customCall("c2"),
      customOutput("c2"),
      localShellCall("c3"),
      { type: "web_search_call", status: "completed", action: { type: "search", query: "q" } },
      { type: "compaction", encrypted_content: "enc" },
    ];
    const cm = new ContextManager();
    cm.recordItems(items, DEFAULT_POLICY);
    expect(cm.items).toEqual(items);
  });

  it("record_items_truncates_function_call_output_content", () => {
    const line = "a very long line to trigger truncation\n";
    const long = line.repeat(2_500); // 97,500 bytes
    const cm = new ContextManager();
    cm.recordItems([functionOutput("call-1", long)], { mode: "tokens", limit: 1000 });
    const stored = outputText(cm.items[0]);
    expect(stored).not.toBe(long);
    // Budget: 1000 × 1.2 = 1200 tokens = 4800 bytes; 92,700 bytes over budget = 23,175 tokens.
    expect(stored).toBe(
      `${long.slice(0, 2400)}…23175 tokens truncated…${long.slice(long.length - 2400)}`,
    );
  });

  it("record_items_truncates_custom_tool_call_output_content", () => {
    const long = "a very long line to trigger truncation\n".repeat(2_500);
    const cm = new ContextManager();
    cm.recordItems([customOutput("tool-1", long)], { mode: "tokens", limit: 1000 });
    const stored = outputText(cm.items[0]);
    expect(stored).not.toBe(long);
    expect(stored).toContain("tokens truncated");
  });

  it("record_items_respects_custom_token_limit", () => {
    const cm = new ContextManager();
    cm.recordItems([functionOutput("c", "x".repeat(200))], { mode: "tokens", limit: 10 });
    expect(outputText(cm.items[0])).toContain("tokens truncated");
  });

  it("truncates tool outputs to the policy times 1.2, rounded up", () => {
    const cm = new ContextManager();
    // Tokens(10) × 1.2 = 12 tokens = 48 bytes: 48 bytes fit, 49 do not.
    cm.recordItems([functionOutput("a", "x".repeat(48)), functionOutput("b", "y".repeat(49))], {
      mode: "tokens",
      limit: 10,
    });
    expect(outputText(cm.items[0])).toBe("x".repeat(48));
    expect(outputText(cm.items[1])).toBe(`${"y".repeat(24)}…1 tokens truncated…${"y".repeat(24)}`);
    // Bytes(3) × 1.2 = 3.6, rounded up to 4 bytes.
    cm.recordItems([functionOutput("c", "abcdefghij")], { mode: "bytes", limit: 3 });
    expect(outputText(cm.items[2])).toBe("ab…6 chars truncated…ij");
  });

  it("stores other items unchanged even when they are long", () => {
    const long = user("z".repeat(10_000));
    const cm = new ContextManager();
    cm.recordItems([long], { mode: "tokens", limit: 1 });
    expect(cm.items).toEqual([long]);
  });

  it("never changes the caller's item objects", () => {
    const items: ResponseItem[] = [
      functionOutput("c", "x".repeat(500)),
      customOutput("d", [{ type: "input_text", text: "y".repeat(500) }]),
      user("hi"),
    ];
    const before = snapshot(items);
    const cm = new ContextManager();
    cm.recordItems(items, { mode: "tokens", limit: 5 });
    expect(items).toEqual(before);
    // History holds copies: changing the caller's objects later does not reach it.
    (items[2] as { content: unknown[] }).content.push({ type: "input_text", text: "later" });
    expect(cm.items[2]).toEqual(user("hi"));
  });

  it("stores frozen items so a shared item cannot be changed in place", () => {
    const cm = new ContextManager();
    cm.recordItems([user("hi")], DEFAULT_POLICY);
    const item = cm.items[0] as { content: { text: string }[] };
    expect(() => {
      (item.content[0] as { text: string }).text = "changed";
    }).toThrow(TypeError);
    expect(cm.items[0]).toEqual(user("hi"));
  });

  it("does not bump historyVersion", () => {
    const cm = new ContextManager();
    cm.recordItems([user("a"), assistant("b")], DEFAULT_POLICY);
    expect(cm.historyVersion).toBe(0);
  });

  it("appends in place without copying history when the array is not shared", () => {
    const cm = new ContextManager();
    cm.recordItems([user("first")], DEFAULT_POLICY);
    const array = cm.items;
    for (let i = 0; i < 1000; i++) cm.recordItems([assistant(`a${i}`)], DEFAULT_POLICY);
    expect(cm.items).toBe(array);
    expect(cm.items).toHaveLength(1001);
  });
});
