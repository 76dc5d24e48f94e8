import { describe, expect, it } from "vitest";
import { PromptInput } from "../../../../shared/context-manager/index.ts";
import type { KnownResponseItem, Prompt } from "../../../../shared/protocol/index.ts";
import { reasoningItemOf } from "../../../../shared/providers/anthropic/thinking.ts";
import {
  ANTHROPIC_DEFAULT_MAX_TOKENS,
  AnthropicClient,
  type ModelPrompt,
} from "../../../../shared/providers/index.ts";
import { assistant, user } from "../prompts.ts";

// The request body the anthropic provider builds from a prompt (reference §2.2-2.6, §2.10).

const EPHEMERAL = { type: "ephemeral" };

const developer = (text: string): KnownResponseItem => ({
  type: "message",
  role: "developer",
  content: [{ type: "input_text", text }],
});
const call = (callId: string, name: string, args: string): KnownResponseItem => ({
  type: "function_call",
  name,
  arguments: args,
  call_id: callId,
});
const output = (callId: string, out: string): KnownResponseItem => ({
  type: "function_call_output",
  call_id: callId,
  output: out,
});

function prompt(input: KnownResponseItem[], overrides: Partial<Omit<Prompt, "input">> = {}) {
  const p: ModelPrompt = {
    instructions: "be helpful",
    input: PromptInput.of(input),
    tools: [],
    parallel_tool_calls: true,
    ...overrides,
  };
  return p;
}

function body(p: ModelPrompt, maxOutputTokens?: number, model = "claude-test") {
  const client = new AnthropicClient({
    fetch: () => Promise.reject(new Error("no requests here")),
    apiKey: "sk-ant-test",
    model,
    ...(maxOutputTokens === undefined ? {} : { maxOutputTokens }),
  });
  return client.requestBody(p) as {
    messages: { role: string; content: Record<string, unknown>[] }[];
    [key: string]: unknown;
  };
}

/** Where the breakpoints are: `tools.N`, `system.N`, `messages.M.N`. */
function breakpoints(b: Record<string, unknown>, cacheControl: unknown = EPHEMERAL): string[] {
  const at: string[] = [];
  const scan = (list: unknown, path: string) => {
    if (!Array.isArray(list)) return;
    list.forEach((block: Record<string, unknown>, i) => {
      if (block.cache_control !== undefined) {
        expect(block.cache_control).toEqual(cacheControl);
        at.push(`${path}.${i}`);
      }
    });
  };
  scan(b.tools, "tools");
  scan(b.system, "system");
  for (const [i, m] of (b.messages as { content: unknown }[]).entries()) {
    scan(m.content, `messages.${i}`);
  }
  return at;
}

const LOOKUP = {
  type: "function" as const,
  name: "lookup",
  description: "find things",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
};
const PING = {
  type: "function" as const,
  name: "ping",
  description: "",
  parameters: { type: "object" },
};

describe("the anthropic request", () => {
  it("sends instructions as a system text block, tools with input_schema, max_tokens and stream", () => {
    const b = body(prompt([user("hi")], { tools: [LOOKUP, PING] }), 4096);
    expect(b).toEqual({
      model: "claude-test",
      max_tokens: 4096,
      system: [{ type: "text", text: "be helpful", cache_control: EPHEMERAL }],
      messages: [
        { role: "user", content: [{ type: "text", text: "hi", cache_control: EPHEMERAL }] },
      ],
      tools: [
        { name: "lookup", description: "find things", input_schema: LOOKUP.parameters },
        // No empty description; the last tool carries the tools' breakpoint.
        { name: "ping", input_schema: { type: "object" }, cache_control: EPHEMERAL },
      ],
      tool_choice: { type: "auto" },
      stream: true,
    });
  });

  it("defaults max_tokens, omits tools, tool_choice and an empty system, and asks for one call at a time when parallel calls are off", () => {
    const b = body(prompt([user("hi")], { instructions: "  " }));
    expect(b.max_tokens).toBe(ANTHROPIC_DEFAULT_MAX_TOKENS);
    expect(b).not.toHaveProperty("system");
    expect(b).not.toHaveProperty("tools");
    expect(b).not.toHaveProperty("tool_choice");
    const serial = body(prompt([user("hi")], { tools: [PING], parallel_tool_calls: false }));
    expect(serial.tool_choice).toEqual({ type: "auto", disable_parallel_tool_use: true });
  });

  it("merges adjacent same-role items: developer context and the user's text are one user turn, a step's text and calls one assistant turn", () => {
    const b = body(
      prompt([
        developer("<permissions>read only</permissions>"),
        user("<environment_context>cwd</environment_context>"),
        user("look up x"),
        assistant("Looking."),
        call("toolu_1", "lookup", '{"q":"x"}'),
        call("toolu_2", "lookup", '{"q":"y"}'),
        output("toolu_1", "one"),
        output("toolu_2", "two"),
      ]),
    );
    expect(b.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "<permissions>read only</permissions>" },
          { type: "text", text: "<environment_context>cwd</environment_context>" },
          { type: "text", text: "look up x", cache_control: EPHEMERAL },
        ],
      },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Looking." },
          { type: "tool_use", id: "toolu_1", name: "lookup", input: { q: "x" } },
          { type: "tool_use", id: "toolu_2", name: "lookup", input: { q: "y" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_1", content: "one" },
          { type: "tool_result", tool_use_id: "toolu_2", content: "two", cache_control: EPHEMERAL },
        ],
      },
    ]);
  });

  it("puts tool results before other text of their user turn, keeping each group's order", () => {
    const b = body(
      prompt([
        user("go"),
        call("toolu_1", "lookup", "{}"),
        developer("<world_state_diff>a</world_state_diff>"),
        output("toolu_1", "done"),
        user("and then?"),
      ]),
    );
    expect(b.messages[2]?.content.map((c) => (c.type === "text" ? c.text : c.tool_use_id))).toEqual(
      ["toolu_1", "<world_state_diff>a</world_state_diff>", "and then?"],
    );
  });

  it("maps images: data URLs to base64 sources, https URLs to url sources, unsupported types to a note", () => {
    const b = body(
      prompt([
        {
          type: "message",
          role: "user",
          content: [
            { type: "input_text", text: "what is this?" },
            { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=" },
            { type: "input_image", image_url: "https://example.com/cat.jpg", detail: "high" },
            { type: "input_image", image_url: "data:image/bmp;base64,Qk0=" },
          ],
        },
      ]),
    );
    expect(b.messages[0]?.content).toEqual([
      { type: "text", text: "what is this?" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
      { type: "image", source: { type: "url", url: "https://example.com/cat.jpg" } },
      {
        type: "text",
        text: "[image omitted: image/bmp is not supported]",
        cache_control: EPHEMERAL,
      },
    ]);
  });

  it("leaves out empty text, sends tool outputs with content items as blocks, and an empty output without content", () => {
    const b = body(
      prompt([
        user("go"),
        assistant(" "),
        call("toolu_1", "lookup", ""),
        call("toolu_2", "lookup", "{}"),
        {
          type: "function_call_output",
          call_id: "toolu_1",
          output: [
            { type: "input_text", text: "see" },
            { type: "input_image", image_url: "https://example.com/chart.png" },
            { type: "input_text", text: "" },
          ],
        },
        output("toolu_2", ""),
      ]),
    );
    expect(b.messages.slice(1)).toEqual([
      {
        role: "assistant",
        content: [
          // Arguments that are not a JSON object (here: none) send an empty input.
          { type: "tool_use", id: "toolu_1", name: "lookup", input: {} },
          { type: "tool_use", id: "toolu_2", name: "lookup", input: {} },
        ],
      },
      {
        role: "user",
        content: [
          {
            type: "tool_result",
            tool_use_id: "toolu_1",
            content: [
              { type: "text", text: "see" },
              { type: "image", source: { type: "url", url: "https://example.com/chart.png" } },
            ],
          },
          { type: "tool_result", tool_use_id: "toolu_2", cache_control: EPHEMERAL },
        ],
      },
    ]);
  });

  it("sends custom and local shell calls as tool uses, and drops items with no Anthropic form", () => {
    const b = body(
      prompt([
        user("go"),
        { type: "web_search_call", status: "completed", action: { type: "search" } },
        { type: "custom_tool_call", call_id: "c1", name: "apply_patch", input: "*** Begin Patch" },
        {
          type: "local_shell_call",
          call_id: "c2",
          status: "completed",
          action: { type: "exec", command: ["ls"] },
        },
        { type: "custom_tool_call_output", call_id: "c1", output: "patched" },
        output("c2", "README.md"),
        { type: "compaction", encrypted_content: "opaque" },
      ]),
    );
    expect(b.messages.slice(1)).toEqual([
      {
        role: "assistant",
        content: [
          { type: "tool_use", id: "c1", name: "apply_patch", input: { input: "*** Begin Patch" } },
          {
            type: "tool_use",
            id: "c2",
            name: "local_shell",
            input: { type: "exec", command: ["ls"] },
          },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "c1", content: "patched" },
          {
            type: "tool_result",
            tool_use_id: "c2",
            content: "README.md",
            cache_control: EPHEMERAL,
          },
        ],
      },
    ]);
  });

  it("sends no bookkeeping fields of history items", () => {
    const b = body(
      prompt([
        {
          type: "message",
          id: "item_1",
          role: "user",
          content: [{ type: "input_text", text: "hi" }],
          internal_chat_message_metadata_passthrough: { turn_id: "t1" },
        },
      ]),
    );
    expect(JSON.stringify(b)).not.toMatch(/item_1|turn_id|passthrough/);
  });
});

describe("the anthropic request's cache breakpoints", () => {
  it("sit on the last tool, the system block, the previous request's last block and the newest block: four at most", () => {
    const b = body(
      prompt(
        [
          user("first"),
          assistant("answer"),
          user("look up x"),
          call("toolu_1", "lookup", '{"q":"x"}'),
          output("toolu_1", "found"),
          developer("<world_state_diff>b</world_state_diff>"),
        ],
        { tools: [LOOKUP, PING] },
      ),
    );
    expect(breakpoints(b)).toEqual(["tools.1", "system.0", "messages.2.0", "messages.4.1"]);
    expect(b.messages[4]?.content[1]).toMatchObject({ type: "text" });
  });

  it("write one-hour entries, every one of them, for a model whose entry sets cache_ttl 1h", () => {
    const hour = new AnthropicClient({
      fetch: () => Promise.reject(new Error("no requests here")),
      apiKey: "sk-ant-test",
      model: "claude-test",
      wire: { cache_ttl: "1h" },
    });
    const b = hour.requestBody(
      prompt([user("first"), assistant("answer"), user("again")], { tools: [PING] }),
    );
    expect(breakpoints(b, { type: "ephemeral", ttl: "1h" })).toEqual([
      "tools.0",
      "system.0",
      "messages.0.0",
      "messages.2.0",
    ]);
  });

  it("are three on a first request (no earlier user turn), and two without tools", () => {
    expect(breakpoints(body(prompt([developer("ctx"), user("hi")], { tools: [PING] })))).toEqual([
      "tools.0",
      "system.0",
      "messages.0.1",
    ]);
    expect(breakpoints(body(prompt([user("hi")])))).toEqual(["system.0", "messages.0.0"]);
  });

  it("never sit on a thinking block: a history that ends in an assistant turn marks its last other block", () => {
    const thought = reasoningItemOf(
      { type: "thinking", thinking: "hmm", signature: "sig" },
      "claude-test",
    );
    const b = body(
      prompt([user("hi"), call("toolu_1", "ping", "{}"), thought], {
        reasoning: { effort: "low" },
      }),
      20_000,
    );
    expect(b.messages[1]?.content.map((c) => c.type)).toEqual(["tool_use", "thinking"]);
    expect(breakpoints(b)).toEqual(["system.0", "messages.0.0", "messages.1.0"]);
  });

  it("stay at four with many messages and parallel calls", () => {
    const items: KnownResponseItem[] = [];
    for (let turn = 0; turn < 5; turn++) {
      items.push(user(`turn ${turn}`));
      for (let c = 0; c < 12; c++) items.push(call(`toolu_${turn}_${c}`, "lookup", "{}"));
      for (let c = 0; c < 12; c++) items.push(output(`toolu_${turn}_${c}`, `r${c}`));
    }
    const b = body(prompt(items, { tools: [LOOKUP] }));
    // The previous request ended with turn 4's text; this one appended 12 calls and their 12
    // outputs, more than the API's 20-block lookback.
    expect(breakpoints(b)).toEqual(["tools.0", "system.0", "messages.8.12", "messages.10.11"]);
    expect(b.messages[8]?.content[12]).toMatchObject({ type: "text", text: "turn 4" });
  });
});

describe("the anthropic request's thinking", () => {
  const thought = reasoningItemOf(
    { type: "thinking", thinking: "Let me see.", signature: "c2lnbmF0dXJl" },
    "claude-test",
  );
  const redacted = reasoningItemOf(
    { type: "redacted_thinking", data: "EmwKAhgBEgy" },
    "claude-test",
  );
  const history = [
    user("go"),
    thought,
    redacted,
    call("toolu_1", "ping", "{}"),
    output("toolu_1", "pong"),
  ];

  it("is enabled for a reasoning model, its budget by effort, within half of max_tokens", () => {
    const budget = (effort: NonNullable<Prompt["reasoning"]>["effort"], max = 64_000) =>
      body(prompt([user("hi")], { reasoning: effort === undefined ? {} : { effort } }), max)
        .thinking;
    expect(budget(undefined)).toEqual({ type: "enabled", budget_tokens: 8192 });
    expect(budget("minimal")).toEqual({ type: "enabled", budget_tokens: 1024 });
    expect(budget("low")).toEqual({ type: "enabled", budget_tokens: 4096 });
    expect(budget("high")).toEqual({ type: "enabled", budget_tokens: 16_384 });
    expect(budget("xhigh")).toEqual({ type: "enabled", budget_tokens: 32_000 });
    expect(budget("none")).toBeUndefined();
    // max_tokens 2000 leaves no room for the API's minimum of 1024.
    expect(budget("high", 2000)).toBeUndefined();
    expect(body(prompt([user("hi")]), 64_000).thinking).toBeUndefined();
  });

  it("is adaptive for a model that takes only that: the effort in output_config, no budget", () => {
    const adaptive = new AnthropicClient({
      fetch: () => Promise.reject(new Error("no requests here")),
      apiKey: "sk-ant-test",
      model: "claude-test",
      maxOutputTokens: 2000,
      wire: { thinking: "adaptive" },
    });
    const sent = (effort?: NonNullable<Prompt["reasoning"]>["effort"]) => {
      const b = adaptive.requestBody(
        prompt([user("hi"), thought, call("toolu_1", "ping", "{}"), output("toolu_1", "pong")], {
          reasoning: effort === undefined ? {} : { effort },
        }),
      ) as {
        thinking?: unknown;
        output_config?: unknown;
        messages: { content: { type: string }[] }[];
      };
      return [b.thinking, b.output_config, b.messages[1]?.content[0]?.type];
    };
    // Even a max_tokens too small for a budget: the model sizes its own thinking.
    expect(sent()).toEqual([{ type: "adaptive" }, { effort: "medium" }, "thinking"]);
    expect(sent("minimal")[1]).toEqual({ effort: "low" });
    expect(sent("high")[1]).toEqual({ effort: "high" });
    expect(sent("xhigh")[1]).toEqual({ effort: "max" });
    expect(sent("none")).toEqual([undefined, undefined, "tool_use"]);
    const plain = adaptive.requestBody(prompt([user("hi")]));
    expect([plain.thinking, plain.output_config]).toEqual([undefined, undefined]);
  });

  it("sends recorded thinking back unchanged, in order, in the assistant turn of its tool use", () => {
    const b = body(prompt(history, { reasoning: { effort: "low" } }), 32_000);
    expect(b.messages[1]).toEqual({
      role: "assistant",
      content: [
        { type: "thinking", thinking: "Let me see.", signature: "c2lnbmF0dXJl" },
        { type: "redacted_thinking", data: "EmwKAhgBEgy" },
        { type: "tool_use", id: "toolu_1", name: "ping", input: {} },
      ],
    });
  });

  it("replays from encrypted_content alone, as a client re-adding the item keeps only that", () => {
    const { content: _, ...bare } = thought as { content?: unknown };
    const b = body(
      prompt(
        [
          user("go"),
          bare as KnownResponseItem,
          call("toolu_1", "ping", "{}"),
          output("toolu_1", "x"),
        ],
        { reasoning: {} },
      ),
      32_000,
    );
    expect(b.messages[1]?.content[0]).toEqual({
      type: "thinking",
      thinking: "Let me see.",
      signature: "c2lnbmF0dXJl",
    });
  });

  it("drops thinking when the request does not think, when another model produced it, and OpenAI reasoning", () => {
    const openai: KnownResponseItem = {
      type: "reasoning",
      summary: [{ type: "summary_text", text: "**Plan**" }],
      encrypted_content: "gAAAAABencrypted==",
    };
    const types = (b: ReturnType<typeof body>) => b.messages[1]?.content.map((c) => c.type);
    expect(types(body(prompt(history), 32_000))).toEqual(["tool_use"]);
    expect(types(body(prompt(history, { reasoning: {} }), 32_000, "claude-other"))).toEqual([
      "tool_use",
    ]);
    const withOpenAI = [user("go"), openai, call("toolu_1", "ping", "{}"), output("toolu_1", "x")];
    expect(types(body(prompt(withOpenAI, { reasoning: {} }), 32_000))).toEqual(["tool_use"]);
  });
});
