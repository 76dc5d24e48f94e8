import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  asciiLower,
  fragment,
  fragmentMatchesText,
  fragmentsToMessage,
  fragmentToMessage,
  MARKERS,
  matchesMarkers,
  renderFragment,
} from "../../../shared/context/index.ts";

const env = fragment(
  "user",
  MARKERS.environmentContext.start,
  MARKERS.environmentContext.end,
  "\n  <cwd>/repo</cwd>\n",
);

describe("fragment rendering (reference §2.1)", () => {
  it("renders start marker + body + end marker with no separator added", () => {
    expect(renderFragment(env)).toBe(
      "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>",
    );
  });

  it("renders just the body when the markers are empty", () => {
    expect(renderFragment(fragment("developer", "", "", "plain"))).toBe("plain");
  });

  it("turns into a single-part message without an id", () => {
    expect(fragmentToMessage(env)).toEqual({
      type: "message",
      role: "user",
      content: [
        {
          type: "input_text",
          text: "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>",
        },
      ],
    });
    expect(fragmentToMessage(env)).not.toHaveProperty("id");
  });

  it("merges several fragments of one role into one message, one part each, in order", () => {
    const permissions = fragment(
      "developer",
      MARKERS.permissions.start,
      MARKERS.permissions.end,
      "\nsandbox\n",
    );
    const personality = fragment(
      "developer",
      MARKERS.personality.start,
      MARKERS.personality.end,
      "be terse",
    );
    expect(fragmentsToMessage("developer", [permissions, personality])).toEqual({
      type: "message",
      role: "developer",
      content: [
        {
          type: "input_text",
          text: "<permissions instructions>\nsandbox\n</permissions instructions>",
        },
        { type: "input_text", text: "<personality_spec>be terse</personality_spec>" },
      ],
    });
  });
});

describe("fragment matching (reference §2.1 matches_text)", () => {
  it("matches a rendered fragment", () => {
    expect(fragmentMatchesText(env, renderFragment(env))).toBe(true);
  });

  it("ignores leading and trailing whitespace", () => {
    expect(matchesMarkers("<a>", "</a>", "  \n<a>x</a>\n  ")).toBe(true);
  });

  it("compares markers case-insensitively", () => {
    expect(
      matchesMarkers("<turn_aborted>", "</turn_aborted>", "<TURN_ABORTED>x</Turn_Aborted>"),
    ).toBe(true);
  });

  it("needs both the start and the end marker", () => {
    expect(matchesMarkers("<a>", "</a>", "<a>x")).toBe(false);
    expect(matchesMarkers("<a>", "</a>", "x</a>")).toBe(false);
    expect(matchesMarkers("<a>", "</a>", "x <a>y</a>")).toBe(false);
  });

  it("never matches with an empty marker", () => {
    expect(matchesMarkers("", "</a>", "x</a>")).toBe(false);
    expect(matchesMarkers("<a>", "", "<a>x")).toBe(false);
    expect(fragmentMatchesText(fragment("user", "", "", "x"), "x")).toBe(false);
  });

  it("does not match text shorter than the markers", () => {
    expect(matchesMarkers("<abc>", "</abc>", "<abc>")).toBe(false);
  });
});

describe("marker comparison is ASCII-only", () => {
  it("does not fold non-ASCII look-alikes (Kelvin sign K) into ASCII letters", () => {
    expect(matchesMarkers("<skill", "</skill>", "<s\u212Aill>x</skill>")).toBe(false);
    expect(matchesMarkers("<skill", "</skill>", "<SKILL>x</Skill>")).toBe(true);
  });
});

describe("matchesMarkers agrees with trim-and-compare", () => {
  it("for random texts around the markers (property)", () => {
    const reference = (start: string, end: string, text: string) => {
      if (start === "" || end === "") return false;
      const head = text.trimStart();
      const tail = text.trimEnd();
      return (
        head.length >= start.length &&
        tail.length >= end.length &&
        asciiLower(head.slice(0, start.length)) === asciiLower(start) &&
        asciiLower(tail.slice(tail.length - end.length)) === asciiLower(end)
      );
    };
    const space = fc.constantFrom(" ", "\n", "\t", "\u00a0", "\u2003", "\ufeff", "");
    const marker = fc.constantFrom("<env>", "</env>", "<ENV>", "</Env>", "<e", ">", "");
    fc.assert(
      fc.property(
        space,
        marker,
        fc.string({ maxLength: 8 }),
        marker,
        space,
        marker,
        marker,
        (a, m1, mid, m2, b, start, end) => {
          const text = `${a}${m1}${mid}${m2}${b}`;
          expect(matchesMarkers(start, end, text)).toBe(reference(start, end, text));
        },
      ),
      { numRuns: 2000 },
    );
  });
});
