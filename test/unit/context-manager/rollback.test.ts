import { describe, expect, it } from "vitest";
import { ContextManager } from "../../../shared/context-manager/index.ts";
import type { TurnContextItem } from "../../../shared/protocol/index.ts";
import {
  assistant,
  developer,
  ENV_CONTEXT,
  historyWith,
  interAgent,
  PERMISSIONS,
  snapshot,
  user,
} from "./builders.ts";

const REFERENCE: TurnContextItem = { cwd: "/repo", model: "gpt-5.4", approval_policy: "never" };
const BASELINE = { permissions: { enabled: true } };

describe("dropLastNUserTurns (reference §4.5)", () => {
  it("drop_last_n_user_turns_preserves_prefix", () => {
    const items = [assistant("prefix"), user("u1"), assistant("a1"), user("u2"), assistant("a2")];
    const one = historyWith(items);
    one.dropLastNUserTurns(1);
    expect(one.items).toEqual([assistant("prefix"), user("u1"), assistant("a1")]);

    const all = historyWith(items);
    all.dropLastNUserTurns(99);
    expect(all.items).toEqual([assistant("prefix")]);
  });

  it("drop_last_n_user_turns_ignores_session_prefix_user_messages", () => {
    const prefix = [
      user(ENV_CONTEXT),
      user("# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nbe nice\n</INSTRUCTIONS>"),
      user("<skill>\n<name>demo</name>\nbody\n</skill>"),
      user("<user_shell_command>\nls\n</user_shell_command>"),
      user("<subagent_notification>{}</subagent_notification>"),
    ];
    const cm = historyWith([
      ...prefix,
      user("u1"),
      assistant("a1"),
      user("u2"),
      assistant("a2"),
      user("u3"),
      assistant("a3"),
    ]);
    cm.dropLastNUserTurns(3);
    expect(cm.items).toEqual(prefix);
  });

  it("drop_last_n_user_turns_treats_inter_agent_assistant_messages_as_instruction_turns", () => {
    const cm = historyWith([
      user("first"),
      assistant("done"),
      interAgent("continue"),
      assistant("worker reply"),
    ]);
    cm.dropLastNUserTurns(1);
    expect(cm.items).toEqual([user("first"), assistant("done")]);
  });

  it("does not count a legacy plain-text inter-agent envelope as a turn", () => {
    const legacy = assistant("author: /root\nrecipient: /root/worker\nContent: continue");
    const cm = historyWith([user("first"), assistant("done"), legacy, assistant("reply")]);
    cm.dropLastNUserTurns(1);
    expect(cm.items).toEqual([]);
  });

  it("n = 0 is a no-op that keeps historyVersion and the baseline", () => {
    const items = [user("u1"), assistant("a1")];
    const cm = historyWith(items);
    cm.worldStateBaseline = BASELINE;
    cm.dropLastNUserTurns(0);
    expect(cm.items).toEqual(items);
    expect(cm.historyVersion).toBe(0);
    expect(cm.worldStateBaseline).toEqual(BASELINE);
  });

  it("with no user-turn boundary, replaces history with itself: version bumped, baseline cleared", () => {
    const items = [developer(PERMISSIONS), user(ENV_CONTEXT), assistant("hello")];
    const cm = historyWith(items);
    cm.worldStateBaseline = BASELINE;
    cm.dropLastNUserTurns(2);
    expect(cm.items).toEqual(items);
    expect(cm.historyVersion).toBe(1);
    expect(cm.worldStateBaseline).toBeUndefined();
  });

  it("bumps historyVersion and clears the world-state baseline when it cuts", () => {
    const cm = historyWith([user("u1"), assistant("a1"), user("u2")]);
    cm.worldStateBaseline = BASELINE;
    cm.dropLastNUserTurns(1);
    expect(cm.historyVersion).toBe(1);
    expect(cm.worldStateBaseline).toBeUndefined();
  });

  it("trims contextual developer and user messages right above the cut", () => {
    const cm = historyWith([
      user("u1"),
      assistant("a1"),
      developer(PERMISSIONS),
      user(ENV_CONTEXT),
      user("u2"),
      assistant("a2"),
    ]);
    cm.referenceContextItem = REFERENCE;
    cm.dropLastNUserTurns(1);
    expect(cm.items).toEqual([user("u1"), assistant("a1")]);
    // Only contextual fragments were trimmed: the reference still describes history.
    expect(cm.referenceContextItem).toEqual(REFERENCE);
  });

  it("stops trimming at the first non-contextual item", () => {
    const cm = historyWith([
      user("u1"),
      developer(PERMISSIONS),
      assistant("a1"),
      user(ENV_CONTEXT),
      user("u2"),
    ]);
    cm.dropLastNUserTurns(1);
    expect(cm.items).toEqual([user("u1"), developer(PERMISSIONS), assistant("a1")]);
  });

  it("trimming a mixed developer bundle clears the reference context item", () => {
    const cm = historyWith([
      user("u1"),
      assistant("a1"),
      developer(PERMISSIONS, "plain developer instructions"),
      user("u2"),
    ]);
    cm.referenceContextItem = REFERENCE;
    cm.dropLastNUserTurns(1);
    expect(cm.items).toEqual([user("u1"), assistant("a1")]);
    expect(cm.referenceContextItem).toBeUndefined();
  });

  it("keeps a developer message with no contextual fragment", () => {
    const cm = historyWith([user("u1"), developer("plain developer instructions"), user("u2")]);
    cm.referenceContextItem = REFERENCE;
    cm.dropLastNUserTurns(1);
    expect(cm.items).toEqual([user("u1"), developer("plain developer instructions")]);
    expect(cm.referenceContextItem).toEqual(REFERENCE);
  });

  it("never trims above the first user turn, so the session prefix survives", () => {
    const prefix = [developer(PERMISSIONS, "base"), user(ENV_CONTEXT)];
    const cm = historyWith([...prefix, user("u1"), assistant("a1")]);
    cm.referenceContextItem = REFERENCE;
    cm.dropLastNUserTurns(5);
    expect(cm.items).toEqual(prefix);
    expect(cm.referenceContextItem).toEqual(REFERENCE);
  });

  it("counts whole turns when n is fractional", () => {
    const cm = historyWith([user("u1"), assistant("a1"), user("u2"), assistant("a2")]);
    cm.dropLastNUserTurns(1.5);
    expect(cm.items).toEqual([user("u1"), assistant("a1")]);
  });

  it("does not change a clone taken before the rollback", () => {
    const cm = historyWith([user("u1"), assistant("a1"), user("u2"), assistant("a2")]);
    const before = snapshot(cm.items);
    const copy = cm.clone();
    cm.dropLastNUserTurns(1);
    expect(copy.items).toEqual(before);
  });

  it("restores from state and rolls back the same way", () => {
    const cm = new ContextManager({ items: [user("u1"), assistant("a1"), user("u2")] });
    cm.dropLastNUserTurns(1);
    expect(cm.items).toEqual([user("u1"), assistant("a1")]);
  });
});
