import { describe, expect, it } from "vitest";
import type { MessageItem, ResponseItem } from "../../../shared/protocol/index.ts";
import { isBytePrefix, newSession, QUIET_TURN_LINES, runTurn, shapeOf } from "../helpers/engine.ts";

function texts(item: ResponseItem | undefined): string[] {
  if (item?.type !== "message") return [];
  return item.content.map((p) => (p.type === "input_image" ? "" : p.text));
}

/** Items a turn appended to history before its user message. */
function contextItemsOf(before: readonly ResponseItem[], after: readonly ResponseItem[]) {
  const added = after.slice(before.length);
  const user = added.findIndex(
    (i) =>
      i.type === "message" &&
      i.role === "user" &&
      !texts(i)[0]?.startsWith("<") &&
      !texts(i)[0]?.startsWith("#"),
  );
  return added.slice(0, user);
}

describe("model-visible layout across turns", () => {
  it("turn 2 appends only the model switch, the AGENTS.md replacement and the env diff; turn 3 appends no context; prompts are byte-prefixes", async () => {
    const h = newSession({
      cwd: "/repo",
      agents_md: { directory: "/repo", text: "Use tabs." },
    });

    await runTurn(h, "first turn");
    const afterTurn1 = [...h.session.history.items];

    await runTurn(h, "second turn", {
      cwd: "/repo/sub",
      agents_md: { directory: "/repo", text: "Use spaces." },
      model: "spindle-local-lite",
    });
    const afterTurn2 = [...h.session.history.items];
    const turn2Context = contextItemsOf(afterTurn1, afterTurn2);

    expect(turn2Context).toHaveLength(2);
    const [developer, user] = turn2Context as [MessageItem, MessageItem];
    expect(developer.role).toBe("developer");
    expect(texts(developer)).toHaveLength(1);
    expect(texts(developer)[0]).toMatch(
      /^<model_switch>[\s\S]*spindle-local[\s\S]*<\/model_switch>$/,
    );
    expect(user.role).toBe("user");
    const [agents, env] = texts(user);
    expect(texts(user)).toHaveLength(2);
    expect(agents).toMatch(
      /^# AGENTS\.md instructions for \/repo\n\n<INSTRUCTIONS>\n[\s\S]*Use spaces\.\n<\/INSTRUCTIONS>$/,
    );
    expect(agents).not.toContain("Use tabs.");
    expect(env).toContain("<cwd>/repo/sub</cwd>");
    // A changed cwd restates the date and timezone, as Codex 0.169's diff does.
    expect(env).toMatch(
      /<\/cwd>\n {2}<current_date>2026-03-01<\/current_date>\n {2}<timezone>UTC<\/timezone>\n {2}<filesystem>/,
    );

    await runTurn(h, "third turn");
    const turn3Context = contextItemsOf(afterTurn2, h.session.history.items);
    expect(turn3Context).toEqual([]);

    const [p1, p2, p3, ...rest] = h.client.prompts;
    if (!p1 || !p2 || !p3) throw new Error("expected three prompts");
    expect(rest).toEqual([]);
    expect(isBytePrefix(p1, p2)).toBe(true);
    expect(isBytePrefix(p2, p3)).toBe(true);
    // The third turn's prompt is the second's plus its answer and the new user message only.
    expect(p3.input.length - p2.input.length).toBe(2);
  });

  it("the third, unchanged turn writes a turn_context but no world_state and no context items", async () => {
    const h = newSession({ cwd: "/repo" });
    await runTurn(h, "one");
    await runTurn(h, "two", { cwd: "/elsewhere" });
    const mark = h.sink.items.length;
    await runTurn(h, "three");
    expect(shapeOf(h.sink.items.slice(mark))).toEqual(QUIET_TURN_LINES);
  });
});
