import { describe, expect, it } from "vitest";
import {
  hasNonContextualDevMessageContent,
  isContextualDevFragment,
  isContextualDevMessageContent,
  isContextualUserFragment,
  isContextualUserMessageContent,
  isUserTurnBoundary,
} from "../../../shared/context/index.ts";
import type { ContentItem, MessageItem, ResponseItem } from "../../../shared/protocol/index.ts";

function text(t: string): ContentItem {
  return { type: "input_text", text: t };
}

function msg(role: MessageItem["role"], ...content: ContentItem[]): MessageItem {
  return { type: "message", role, content };
}

const IMAGE: ContentItem = { type: "input_image", image_url: "data:image/png;base64,AAAA" };

describe("contextual user fragments (reference §2.3, catalog 33-37)", () => {
  it("detects_environment_context_fragment", () => {
    expect(
      isContextualUserFragment(
        text("<environment_context>\n<cwd>/tmp</cwd>\n</environment_context>"),
      ),
    ).toBe(true);
  });

  it("detects_agents_instructions_fragment", () => {
    expect(
      isContextualUserFragment(
        text("# AGENTS.md instructions for /tmp\n\n<INSTRUCTIONS>\nbody\n</INSTRUCTIONS>"),
      ),
    ).toBe(true);
  });

  it("detects_agents_instructions_fragment without a single project directory", () => {
    expect(
      isContextualUserFragment(
        text("# AGENTS.md instructions\n\n<INSTRUCTIONS>\nbody\n</INSTRUCTIONS>"),
      ),
    ).toBe(true);
  });

  it("detects_subagent_notification_fragment_case_insensitively", () => {
    expect(
      isContextualUserFragment(text("<SUBAGENT_NOTIFICATION>{}</subagent_notification>")),
    ).toBe(true);
  });

  it("ignores_regular_user_text", () => {
    expect(isContextualUserFragment(text("hello"))).toBe(false);
  });

  it("detects_extension_context_fragment", () => {
    expect(isContextualUserFragment(text("<extension_context>data</extension_context>"))).toBe(
      true,
    );
  });

  it("detects_legacy_goal_context_fragment", () => {
    expect(isContextualUserFragment(text("<goal_context>ship it</goal_context>"))).toBe(true);
  });

  it.each([
    ["legacy user instructions", "<user_instructions>be nice</user_instructions>"],
    ["turn aborted", "<turn_aborted>\nthe user interrupted\n</turn_aborted>"],
    ["skill", "<skill>\n<name>demo</name>\n<path>/s/SKILL.md</path>\nbody\n</skill>"],
    ["user shell command", "<user_shell_command>\nls\n</user_shell_command>"],
    ["additional context", "<external_ticket>ABC-1</external_ticket>"],
  ])("detects the %s fragment", (_name, t) => {
    expect(isContextualUserFragment(text(t))).toBe(true);
  });

  it("only input_text counts: output_text and images never do", () => {
    expect(
      isContextualUserFragment({
        type: "output_text",
        text: "<environment_context></environment_context>",
      }),
    ).toBe(false);
    expect(isContextualUserFragment(IMAGE)).toBe(false);
  });

  it("an image wrapper tag is not contextual", () => {
    expect(isContextualUserFragment(text("<image name=[Image #1]>"))).toBe(false);
    expect(isContextualUserFragment(text("</image>"))).toBe(false);
  });

  it("needs the end marker, not just the start", () => {
    expect(isContextualUserFragment(text("<environment_context> and then chat"))).toBe(false);
  });

  it("message content is contextual if any part is, not only if all are", () => {
    expect(
      isContextualUserMessageContent([text("hello"), text("<turn_aborted>x</turn_aborted>")]),
    ).toBe(true);
    expect(isContextualUserMessageContent([text("hello"), IMAGE])).toBe(false);
    expect(isContextualUserMessageContent([])).toBe(false);
  });
});

describe("contextual developer fragments (reference §2.3)", () => {
  it.each([
    "<permissions instructions>",
    "<model_switch>",
    "<collaboration_mode>",
    "<realtime_conversation>",
    "<skills_instructions>",
    "<personality_spec>",
    "<token_budget>",
    "<multi_agent_mode>",
    "<context_window>",
    "<context_window_guidance>",
    "<rollout_budget>",
  ])("recognizes the %s prefix", (prefix) => {
    expect(isContextualDevFragment(text(`${prefix}\nbody`))).toBe(true);
  });

  it("checks only the prefix, after leading whitespace, case-insensitively", () => {
    expect(isContextualDevFragment(text("  \n<PERMISSIONS INSTRUCTIONS> no closing tag"))).toBe(
      true,
    );
    expect(isContextualDevFragment(text("intro <permissions instructions>"))).toBe(false);
  });

  it("needs the space in <permissions instructions>", () => {
    expect(
      isContextualDevFragment(text("<permissions_instructions>x</permissions_instructions>")),
    ).toBe(false);
  });

  it("only input_text counts", () => {
    expect(
      isContextualDevFragment({ type: "output_text", text: "<model_switch>x</model_switch>" }),
    ).toBe(false);
    expect(isContextualDevFragment(IMAGE)).toBe(false);
  });

  it("a message is contextual if any part is; it is mixed if any part is not (images included)", () => {
    const contextual = text("<permissions instructions>x</permissions instructions>");
    expect(isContextualDevMessageContent([text("plain"), contextual])).toBe(true);
    expect(isContextualDevMessageContent([text("plain")])).toBe(false);
    expect(hasNonContextualDevMessageContent([contextual])).toBe(false);
    expect(hasNonContextualDevMessageContent([contextual, text("plain")])).toBe(true);
    expect(hasNonContextualDevMessageContent([contextual, IMAGE])).toBe(true);
  });
});

describe("isUserTurnBoundary (reference §2.3, catalog 57)", () => {
  const interAgentJson = JSON.stringify({
    author: "/root",
    recipient: "/root/worker",
    other_recipients: [],
    content: "continue",
    trigger_turn: true,
  });

  it("a user message with no contextual part is a boundary", () => {
    expect(isUserTurnBoundary(msg("user", text("fix the bug")))).toBe(true);
    expect(isUserTurnBoundary(msg("user", IMAGE))).toBe(true);
  });

  it("a user message with any contextual part is not", () => {
    expect(
      isUserTurnBoundary(msg("user", text("<environment_context></environment_context>"))),
    ).toBe(false);
    expect(
      isUserTurnBoundary(msg("user", text("hi"), text("<turn_aborted>x</turn_aborted>"))),
    ).toBe(false);
  });

  it("inter_agent_assistant_messages_are_turn_boundaries", () => {
    expect(
      isUserTurnBoundary(msg("assistant", { type: "output_text", text: interAgentJson })),
    ).toBe(true);
  });

  it("legacy_inter_agent_assistant_messages_are_not_turn_boundaries", () => {
    const legacy = "author: /root\nrecipient: /root/worker\nContent: continue";
    expect(isUserTurnBoundary(msg("assistant", { type: "output_text", text: legacy }))).toBe(false);
  });

  it("plain assistant text, including JSON that is not a communication, is not a boundary", () => {
    expect(isUserTurnBoundary(msg("assistant", { type: "output_text", text: "done" }))).toBe(false);
    expect(
      isUserTurnBoundary(msg("assistant", { type: "output_text", text: '{"answer":42}' })),
    ).toBe(false);
  });

  it("developer and system messages and tool items are never boundaries", () => {
    const items: ResponseItem[] = [
      msg("developer", text("fix the bug")),
      msg("system", text("fix the bug")),
      { type: "function_call", name: "f", arguments: "{}", call_id: "c" },
      { type: "function_call_output", call_id: "c", output: "ok" },
      { type: "reasoning", summary: [], content: null, encrypted_content: null },
      { type: "other", original_type: "agent_message" },
    ];
    expect(items.map(isUserTurnBoundary)).toEqual([false, false, false, false, false, false]);
  });
});
