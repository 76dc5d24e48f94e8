import { describe, expect, it } from "vitest";
import {
  approxTokensFromByteCount,
  truncateToolOutput,
} from "../../../shared/context-manager/index.ts";
import type { FunctionCallOutputContentItem } from "../../../shared/protocol/index.ts";
import { image, snapshot } from "./builders.ts";

const DIGITS = "0123456789".repeat(10); // 100 ASCII bytes

function hasLoneSurrogate(s: string): boolean {
  return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

describe("approxTokensFromByteCount", () => {
  it("rounds bytes / 4 up and never goes below zero", () => {
    expect([0, 1, 4, 5, 8, 9, -3].map(approxTokensFromByteCount)).toEqual([0, 1, 1, 2, 2, 3, 0]);
  });
});

describe("text truncation (reference §4.2)", () => {
  it("format_exec_output_returns_original_when_within_limits: text within budget is unchanged", () => {
    expect(truncateToolOutput(DIGITS, { mode: "tokens", limit: 25 })).toBe(DIGITS);
    expect(truncateToolOutput(DIGITS, { mode: "bytes", limit: 100 })).toBe(DIGITS);
  });

  it("a tokens policy keeps half the byte budget at each end and counts the bytes over budget / 4 in the marker", () => {
    // 10 tokens = 40 bytes: 20 at the head, 20 at the tail; 60 bytes over budget = 15 tokens.
    expect(truncateToolOutput(DIGITS, { mode: "tokens", limit: 10 })).toBe(
      "01234567890123456789…15 tokens truncated…01234567890123456789",
    );
  });

  it("a bytes policy counts removed characters in the marker and gives the odd byte to the tail", () => {
    expect(truncateToolOutput(DIGITS, { mode: "bytes", limit: 41 })).toBe(
      "01234567890123456789…59 chars truncated…901234567890123456789",
    );
  });

  it("measures bytes as UTF-8 and cuts on character boundaries", () => {
    // 10 × "é" = 20 bytes. Budget 7: head 3 bytes holds one "é", tail 4 bytes holds two.
    expect(truncateToolOutput("é".repeat(10), { mode: "bytes", limit: 7 })).toBe(
      "é…7 chars truncated…éé",
    );
  });

  it("never splits a surrogate pair (bytes policy)", () => {
    // 5 × U+1F600 = 20 UTF-8 bytes, 10 UTF-16 units. Budget 10: one emoji fits at each end.
    const out = truncateToolOutput("😀".repeat(5), { mode: "bytes", limit: 10 });
    expect(out).toBe("😀…3 chars truncated…😀");
    expect(hasLoneSurrogate(out as string)).toBe(false);
  });

  it("never splits a surrogate pair (tokens policy)", () => {
    // 2 tokens = 8 bytes: one emoji at each end; 12 bytes over budget = 3 tokens.
    const out = truncateToolOutput("😀".repeat(5), { mode: "tokens", limit: 2 });
    expect(out).toBe("😀…3 tokens truncated…😀");
    expect(hasLoneSurrogate(out as string)).toBe(false);
  });

  it("keeps nothing but the marker when the budget is zero", () => {
    expect(truncateToolOutput("abcdefghi", { mode: "tokens", limit: 0 })).toBe(
      "…3 tokens truncated…",
    );
    expect(truncateToolOutput("abcdefghi", { mode: "bytes", limit: 0 })).toBe(
      "…9 chars truncated…",
    );
  });

  it("leaves empty text empty", () => {
    expect(truncateToolOutput("", { mode: "tokens", limit: 0 })).toBe("");
    expect(truncateToolOutput("", { mode: "bytes", limit: 0 })).toBe("");
  });
});

describe("content-item truncation (reference §4.2)", () => {
  it("keeps text that fits, middle-truncates the first overflow, omits later text and keeps every image", () => {
    const items: FunctionCallOutputContentItem[] = [
      { type: "input_text", text: "a".repeat(20) }, // 5 tokens
      image("https://example.test/1.png"),
      { type: "input_text", text: "b".repeat(40) }, // 10 tokens, only 5 left
      { type: "input_text", text: "c" },
      image("https://example.test/2.png"),
      { type: "input_text", text: "d" },
    ];
    expect(truncateToolOutput(items, { mode: "tokens", limit: 10 })).toEqual([
      { type: "input_text", text: "a".repeat(20) },
      image("https://example.test/1.png"),
      { type: "input_text", text: "bbbbbbbbbb…5 tokens truncated…bbbbbbbbbb" },
      image("https://example.test/2.png"),
      { type: "input_text", text: "[omitted 2 text items ...]" },
    ]);
  });

  it("walks a bytes policy with a byte budget", () => {
    const items: FunctionCallOutputContentItem[] = [
      { type: "input_text", text: "abcd" },
      { type: "input_text", text: "efghij" },
    ];
    expect(truncateToolOutput(items, { mode: "bytes", limit: 8 })).toEqual([
      { type: "input_text", text: "abcd" },
      { type: "input_text", text: "ef…2 chars truncated…ij" },
    ]);
  });

  it("omits text after the budget is used up exactly", () => {
    const items: FunctionCallOutputContentItem[] = [
      { type: "input_text", text: "abcdefgh" }, // exactly 2 tokens
      { type: "input_text", text: "next" },
    ];
    expect(truncateToolOutput(items, { mode: "tokens", limit: 2 })).toEqual([
      { type: "input_text", text: "abcdefgh" },
      { type: "input_text", text: "[omitted 1 text items ...]" },
    ]);
  });

  it("keeps encrypted content parts and adds no notice when everything fits", () => {
    const items: FunctionCallOutputContentItem[] = [
      { type: "encrypted_content", encrypted_content: "gAAAA".repeat(100) },
      { type: "input_text", text: "ok" },
    ];
    expect(truncateToolOutput(items, { mode: "tokens", limit: 1 })).toEqual(items);
  });

  it("does not change the input list or its items", () => {
    const items: FunctionCallOutputContentItem[] = [
      { type: "input_text", text: "x".repeat(100) },
      { type: "input_text", text: "y" },
    ];
    const before = snapshot(items);
    truncateToolOutput(items, { mode: "tokens", limit: 3 });
    expect(items).toEqual(before);
  });
});
