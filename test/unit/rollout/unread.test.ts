import { describe, expect, it } from "vitest";
import type { RolloutLine } from "../../../shared/protocol/index.ts";
import { decodeRolloutLine, unreadLineWarnings } from "../../../shared/rollout/index.ts";

const line = (type: string, payload: unknown) =>
  decodeRolloutLine(JSON.stringify({ timestamp: "t", type, payload }));
const numbered = (lines: RolloutLine[]) => lines.map((l, i) => ({ seq: i + 1, line: l }));

describe("unreadLineWarnings: what a rollout held that this build cannot read", () => {
  it("gives one warning per problem, naming up to five of its lines and counting the rest", () => {
    const broken = line("turn_context", { cwd: "/r" });
    const lines = [line("session_meta", { id: "s" }), ...Array.from({ length: 7 }, () => broken)];
    expect(unreadLineWarnings(numbered(lines))).toEqual([
      "rollout lines 2, 3, 4, 5, 6 (and 2 more): turn_context could not be read (model: Invalid input: expected string, received undefined); the settings it records are not applied",
    ]);
  });

  it("names items of a replacement history that history cannot hold, but not request-prefix tools", () => {
    const replacement = (types: string[]) =>
      line("compacted", {
        message: "",
        replacement_history: types.map((type) => ({ type, role: "developer" })),
      });
    expect(
      unreadLineWarnings(
        numbered([
          replacement(["additional_tools"]),
          replacement(["additional_tools", "context_compaction", "configuration_update"]),
        ]),
      ),
    ).toEqual([
      "rollout line 2: compacted replacement history holds items of types Spindle does not model (context_compaction, configuration_update); they are left out of history",
    ]);
  });

  it("says nothing of line types it does not know, of Spindle's own lines, or of non-history items", () => {
    const lines = [
      line("session_meta", { id: "s", cwd: "/r", originator: "spindle" }),
      line("inter_agent_communication_metadata", { trigger_turn: false }),
      line("response_item", { type: "ghost_snapshot", ghost_commit: {} }),
      line("event_msg", { type: "agent_reasoning", text: "…" }),
      line("turn_context", { cwd: "/r", model: "m", sandbox_policy: { mode: "read-only" } }),
    ];
    expect(unreadLineWarnings(numbered(lines))).toEqual([]);
  });
});
