import { describe, expect, it } from "vitest";
import {
  describeError,
  formatLogLine,
  Logger,
  type LogSink,
  MAX_FIELD_CHARS,
  requestIdOf,
} from "../../../shared/observability/index.ts";

const AT = Date.UTC(2026, 11, 1, 12, 0, 0);

/** A sink that keeps each line with the console method it went to. */
function recording() {
  const lines: { method: string; text: string }[] = [];
  const sink: LogSink = {
    log: (text: string) => lines.push({ method: "log", text }),
    warn: (text: string) => lines.push({ method: "warn", text }),
    error: (text: string) => lines.push({ method: "error", text }),
  };
  return { sink, lines, parsed: () => lines.map((l) => JSON.parse(l.text) as unknown) };
}

describe("formatLogLine", () => {
  it("is one JSON object: level, event, the fields given, and the time", () => {
    const text = formatLogLine(
      "info",
      "turn.ended",
      {
        request_id: "r1",
        turn: "turn_1",
        provider_status: null,
        duration_ms: 12,
        thread: undefined,
      },
      AT,
    );
    expect(text).not.toContain("\n");
    expect(JSON.parse(text)).toEqual({
      level: "info",
      event: "turn.ended",
      request_id: "r1",
      turn: "turn_1",
      provider_status: null,
      duration_ms: 12,
      at: "2026-12-01T12:00:00.000Z",
    });
  });

  it("cuts a long string to its bound", () => {
    const line = JSON.parse(formatLogLine("warn", "x", { reason: "y".repeat(5000) }, AT));
    expect(line.reason).toHaveLength(MAX_FIELD_CHARS);
    expect(line.reason.endsWith("…")).toBe(true);
    expect(JSON.parse(formatLogLine("warn", "x", { reason: "short" }, AT)).reason).toBe("short");
  });

  it("escapes what would break a line: a newline or a quote stays inside its string", () => {
    const text = formatLogLine("error", "x", { error: 'Error: a\n"b"' }, AT);
    expect(text.split("\n")).toHaveLength(1);
    expect(JSON.parse(text).error).toBe('Error: a\n"b"');
  });
});

describe("Logger", () => {
  it("writes each level to its console method, with the fields it was made with", () => {
    const { sink, lines, parsed } = recording();
    const log = new Logger(sink, { request_id: "r1" }, () => AT).with({ tenant: "acme" });
    log.info("a", { thread: "t1" });
    log.warn("b");
    log.error("c", { error: "Error: boom" });
    expect(lines.map((l) => l.method)).toEqual(["log", "warn", "error"]);
    expect(parsed()).toEqual([
      {
        level: "info",
        event: "a",
        request_id: "r1",
        tenant: "acme",
        thread: "t1",
        at: expect.any(String),
      },
      { level: "warn", event: "b", request_id: "r1", tenant: "acme", at: expect.any(String) },
      {
        level: "error",
        event: "c",
        request_id: "r1",
        tenant: "acme",
        error: "Error: boom",
        at: "2026-12-01T12:00:00.000Z",
      },
    ]);
  });

  it("a field given again takes its new value; one left undefined keeps the one before", () => {
    const { sink, parsed } = recording();
    const log = new Logger(sink, { tenant: "acme", thread: "t1" }, () => AT);
    log.with({ thread: "t2", tenant: undefined }).info("a", { tenant: undefined });
    expect(parsed()).toEqual([
      { level: "info", event: "a", tenant: "acme", thread: "t2", at: expect.any(String) },
    ]);
  });
});

describe("describeError", () => {
  it("is the error's name and message, without its cause or stack", () => {
    const err = new TypeError("bad thing", { cause: new Error("sk-secret-cause") });
    expect(describeError(err)).toBe("TypeError: bad thing");
    expect(describeError("plain")).toBe("plain");
    expect(describeError({ token: "sk-secret" })).toBe("non-error value thrown");
  });
});

describe("requestIdOf", () => {
  it("keeps a client's id made of letters, digits, - _ . : up to 128 characters", () => {
    for (const id of [
      "a",
      "0f8fad5b-d9cb-469f-a165-70867728950e",
      "01ARZ3NDEKTSV4RRFFQ69G5FAV",
      "trace:span.1_2",
      "x".repeat(128),
    ]) {
      expect(requestIdOf(id)).toBe(id);
    }
  });

  it("replaces an absent, empty, long or odd id with a new one, different each time", () => {
    const generated = /^req_[0-9a-f]{32}$/;
    const ids = [
      undefined,
      "",
      "x".repeat(129),
      "has space",
      'q"uote',
      "a\nb",
      "é",
      "a/b",
      "a,b",
    ].map(requestIdOf);
    for (const id of ids) expect(id).toMatch(generated);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
