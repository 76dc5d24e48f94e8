import { describe, expect, it } from "vitest";
import type { RolloutItem } from "../../../shared/protocol/index.ts";
import { AGENTS_MD_REMOVAL_NOTICE } from "../../../shared/world-state/sections/agents-md.ts";
import { contextLinesOf, type Harness, newSession, replayed, runTurn } from "../helpers/engine.ts";

const WITHDRAWAL = `# AGENTS.md instructions\n\n<INSTRUCTIONS>\n${AGENTS_MD_REMOVAL_NOTICE}\n</INSTRUCTIONS>`;

/**
 * A thread written before the AGENTS.md section existed: its first turn sent AGENTS.md text, but
 * its world_state snapshot has no `agents_md` member. It resumes with AGENTS.md gone.
 */
async function resumedWithoutAgentsMd(): Promise<Harness> {
  const writer = newSession({
    cwd: "/repo",
    agents_md: { directory: "/repo", text: "Old rules." },
  });
  await runTurn(writer, "first");
  const items = writer.sink.items.map((item): RolloutItem => {
    if (item.type !== "world_state") return item;
    const { agents_md: _, ...older } = item.payload.state;
    return { type: "world_state", payload: { full: true, state: older } };
  });
  const h = newSession({ cwd: "/repo" });
  h.sink.items.push(...items);
  return replayed(h);
}

describe("legacy AGENTS.md withdrawal (no snapshot in the baseline, AGENTS.md now absent)", () => {
  it("the next turn withdraws it with exactly one removal notice and records the empty snapshot", async () => {
    const h = await resumedWithoutAgentsMd();
    expect(h.session.history.worldStateBaseline?.agents_md).toBeUndefined();
    const mark = h.sink.items.length;
    const { turn_id } = await runTurn(h, "second");
    const [notice, turnContext, worldState, ...rest] = contextLinesOf(h.sink.items, mark);
    expect(notice).toEqual({
      type: "response_item",
      payload: {
        type: "message",
        role: "user",
        content: [{ type: "input_text", text: WITHDRAWAL }],
        internal_chat_message_metadata_passthrough: { turn_id },
      },
    });
    expect(turnContext?.type).toBe("turn_context");
    expect(worldState).toEqual({
      type: "world_state",
      payload: { full: false, state: { agents_md: {} } },
    });
    expect(rest).toEqual([]);
  });

  it("no later turn repeats it, nor one after a cold start or a fork; the cold start's prompt is byte-identical", async () => {
    const h = await resumedWithoutAgentsMd();
    await runTurn(h, "second");
    const afterWithdrawal = h.sink.items.length;

    let mark = h.sink.items.length;
    await runTurn(h, "third");
    expect(contextLinesOf(h.sink.items, mark).map((l) => l.type)).toEqual(["turn_context"]);

    const cold = replayed(h);
    expect(JSON.stringify(cold.session.previewPrompt())).toBe(
      JSON.stringify(h.session.previewPrompt()),
    );
    mark = cold.sink.items.length;
    await runTurn(cold, "fourth");
    expect(contextLinesOf(cold.sink.items, mark).map((l) => l.type)).toEqual(["turn_context"]);

    // A fork of the rollout right after the withdrawing turn.
    const fork = replayed(newSession({ cwd: "/repo" }), h.sink.items.slice(0, afterWithdrawal));
    fork.sink.items.push(...h.sink.items.slice(0, afterWithdrawal));
    mark = fork.sink.items.length;
    await runTurn(fork, "forked");
    expect(contextLinesOf(fork.sink.items, mark).map((l) => l.type)).toEqual(["turn_context"]);
    const texts = JSON.stringify(fork.session.history.items);
    expect(texts.split(AGENTS_MD_REMOVAL_NOTICE)).toHaveLength(2);
  });
});
