import { describe, expect, it } from "vitest";
import { newestTimestamp } from "../../../../../durable-objects/thread/rollouts/from-rollout.ts";
import type { RolloutLine } from "../../../../../shared/protocol/index.ts";

const AT = "2026-03-01T10:00:00.000Z";

const sessionMeta = (cwd: string, timestamp = AT) =>
  ({ timestamp, type: "session_meta", payload: { id: "src", cwd } }) as RolloutLine;
const userMessage = (text: string, timestamp = AT) =>
  ({
    timestamp,
    type: "response_item",
    payload: { type: "message", role: "user", content: [{ type: "input_text", text }] },
  }) as RolloutLine;

describe("newestTimestamp: a rebuilt thread's updated_at", () => {
  it("is the latest time among the lines, not the last line's", () => {
    const lines = [
      sessionMeta("/", "2026-03-05T12:00:00.000Z"),
      userMessage("copied", "2026-01-01T00:00:00.000Z"),
      userMessage("copied later", "2026-02-01T00:00:00.000Z"),
    ];
    expect(newestTimestamp(lines)).toBe("2026-03-05T12:00:00.000Z");
  });

  it("compares instants, not strings, and of equal instants takes the later line's text", () => {
    const lines = [
      userMessage("a", "2026-03-05T13:00:00+01:00"),
      userMessage("b", "2026-03-05T11:30:00.000Z"),
      userMessage("c", "2026-03-05T12:00:00Z"),
    ];
    expect(newestTimestamp(lines)).toBe("2026-03-05T12:00:00Z");
  });

  it("skips times that do not parse, and is undefined without any line", () => {
    const lines = [userMessage("a", "2026-03-05T12:00:00.000Z"), userMessage("b", "not a time")];
    expect(newestTimestamp(lines)).toBe("2026-03-05T12:00:00.000Z");
    expect(newestTimestamp([])).toBeUndefined();
    expect(newestTimestamp([userMessage("b", "not a time")])).toBeUndefined();
  });
});
