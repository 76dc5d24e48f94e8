import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  FunctionToolSchema,
  JsonNestingError,
  jsonPointer,
  MAX_ITEM_DEPTH,
  MAX_JSON_DEPTH,
  MAX_TOOL_PARAMETERS_DEPTH,
  nestedWithin,
  parseJsonWithin,
  pathBeyondDepth,
  ResponseItemSchema,
} from "../../../shared/protocol/index.ts";
import { decodeRolloutLine, RolloutDecodeError } from "../../../shared/rollout/index.ts";
import * as z from "../../../shared/zod/index.ts";

/** `levels` nested arrays, as text: `[[…]]`. */
const arrays = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;
/** `levels` nested objects `{"a":{"a":…{}}}`, as text. */
const objects = (levels: number) => `${'{"a":'.repeat(levels - 1)}{}${"}".repeat(levels - 1)}`;

function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (err) {
    return err;
  }
  return undefined;
}

describe("pathBeyondDepth", () => {
  it("counts the outermost object or array as level 1; scalars add none", () => {
    expect(pathBeyondDepth("text", 0)).toBeUndefined();
    expect(pathBeyondDepth({ a: 1, b: "x" }, 1)).toBeUndefined();
    expect(pathBeyondDepth({ a: 1, b: {} }, 1)).toEqual(["b"]);
    expect(pathBeyondDepth([1, [2, [3]]], 2)).toEqual([1, 1]);
  });

  it("names the first excess in document order", () => {
    const value = { a: [{}], b: [[[]]], c: [[[[]]]] };
    expect(pathBeyondDepth(value, 3)).toEqual(["b", 0, 0]);
    expect(pathBeyondDepth(value, 4)).toEqual(["c", 0, 0, 0]);
    expect(pathBeyondDepth(value, 5)).toBeUndefined();
  });

  it("measures any depth without recursion: a million levels", () => {
    const deep = JSON.parse(arrays(1_000_000)) as unknown;
    expect(pathBeyondDepth(deep, MAX_JSON_DEPTH)).toEqual(Array(MAX_JSON_DEPTH).fill(0));
  });

  it("agrees with a recursive measure on random values", () => {
    const depth = (value: unknown): number =>
      typeof value === "object" && value !== null
        ? 1 + Math.max(0, ...Object.values(value).map(depth))
        : 0;
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), fc.integer({ min: 0, max: 9 }), (value, max) => {
        expect(pathBeyondDepth(value, max) === undefined).toBe(depth(value) <= max);
      }),
    );
  });

  it("reads own members only: a __proto__ key is a member like any other", () => {
    const value = JSON.parse('{"__proto__":{"x":[]}}') as unknown;
    expect(pathBeyondDepth(value, 2)).toEqual(["__proto__", "x"]);
  });
});

describe("parseJsonWithin", () => {
  it("parses JSON up to the limit and refuses one level more, naming where", () => {
    expect(parseJsonWithin(arrays(MAX_JSON_DEPTH))).toEqual(JSON.parse(arrays(MAX_JSON_DEPTH)));
    const err = thrown(() => parseJsonWithin(objects(MAX_JSON_DEPTH + 1)));
    expect(err).toBeInstanceOf(JsonNestingError);
    expect((err as JsonNestingError).path).toEqual(Array(MAX_JSON_DEPTH).fill("a"));
    expect((err as JsonNestingError).message).toBe(
      `nested deeper than 64 levels (at ${"/a".repeat(64)})`,
    );
  });

  it("refuses text of any depth without running out of stack", () => {
    for (const levels of [1_900, 2_300, 100_000]) {
      expect(thrown(() => parseJsonWithin(arrays(levels)))).toBeInstanceOf(JsonNestingError);
    }
  });

  it("throws SyntaxError for text that is not JSON, as JSON.parse does", () => {
    expect(thrown(() => parseJsonWithin("{"))).toBeInstanceOf(SyntaxError);
  });
});

describe("jsonPointer", () => {
  it("escapes ~ and / (RFC 6901)", () => {
    expect(jsonPointer(["a/b", "c~d", 0])).toBe("/a~1b/c~0d/0");
    expect(jsonPointer([])).toBe("");
  });
});

describe("schemas with a nesting bound", () => {
  it("nestedWithin reports the path of the first excess below the schema's own", () => {
    const schema = z.object({ v: z.unknown().check(nestedWithin(2, "v")) });
    const result = schema.safeParse({ v: [[1], [[2]]] });
    expect(result.error?.issues.map(({ path, message }) => ({ path, message }))).toEqual([
      { path: ["v", 1, 0], message: "v nests deeper than 2 levels" },
    ]);
  });

  it("a tool's parameters nest at most 32 levels", () => {
    const within = JSON.parse(objects(MAX_TOOL_PARAMETERS_DEPTH)) as Record<string, unknown>;
    expect(FunctionToolSchema.safeParse({ name: "t", parameters: within }).success).toBe(true);
    const beyond = JSON.parse(objects(MAX_TOOL_PARAMETERS_DEPTH + 1)) as Record<string, unknown>;
    const result = FunctionToolSchema.safeParse({ name: "t", parameters: beyond });
    expect(result.error?.issues.map(({ path, message }) => ({ path, message }))).toEqual([
      {
        path: ["parameters", ...Array(MAX_TOOL_PARAMETERS_DEPTH).fill("a")],
        message: "parameters nests deeper than 32 levels",
      },
    ]);
  });

  it("an item nested deeper than 48 levels is no known item", () => {
    const item = (levels: number) => ({
      type: "message",
      role: "user",
      content: [{ type: "input_text", text: "hi", extra: JSON.parse(arrays(levels)) }],
    });
    // message, content, part: three levels above `extra`.
    expect(ResponseItemSchema.parse(item(MAX_ITEM_DEPTH - 3)).type).toBe("message");
    expect(ResponseItemSchema.parse(item(MAX_ITEM_DEPTH - 2))).toEqual({
      type: "other",
      original_type: "message",
    });
  });
});

describe("decodeRolloutLine and nesting", () => {
  const line = (payload: string) =>
    `{"timestamp":"2026-01-01T00:00:00Z","type":"future_line","payload":${payload}}`;

  it("decodes a line nested exactly 64 levels, and refuses 65 with its line number", () => {
    expect(decodeRolloutLine(line(arrays(MAX_JSON_DEPTH - 1)), 7).type).toBe("unknown");
    const err = thrown(() => decodeRolloutLine(line(arrays(MAX_JSON_DEPTH)), 7));
    expect(err).toBeInstanceOf(RolloutDecodeError);
    expect(err).toMatchObject({
      lineNumber: 7,
      reason: `nested deeper than 64 levels (at /payload${"/0".repeat(63)})`,
    });
  });

  it("refuses a line thousands of levels deep as unreadable, not as a crash", () => {
    for (const levels of [1_900, 2_500, 50_000]) {
      expect(thrown(() => decodeRolloutLine(line(arrays(levels)), 2))).toBeInstanceOf(
        RolloutDecodeError,
      );
    }
  });
});
