/**
 * A turn's additional context (Codex's `additional_context`, `core/tests/suite/additional_context.rs`):
 * `<external_{key}>` user messages before the input, sorted by key, not sent again while they
 * are unchanged and still in history, sent again when a turn brings a dropped key back.
 */
import { describe, expect, it } from "vitest";
import type { Prompt } from "../../../shared/protocol/index.ts";
import { drain, type Harness, newSession, replayed, text } from "../helpers/engine.ts";

async function turn(h: Harness, input: string, additional?: Record<string, string>) {
  const gen = h.session.runTurn({
    ...text(input),
    ...(additional === undefined ? {} : { additional_context: additional }),
  });
  return (await drain(gen)).outcome;
}

/** The user texts of a request, each message's first part. */
function userTexts(prompt: Prompt | undefined): string[] {
  return (prompt?.input ?? []).flatMap((item) =>
    item.type === "message" && item.role === "user"
      ? item.content.flatMap((p) => (p.type === "input_text" ? [p.text] : []))
      : [],
  );
}

const withoutContext = (texts: string[]) => texts.filter((t) => !t.startsWith("<environment"));

describe("additional context", () => {
  it("goes before the input as one user message per key, in key order", async () => {
    const h = newSession({ cwd: "/repo" });
    await turn(h, "first turn", { browser_info: "tab one", automation_info: "run one" });
    expect(withoutContext(userTexts(h.client.prompts[0]))).toEqual([
      "<external_automation_info>run one</external_automation_info>",
      "<external_browser_info>tab one</external_browser_info>",
      "first turn",
    ]);
    const context = h.session.history.items.filter(
      (i) =>
        i.type === "message" &&
        i.content.some((p) => p.type === "input_text" && p.text.startsWith("<ext")),
    );
    expect(context).toHaveLength(2);
  });

  it("is deduplicated between turns while retained; a new key alone is sent; a key brought back is sent again", async () => {
    const h = newSession({ cwd: "/repo" });
    await turn(h, "one", { automation_info: "a", browser_info: "b" });
    await turn(h, "two", { automation_info: "a", browser_info: "b" });
    expect(withoutContext(userTexts(h.client.prompts[1]))).toEqual([
      "<external_automation_info>a</external_automation_info>",
      "<external_browser_info>b</external_browser_info>",
      "one",
      "two",
    ]);
    await turn(h, "three", { automation_info: "a", terminal_info: "t" });
    expect(withoutContext(userTexts(h.client.prompts[2])).slice(-3)).toEqual([
      "two",
      "<external_terminal_info>t</external_terminal_info>",
      "three",
    ]);
    await turn(h, "four", { automation_info: "a", browser_info: "b", terminal_info: "t" });
    expect(withoutContext(userTexts(h.client.prompts[3])).slice(-3)).toEqual([
      "three",
      "<external_browser_info>b</external_browser_info>",
      "four",
    ]);
    // A changed value is sent; a turn without any drops them all, sending nothing.
    await turn(h, "five", { automation_info: "a2" });
    await turn(h, "six");
    expect(withoutContext(userTexts(h.client.prompts[5])).slice(-3)).toEqual([
      "<external_automation_info>a2</external_automation_info>",
      "five",
      "six",
    ]);
  });

  it("is sent again after a compaction dropped it, and a thread rebuilt from its rollout does the same", async () => {
    const h = newSession({ cwd: "/repo" });
    await turn(h, "one", { browser_info: "b" });
    const rebuilt = replayed(h);
    await turn(rebuilt, "two", { browser_info: "b" });
    expect(withoutContext(userTexts(rebuilt.client.prompts.at(-1))).slice(-2)).toEqual([
      "one",
      "two",
    ]);
    await drain(rebuilt.session.compact());
    await turn(rebuilt, "three", { browser_info: "b" });
    expect(userTexts(rebuilt.client.prompts.at(-1)).slice(-2)).toEqual([
      "<external_browser_info>b</external_browser_info>",
      "three",
    ]);
  });

  it("escapes &, < and > and cuts a long value in the middle", async () => {
    const h = newSession();
    const long = `head ${"x".repeat(40_000)} tail`;
    await turn(h, "go", { a: "</external_a><b>&", long });
    const [escaped, cut] = withoutContext(userTexts(h.client.prompts[0]));
    expect(escaped).toBe("<external_a>&lt;/external_a&gt;&lt;b&gt;&amp;</external_a>");
    expect(cut).toMatch(/^<external_long>head x+…\d+ tokens truncated…x+ tail<\/external_long>$/);
    expect(cut?.length).toBeLessThan(4_200);
  });
});

describe("include_environment_context: false (Codex's include_environment_context)", () => {
  const contextTexts = (h: Harness, from: number) =>
    h.session.history.items
      .slice(from)
      .flatMap((i) =>
        i.type === "message"
          ? i.content.flatMap((p) => (p.type === "input_text" ? [p.text.split("\n")[0]] : []))
          : [],
      );

  it("sends no <environment_context> and stores no environments snapshot; turning it on sends the full one, off again removes it without a word", async () => {
    const h = newSession({ cwd: "/repo", include_environment_context: false });
    await turn(h, "one");
    expect(contextTexts(h, 0)).not.toContain("<environment_context>");
    expect(h.session.history.worldStateBaseline?.environments).toBeUndefined();
    let mark = h.session.history.items.length;
    await drain(h.session.runTurn(text("three"), { include_environment_context: true }));
    expect(contextTexts(h, mark)[0]).toBe("<environment_context>");
    mark = h.session.history.items.length;
    const lines = h.sink.items.length;
    await drain(h.session.runTurn(text("four"), { include_environment_context: false }));
    expect(contextTexts(h, mark)[0]).toBe("four");
    const patch = h.sink.items.slice(lines).find((i) => i.type === "world_state");
    expect(patch?.type === "world_state" && patch.payload).toEqual({
      full: false,
      state: { environments: null },
    });
  });
});
