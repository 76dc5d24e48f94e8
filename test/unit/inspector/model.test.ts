import { describe, expect, it } from "vitest";
import { CONTEXTUAL_DEVELOPER_PREFIXES, MARKERS } from "../../../shared/context/markers.ts";
import { SECTION_IDS } from "../../../shared/world-state/section-ids.ts";
import {
  CONTEXT_PREFIXES,
  contextSectionOf,
  firstNewIndex,
  isSyntheticOutput,
  pairToolCalls,
  recordedOutputIds,
  rollbackText,
  sseDecoder,
  worldStateLinesFor,
} from "../../../worker/assets/inspect/model.js";

const user = (text: string) => ({
  type: "message",
  role: "user",
  content: [{ type: "input_text", text }],
});
const dev = (text: string) => ({
  type: "message",
  role: "developer",
  content: [{ type: "input_text", text }],
});

// The page labels context items from its own table (it has no build step to import the server's
// markers): these keep the table in step with shared/context/markers.ts.
describe("the inspector's context labels", () => {
  const prefixes = CONTEXT_PREFIXES.map((entry) => entry.prefix);

  it("has a label for every marker and developer prefix of the server", () => {
    for (const marker of Object.values(MARKERS)) expect(prefixes).toContain(marker.start);
    for (const prefix of CONTEXTUAL_DEVELOPER_PREFIXES) expect(prefixes).toContain(prefix);
  });

  it("names only sections the server has", () => {
    const ids: string[] = Object.values(SECTION_IDS);
    for (const entry of CONTEXT_PREFIXES)
      if (entry.section !== null) expect(ids).toContain(entry.section);
  });

  it("labels messages by their marker, case-insensitively, longest prefix first", () => {
    expect(contextSectionOf(user("<environment_context>\n  <cwd>/r</cwd>"))?.section).toBe(
      "environments",
    );
    expect(contextSectionOf(user("# AGENTS.md instructions for /r\n…"))?.section).toBe("agents_md");
    expect(contextSectionOf(dev("  <PERMISSIONS INSTRUCTIONS>…"))?.section).toBe("permissions");
    expect(contextSectionOf(dev('<extension_context id="x">…'))?.label).toBe("Custom section");
    expect(contextSectionOf(dev("<context_window_guidance>…"))?.prefix).toBe(
      "<context_window_guidance>",
    );
    expect(contextSectionOf(user("hello"))).toBeNull();
    expect(
      contextSectionOf({
        type: "message",
        role: "assistant",
        content: [{ type: "output_text", text: "<model_switch>" }],
      }),
    ).toBeNull();
  });
});

describe("the inspector's request model", () => {
  it("takes the items past the reused prefix as new", () => {
    expect(firstNewIndex({ input: [1, 2, 3], cache: { reused_prefix_items: 2 } })).toBe(2);
    expect(firstNewIndex({ input: [1], cache: { reused_prefix_items: 5 } })).toBe(1);
    expect(firstNewIndex({ input: [1] })).toBe(0);
  });

  it("pairs calls with outputs and tells a synthetic aborted output", () => {
    const items = [
      { type: "function_call", call_id: "a", name: "lookup", arguments: "{}" },
      { type: "function_call", call_id: "b", name: "lookup", arguments: "{}" },
      { type: "function_call_output", call_id: "b", output: "42" },
      { type: "function_call_output", call_id: "a", output: "aborted" },
    ];
    const pairs = pairToolCalls(items);
    expect(pairs.map((p) => [p.call?.call_id, p.output?.output])).toEqual([
      ["a", "aborted"],
      ["b", "42"],
    ]);
    const recorded = recordedOutputIds([
      { seq: 1, line: { type: "response_item", payload: items[2] } },
    ]);
    expect(isSyntheticOutput(items[3], recorded)).toBe(true);
    expect(isSyntheticOutput(items[3], new Set(["a"]))).toBe(false);
    expect(isSyntheticOutput(items[2], recorded)).toBe(false);
  });

  it("finds the world-state lines between a request and the one before it", () => {
    const ws = (seq: number) => ({
      seq,
      line: { type: "world_state", payload: { full: false, state: {} } },
    });
    const lines = [ws(1), { seq: 2, line: { type: "response_item" } }, ws(4), ws(6)];
    const requests = [{ seq: 3 }, { seq: 5 }];
    expect(worldStateLinesFor(requests, 0, lines).map((l) => l.seq)).toEqual([1]);
    expect(worldStateLinesFor(requests, 1, lines).map((l) => l.seq)).toEqual([4]);
  });

  it("says how many turns a rollback dropped", () => {
    expect(rollbackText(1)).toBe("Rolled back 1 turn");
    expect(rollbackText(3)).toBe("Rolled back 3 turns");
  });

  it("decodes server-sent events across chunks, skipping keep-alives", () => {
    const decode = sseDecoder();
    expect(decode(": keep-alive\n\nevent: turn.started\nid: 7\nda")).toEqual([]);
    expect(decode('ta: {"seq":7}\r\n\r\n')).toEqual([
      { id: "7", event: "turn.started", data: { seq: 7 } },
    ]);
  });
});
