import { describe, expect, it } from "vitest";
import type { RolloutLine } from "../../../shared/protocol/index.ts";
import {
  decodeRolloutJsonl,
  decodeRolloutLine,
  encodeRolloutJsonl,
  encodeRolloutLine,
  LEGACY_ROLLOUT_REASON,
  RolloutDecodeError,
} from "../../../shared/rollout/index.ts";
import { CODEX_FIXTURES, LEGACY_ROLLOUT, paginatedFork } from "../../fixtures/codex-rollouts.ts";
import { CODEX_EXAMPLE_JSONL } from "./codex-examples.ts";

const EXAMPLES = CODEX_EXAMPLE_JSONL.split("\n");

function roundTrip(text: string): string {
  return encodeRolloutLine(decodeRolloutLine(text));
}

/** The error `fn` throws (fails the test if it does not throw one). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error("expected a throw");
}

describe("rollout line codec round trips", () => {
  it.each(EXAMPLES.map((line) => [JSON.parse(line).type as string, line]))(
    "the Codex example %s line re-encodes to identical JSON",
    (_type, line) => {
      expect(roundTrip(line)).toBe(line);
    },
  );

  it("the Codex examples cover every line type and the event types reconstruction reads", () => {
    const lines = EXAMPLES.map((text) => decodeRolloutLine(text));
    const kinds = new Set(
      lines.map((line) => (line.type === "unknown" ? `unknown:${line.original_type}` : line.type)),
    );
    expect([...kinds].sort()).toEqual([
      "compacted",
      "event_msg",
      "response_item",
      "session_meta",
      "turn_context",
      "unknown:inter_agent_communication",
      "unknown:inter_agent_communication_metadata",
      "world_state",
    ]);
    const events = lines.flatMap((line) => (line.type === "event_msg" ? [line.payload.type] : []));
    expect(new Set(events)).toEqual(
      new Set([
        "task_started",
        "user_message",
        "token_count",
        "task_complete",
        "thread_rolled_back",
        "turn_aborted",
      ]),
    );
  });

  it("a whole file re-encodes to identical JSONL", () => {
    const text = `${CODEX_EXAMPLE_JSONL}\n`;
    const { lines, warnings } = decodeRolloutJsonl(text);
    expect(warnings).toEqual([]);
    expect(lines).toHaveLength(EXAMPLES.length);
    expect(encodeRolloutJsonl(lines)).toBe(text);
  });

  it("an ordinal is kept, and a null ordinal stays null", () => {
    const line =
      '{"timestamp":"t","ordinal":7,"type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":2}}';
    expect(decodeRolloutLine(line)).toEqual({
      timestamp: "t",
      ordinal: 7,
      type: "event_msg",
      payload: { type: "thread_rolled_back", num_turns: 2 },
    });
    expect(roundTrip(line)).toBe(line);
    const nullOrdinal = line.replace('"ordinal":7', '"ordinal":null');
    expect(roundTrip(nullOrdinal)).toBe(nullOrdinal);
  });

  it("fields unknown to the schemas survive a round trip in place", () => {
    const line =
      '{"timestamp":"t","type":"turn_context","payload":{"turn_id":"t1","cwd":"/repo","approval_policy":"never","model":"m","disabled_plugin_ids":["x"],"summary":"auto","cyber_access_program":{"on":true}}}';
    expect(roundTrip(line)).toBe(line);
  });
});

describe("aliases decode to their canonical names", () => {
  it("turn_started and turn_complete are read as task_started and task_complete", () => {
    const started = decodeRolloutLine(
      '{"timestamp":"t","type":"event_msg","payload":{"type":"turn_started","turn_id":"t1"}}',
    );
    expect(started).toEqual({
      timestamp: "t",
      type: "event_msg",
      payload: { type: "task_started", turn_id: "t1" },
    });
    expect(encodeRolloutLine(started)).toBe(
      '{"timestamp":"t","type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}',
    );
    const complete = decodeRolloutLine(
      '{"timestamp":"t","type":"event_msg","payload":{"type":"turn_complete","turn_id":"t1","last_agent_message":"ok"}}',
    );
    expect(encodeRolloutLine(complete)).toBe(
      '{"timestamp":"t","type":"event_msg","payload":{"type":"task_complete","turn_id":"t1","last_agent_message":"ok"}}',
    );
  });

  it("a compaction_summary item is read as a compaction item", () => {
    const line = decodeRolloutLine(
      '{"timestamp":"t","type":"response_item","payload":{"type":"compaction_summary","encrypted_content":"abc"}}',
    );
    expect(line).toEqual({
      timestamp: "t",
      type: "response_item",
      payload: { type: "compaction", encrypted_content: "abc" },
    });
  });

  it("a numeric compaction window_id is read as window_number", () => {
    const line = decodeRolloutLine(
      '{"timestamp":"t","type":"compacted","payload":{"message":"s","window_id":3}}',
    );
    expect(line).toEqual({
      timestamp: "t",
      type: "compacted",
      payload: { message: "s", window_number: 3 },
    });
    expect(encodeRolloutLine(line)).toBe(
      '{"timestamp":"t","type":"compacted","payload":{"message":"s","window_number":3}}',
    );
  });
});

describe("types this build does not know keep their type and payload", () => {
  it("an unknown line type decodes as unknown and re-encodes unchanged", () => {
    const text =
      '{"timestamp":"t","type":"rollout_reference","payload":{"path":"/x.jsonl","nested":{"a":[1,null]}}}';
    const line = decodeRolloutLine(text);
    expect(line).toEqual({
      timestamp: "t",
      type: "unknown",
      original_type: "rollout_reference",
      payload: { path: "/x.jsonl", nested: { a: [1, null] } },
    });
    expect(encodeRolloutLine(line)).toBe(text);
  });

  it("a __proto__ key in a payload stays data through a round trip", () => {
    const text =
      '{"timestamp":"t","type":"custom_line","payload":{"__proto__":{"polluted":true},"b":1}}';
    const line = decodeRolloutLine(text);
    expect(Object.hasOwn(line.payload as object, "__proto__")).toBe(true);
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
    expect(encodeRolloutLine(line)).toBe(text);
  });

  it("an unknown event type decodes as other and re-encodes unchanged", () => {
    const text =
      '{"timestamp":"t","type":"event_msg","payload":{"type":"agent_reasoning","text":"hmm","extra":{"k":1}}}';
    const line = decodeRolloutLine(text);
    expect(line).toEqual({
      timestamp: "t",
      type: "event_msg",
      payload: { type: "other", original_type: "agent_reasoning", text: "hmm", extra: { k: 1 } },
    });
    expect(encodeRolloutLine(line)).toBe(text);
  });

  it("a response item of an unknown type keeps its payload (as an unknown line)", () => {
    const text =
      '{"timestamp":"t","ordinal":4,"type":"response_item","payload":{"type":"tool_search_call","call_id":"c","execution":"client","arguments":{"q":"x"}}}';
    const line = decodeRolloutLine(text);
    expect(line).toEqual({
      timestamp: "t",
      ordinal: 4,
      type: "unknown",
      original_type: "response_item",
      payload: {
        type: "tool_search_call",
        call_id: "c",
        execution: "client",
        arguments: { q: "x" },
      },
    });
    expect(encodeRolloutLine(line)).toBe(text);
  });

  it("a known line type whose payload does not fit is kept as unknown, with a warning", () => {
    const text = '{"timestamp":"t","type":"world_state","payload":{"full":"yes","state":42}}';
    const { lines, warnings } = decodeRolloutJsonl(`${text}\n`);
    expect(lines).toEqual([
      {
        timestamp: "t",
        type: "unknown",
        original_type: "world_state",
        payload: { full: "yes", state: 42 },
      },
    ]);
    expect(warnings).toEqual([
      "rollout line 1: world_state payload does not match its schema; kept as an unknown line",
    ]);
    expect(encodeRolloutJsonl(lines)).toBe(`${text}\n`);
  });

  it("a known event type whose payload does not fit is kept, with a warning", () => {
    const text = '{"timestamp":"t","type":"event_msg","payload":{"type":"thread_rolled_back"}}';
    const { lines, warnings } = decodeRolloutJsonl(text);
    expect(lines.map(encodeRolloutLine)).toEqual([text]);
    expect(warnings).toEqual([
      "rollout line 1: thread_rolled_back event does not match its schema; kept as an unknown event",
    ]);
  });

  it("an unknown line or item type raises no warning", () => {
    const text = [
      '{"timestamp":"t","type":"realtime_item","payload":{}}',
      '{"timestamp":"t","type":"response_item","payload":{"type":"image_generation_call","status":"completed","result":"x"}}',
    ].join("\n");
    expect(decodeRolloutJsonl(text).warnings).toEqual([]);
  });
});

describe("Codex rollouts of every shape", () => {
  const lines = [...CODEX_FIXTURES.flatMap((f) => f.lines), ...Object.values(paginatedFork())]
    .flat()
    .filter((line): line is Record<string, unknown> => typeof line === "object")
    .map((line) => JSON.stringify(line));

  it("re-encode to identical JSON, members beside the payload and both sandbox tags included", () => {
    // Unmodelled items in a replacement history decode to their type alone (stored lines keep
    // their text, so exports still have them).
    const changed = lines.filter((line) => roundTrip(line) !== line);
    expect(
      changed.map((line) => JSON.parse(roundTrip(line)).payload.replacement_history[0]),
    ).toEqual([{ type: "other", original_type: "additional_tools" }]);
    const metadata = lines.find((line) => line.includes('"metadata":'));
    expect(metadata && JSON.parse(roundTrip(metadata)).metadata).toEqual({ client_authored: true });
  });

  it("legacy lines from before the envelope are refused as the legacy format", () => {
    const refusals = LEGACY_ROLLOUT.map((line, i) => {
      const error = thrown(() => decodeRolloutLine(JSON.stringify(line), i + 1));
      return error instanceof RolloutDecodeError ? error.reason : String(error);
    });
    expect(refusals).toEqual([
      LEGACY_ROLLOUT_REASON,
      LEGACY_ROLLOUT_REASON,
      'expected a string "timestamp"',
      LEGACY_ROLLOUT_REASON,
      'expected a string "timestamp"',
    ]);
  });
});

describe("malformed lines are rejected with their line number", () => {
  const good =
    '{"timestamp":"t","type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":1}}';

  it.each([
    ["invalid JSON", '{"timestamp":"t",', "invalid JSON"],
    ["an array", "[1,2]", "expected a JSON object"],
    ["a string", '"line"', "expected a JSON object"],
    ["no timestamp", '{"type":"event_msg","payload":{}}', 'expected a string "timestamp"'],
    ["a numeric type", '{"timestamp":"t","type":5,"payload":{}}', 'expected a string "type"'],
    ["no payload", '{"timestamp":"t","type":"event_msg"}', 'missing "payload"'],
    ["a string ordinal", '{"timestamp":"t","ordinal":"1","type":"x","payload":{}}', '"ordinal"'],
  ])("%s", (_name, bad, reason) => {
    const error = thrown(() => decodeRolloutJsonl([good, "", bad, good].join("\n")));
    expect(error).toBeInstanceOf(RolloutDecodeError);
    expect((error as RolloutDecodeError).lineNumber).toBe(3);
    expect((error as RolloutDecodeError).message).toContain("rollout line 3: ");
    expect((error as RolloutDecodeError).message).toContain(reason);
  });

  it("decodeRolloutLine names the line number it is given", () => {
    const error = thrown(() => decodeRolloutLine("nope", 42));
    expect(error).toBeInstanceOf(RolloutDecodeError);
    expect((error as RolloutDecodeError).lineNumber).toBe(42);
    expect((error as Error).message).toMatch(/^rollout line 42: invalid JSON/);
  });

  it("tolerant mode skips malformed lines, each with a warning naming it", () => {
    const text = [good, "{oops", good, '{"timestamp":1,"type":"x","payload":{}}', good].join("\n");
    const { lines, warnings } = decodeRolloutJsonl(text, { tolerant: true });
    expect(lines.map(encodeRolloutLine)).toEqual([good, good, good]);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/^rollout line 2: invalid JSON .*; line skipped$/);
    expect(warnings[1]).toBe('rollout line 4: expected a string "timestamp"; line skipped');
  });
});

describe("JSONL framing", () => {
  const a = '{"timestamp":"t","type":"event_msg","payload":{"type":"task_started","turn_id":"a"}}';
  const b = '{"timestamp":"t","type":"event_msg","payload":{"type":"task_complete","turn_id":"a"}}';

  it("blank lines and a trailing newline are fine, and line numbers count them", () => {
    const { lines } = decodeRolloutJsonl(`\n${a}\n   \n${b}\n`);
    expect(lines.map(encodeRolloutLine)).toEqual([a, b]);
    const error = thrown(() => decodeRolloutJsonl(`\n${a}\n\nbad\n`));
    expect((error as RolloutDecodeError).lineNumber).toBe(4);
  });

  it("CRLF line ends and a byte-order mark are accepted", () => {
    const { lines } = decodeRolloutJsonl(`\uFEFF${a}\r\n${b}\r\n`);
    expect(lines.map(encodeRolloutLine)).toEqual([a, b]);
  });

  it("an empty text has no lines", () => {
    expect(decodeRolloutJsonl("")).toEqual({ lines: [], warnings: [] });
  });

  it("encodeRolloutJsonl ends every line with a newline", () => {
    const lines: RolloutLine[] = [decodeRolloutLine(a), decodeRolloutLine(b)];
    expect(encodeRolloutJsonl(lines)).toBe(`${a}\n${b}\n`);
    expect(encodeRolloutJsonl([])).toBe("");
  });
});
