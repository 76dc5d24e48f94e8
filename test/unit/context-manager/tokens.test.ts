import { describe, expect, it } from "vitest";
import {
  ContextManager,
  estimateItemTokenCount,
  estimateSentItemTokenCount,
} from "../../../shared/context-manager/index.ts";
import type { TokenUsage } from "../../../shared/protocol/index.ts";
import {
  assistant,
  functionCall,
  functionOutput,
  historyWith,
  image,
  message,
  reasoning,
  user,
} from "./builders.ts";

// Expected byte counts below were computed independently from compact JSON (Python json.dumps).

function usage(total: number): TokenUsage {
  return {
    input_tokens: total - 10,
    cached_input_tokens: 5,
    output_tokens: 10,
    reasoning_output_tokens: 2,
    total_tokens: total,
  };
}

describe("estimateSentItemTokenCount", () => {
  const tagged = (turnId: string) => ({
    internal_chat_message_metadata_passthrough: { turn_id: turnId },
  });

  it("counts an item without its turn-id passthrough, which Codex's estimate includes", () => {
    const item = Object.freeze({ ...user("€".repeat(100)), ...tagged("turn_0123456789") });
    expect(estimateItemTokenCount(item)).toBeGreaterThan(
      estimateItemTokenCount(user("€".repeat(100))),
    );
    expect(estimateSentItemTokenCount(item)).toBe(estimateItemTokenCount(user("€".repeat(100))));
    for (const turnId of ['tür"n\\1', "", "x".repeat(5)]) {
      const odd = Object.freeze({ ...assistant("ok"), ...tagged(turnId) });
      expect(estimateSentItemTokenCount(odd)).toBe(estimateItemTokenCount(assistant("ok")));
    }
    const extra = {
      ...assistant("ok"),
      internal_chat_message_metadata_passthrough: { turn_id: "t", note: "é".repeat(9) },
    };
    expect(estimateSentItemTokenCount(extra)).toBe(estimateItemTokenCount(assistant("ok")));
    // The field first: its comma follows it instead.
    const first = { ...tagged("t"), ...assistant("ok") };
    expect(estimateSentItemTokenCount(first)).toBe(estimateItemTokenCount(assistant("ok")));
  });

  it("leaves items counted by their encrypted content alone", () => {
    const item = { ...reasoning("E".repeat(4000)), ...tagged("t") };
    expect(estimateSentItemTokenCount(item)).toBe(588);
  });
});

describe("estimateItemTokenCount (reference §4.6)", () => {
  it("is ceil(bytes / 4) of the item's JSON serialization", () => {
    expect(estimateItemTokenCount(user("hi"))).toBe(20); // 78 bytes
  });

  it("measures the serialization in UTF-8 bytes, not UTF-16 units", () => {
    expect(estimateItemTokenCount(user("€".repeat(100)))).toBe(94); // 376 bytes
  });

  it("counts encrypted reasoning as max(0, floor(len × 3/4) − 650) bytes", () => {
    expect(estimateItemTokenCount(reasoning("E".repeat(4000)))).toBe(588); // 2350 bytes
    expect(estimateItemTokenCount(reasoning("E".repeat(100)))).toBe(0);
  });

  it("counts reasoning without encrypted content by its serialization", () => {
    expect(estimateItemTokenCount(reasoning())).toBe(29); // 114 bytes
  });

  it("counts compaction like encrypted reasoning", () => {
    expect(
      estimateItemTokenCount({ type: "compaction", encrypted_content: "E".repeat(2000) }),
    ).toBe(
      213, // 1500 − 650 = 850 bytes
    );
  });

  it("counts an inline base64 image payload as 7373 bytes", () => {
    const url = `data:image/png;base64,${"A".repeat(100_000)}`;
    expect(estimateItemTokenCount(message("user", [image(url)]))).toBe(1870); // 7477 bytes
  });

  it("counts original-detail images with the same fixed estimate (images are not decoded)", () => {
    const url = `data:image/png;base64,${"A".repeat(100_000)}`;
    expect(estimateItemTokenCount(message("user", [image(url, "original")]))).toBe(1875);
  });

  it("counts a remote image URL by its serialized length", () => {
    const url = `https://example.test/${"a".repeat(1000)}.png`;
    expect(estimateItemTokenCount(message("user", [image(url)]))).toBe(277); // 1107 bytes
  });

  it("counts encrypted tool-output parts as ceil(len × 9/16) and inline images as 7373 bytes", () => {
    const item = functionOutput("c", [
      { type: "encrypted_content", encrypted_content: "E".repeat(1600) },
      image(`data:image/jpeg;base64,${"B".repeat(40_000)}`),
    ]);
    expect(estimateItemTokenCount(item)).toBe(2111); // 41,769 − 1600 + 900 − 40,000 + 7373
  });
});

describe("estimateTokenCount (reference §4.6)", () => {
  it("adds the base instructions estimate to every item's estimate", () => {
    const cm = historyWith([user("hi"), reasoning("E".repeat(4000))]);
    expect(cm.estimateTokenCount("You are a helpful assistant.")).toBe(7 + 20 + 588);
  });
});

describe("getTotalTokenUsage (reference §4.6)", () => {
  it("items_after_last_model_generated_tokens_are_zero_without_model_generated_items", () => {
    expect(historyWith([user("only")]).getTotalTokenUsage(true)).toBe(0);
    expect(historyWith([user("only")]).getTotalTokenUsage(false)).toBe(0);
  });

  it("adds the estimate of items after the last model-generated item to the last reported total", () => {
    const cm = historyWith([user("hi"), functionCall("c"), functionOutput("c", "ok")]);
    cm.updateTokenInfo(usage(100));
    expect(cm.getTotalTokenUsage(true)).toBe(100 + 15); // the output: 59 bytes
  });

  it("adds encrypted reasoning before the last user turn only when the server does not count it", () => {
    const cm = historyWith([
      user("u1"),
      reasoning("E".repeat(4000)), // before the last user turn: 588 tokens
      assistant("a1"),
      user("u2"),
      reasoning("E".repeat(4000)), // after it: already in the reported usage
      assistant("a2"),
    ]);
    cm.updateTokenInfo(usage(100));
    expect(cm.getTotalTokenUsage(true)).toBe(100);
    expect(cm.getTotalTokenUsage(false)).toBe(100 + 588);
  });

  it("uses the last usage, not the running total", () => {
    const cm = historyWith([user("u"), assistant("a")]);
    cm.updateTokenInfo(usage(100));
    cm.updateTokenInfo(usage(40));
    expect(cm.getTotalTokenUsage(true)).toBe(40);
  });
});

describe("updateTokenInfo (reference §1.7 new_or_append)", () => {
  it("starts from zero, adds into the total, replaces the last usage and keeps the window", () => {
    const cm = new ContextManager();
    cm.updateTokenInfo(usage(100), 1000);
    cm.updateTokenInfo(usage(40));
    expect(cm.tokenInfo).toEqual({
      total_token_usage: {
        input_tokens: 90 + 30,
        cached_input_tokens: 10,
        output_tokens: 20,
        reasoning_output_tokens: 4,
        total_tokens: 140,
      },
      last_token_usage: usage(40),
      model_context_window: 1000,
    });
  });

  it("stays undefined when there is neither info nor usage", () => {
    const cm = new ContextManager();
    cm.updateTokenInfo(undefined);
    expect(cm.tokenInfo).toBeUndefined();
  });

  it("only overwrites the window when no usage is given", () => {
    const cm = new ContextManager();
    cm.updateTokenInfo(usage(100), 1000);
    cm.updateTokenInfo(undefined, 2000);
    expect(cm.tokenInfo?.model_context_window).toBe(2000);
    expect(cm.tokenInfo?.last_token_usage).toEqual(usage(100));
  });
});
