import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { KnownResponseItem, ToolOutput } from "../../../../shared/protocol/index.ts";
import {
  type ChatWireOptions,
  defaultChatWireOptions,
  OpenAIChatClient,
} from "../../../../shared/providers/index.ts";
import { type ChatStandIn, startChatStandIn } from "../../../helpers/chat-stand-in.ts";
import { assistant, drain, harness, LOOKUP, prompt, user } from "./harness.ts";

let standIn: ChatStandIn;
beforeAll(async () => {
  standIn = await startChatStandIn();
});
afterAll(() => standIn.close());
beforeEach(() => standIn.reset());

const client = (wire: Partial<ChatWireOptions> = {}, maxOutputTokens?: number) =>
  new OpenAIChatClient({
    fetch,
    apiKey: "k",
    model: "qwen3-test",
    maxOutputTokens,
    wire: { ...defaultChatWireOptions(), ...wire },
  });

const call = (callId: string, name = "lookup", args = '{"q":"x"}'): KnownResponseItem => ({
  type: "function_call",
  id: `fc_${callId}`,
  name,
  arguments: args,
  call_id: callId,
});
const output = (callId: string, out: ToolOutput): KnownResponseItem => ({
  type: "function_call_output",
  call_id: callId,
  output: out,
});
const developer = (text: string): KnownResponseItem => ({
  type: "message",
  role: "developer",
  content: [{ type: "input_text", text }],
});
const reasoningText = (text: string): KnownResponseItem => ({
  type: "reasoning",
  summary: [],
  content: [{ type: "reasoning_text", text }],
});
const encryptedReasoning: KnownResponseItem = {
  type: "reasoning",
  summary: [{ type: "summary_text", text: "thought about it" }],
  encrypted_content: "gAAAA-opaque",
};

describe("openai-chat request body", () => {
  it("maps a history faithfully: instructions first, parallel calls in one assistant message, outputs as tool messages", () => {
    const history: KnownResponseItem[] = [
      developer("<permissions>read-only</permissions>"),
      {
        type: "message",
        id: "msg_u1",
        role: "user",
        content: [
          { type: "input_text", text: "what is " },
          { type: "input_text", text: "this?" },
          { type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "original" },
        ],
        internal_chat_message_metadata_passthrough: { turn_id: "turn-1" },
      },
      encryptedReasoning,
      assistant("Let me look."),
      call("call_a"),
      call("call_b", "lookup", '{"q":"y"}'),
      output("call_b", "B result"),
      output("call_a", [
        { type: "input_text", text: "A " },
        { type: "input_text", text: "result" },
        { type: "input_image", image_url: "https://img.test/a.png" },
      ]),
      assistant("Both found."),
      user("thanks"),
    ];
    const body = client({}, 2048).requestBody(
      prompt(history, {
        tools: [LOOKUP, { ...LOOKUP, name: "strict_one", strict: true }],
        parallel_tool_calls: false,
        reasoning: { effort: "high", summary: "auto" },
      }),
    );
    expect(body).toEqual({
      model: "qwen3-test",
      messages: [
        { role: "system", content: "be helpful" },
        { role: "developer", content: "<permissions>read-only</permissions>" },
        {
          role: "user",
          content: [
            { type: "text", text: "what is " },
            { type: "text", text: "this?" },
            // `original` has no Chat counterpart; high is the closest.
            { type: "image_url", image_url: { url: "data:image/png;base64,AAAA", detail: "high" } },
          ],
        },
        {
          role: "assistant",
          content: "Let me look.",
          tool_calls: [
            {
              id: "call_a",
              type: "function",
              function: { name: "lookup", arguments: '{"q":"x"}' },
            },
            {
              id: "call_b",
              type: "function",
              function: { name: "lookup", arguments: '{"q":"y"}' },
            },
          ],
        },
        { role: "tool", tool_call_id: "call_b", content: "B result" },
        // Images in tool outputs are off by default: the text alone.
        { role: "tool", tool_call_id: "call_a", content: "A result" },
        { role: "assistant", content: "Both found." },
        { role: "user", content: "thanks" },
      ],
      tools: [
        {
          type: "function",
          function: {
            name: "lookup",
            description: "find things",
            parameters: { type: "object", properties: { q: { type: "string" } } },
          },
        },
        {
          type: "function",
          function: {
            name: "strict_one",
            description: "find things",
            parameters: { type: "object", properties: { q: { type: "string" } } },
            strict: true,
          },
        },
      ],
      parallel_tool_calls: false,
      reasoning_effort: "high",
      max_completion_tokens: 2048,
      stream: true,
      stream_options: { include_usage: true },
    });
    // Bookkeeping and OpenAI-only state never leave: no ids, no passthrough, no encrypted reasoning.
    const text = JSON.stringify(body);
    for (const absent of ["msg_u1", "fc_call_a", "turn-1", "gAAAA", "thought about it"]) {
      expect(text).not.toContain(absent);
    }
    expect(body).not.toHaveProperty("prompt_cache_key");
  });

  it("sends calls without text as an assistant message with null content, and no tools member without tools", () => {
    const body = client().requestBody(
      prompt([user("go"), call("c1"), output("c1", "done")], { text: { verbosity: "low" } }),
    );
    expect(body.messages).toEqual([
      { role: "system", content: "be helpful" },
      { role: "user", content: "go" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "c1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "done" },
    ]);
    // OpenAI refuses parallel_tool_calls without tools.
    expect(body).not.toHaveProperty("tools");
    expect(body).not.toHaveProperty("parallel_tool_calls");
    expect(body).not.toHaveProperty("reasoning_effort");
    expect(body).not.toHaveProperty("max_completion_tokens");
    expect(body.verbosity).toBe("low");
  });

  it("holds a message that comes between calls and their outputs until every call is answered", () => {
    const history: KnownResponseItem[] = [
      user("go"),
      call("c1"),
      assistant("(after the calls)"),
      developer("<world>changed</world>"),
      call("c2"),
      output("c1", "one"),
      output("c2", "two"),
      user("next"),
    ];
    expect(client().requestBody(prompt(history)).messages).toEqual([
      { role: "system", content: "be helpful" },
      { role: "user", content: "go" },
      {
        role: "assistant",
        content: "(after the calls)",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } },
          { id: "c2", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "one" },
      { role: "tool", tool_call_id: "c2", content: "two" },
      { role: "developer", content: "<world>changed</world>" },
      { role: "user", content: "next" },
    ]);
  });

  it("leaves out items this wire cannot carry, and outputs whose call it did not send", () => {
    const history: KnownResponseItem[] = [
      user("go"),
      {
        type: "custom_tool_call",
        call_id: "ct1",
        name: "apply_patch",
        input: "*** Begin Patch",
      },
      { type: "custom_tool_call_output", call_id: "ct1", output: "patched" },
      {
        type: "local_shell_call",
        call_id: "ls1",
        status: "completed",
        action: { type: "exec", command: ["ls"] },
      },
      output("ls1", "a.txt"),
      { type: "web_search_call", status: "completed" },
      { type: "compaction", encrypted_content: "gAAAA-summary" },
      assistant("done"),
    ];
    expect(client().requestBody(prompt(history)).messages).toEqual([
      { role: "system", content: "be helpful" },
      { role: "user", content: "go" },
      { role: "assistant", content: "done" },
    ]);
  });

  it("replays a host's reasoning text on the next assistant message, only within the current turn", () => {
    const history: KnownResponseItem[] = [
      user("first"),
      reasoningText("old thoughts"),
      assistant("first answer"),
      user("second"),
      reasoningText("new "),
      reasoningText("thoughts"),
      call("c1"),
      output("c1", "r"),
      encryptedReasoning,
    ];
    const messages = (wire: Partial<ChatWireOptions>) =>
      client(wire).requestBody(prompt(history)).messages as Record<string, unknown>[];
    const assistants = messages({}).filter((m) => m.role === "assistant");
    expect(assistants).toEqual([
      { role: "assistant", content: "first answer" },
      {
        role: "assistant",
        content: null,
        reasoning: "new thoughts",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } },
        ],
      },
    ]);
    const llamaCpp = messages({ reasoning_field: "reasoning_content" });
    expect(llamaCpp.find((m) => m.tool_calls)).toMatchObject({ reasoning_content: "new thoughts" });
    expect(llamaCpp.find((m) => m.tool_calls)).not.toHaveProperty("reasoning");
    const off = messages({ reasoning_field: "none" }).find((m) => m.tool_calls);
    expect(off).not.toHaveProperty("reasoning");
    expect(off).not.toHaveProperty("reasoning_content");
  });

  it("follows a model's wire options: roles, the output-limit field, images in tool outputs", () => {
    const history: KnownResponseItem[] = [
      developer("<env>cwd=/repo</env>"),
      { type: "message", role: "system", content: [{ type: "input_text", text: "sys note" }] },
      user("look"),
      call("c1"),
      output("c1", [
        { type: "input_text", text: "see" },
        { type: "input_image", image_url: "data:image/png;base64,BBBB", detail: "low" },
        { type: "encrypted_content", encrypted_content: "gAAAA-x" },
      ]),
    ];
    const body = client(
      {
        instructions_role: "developer",
        developer_role: "user",
        max_tokens_field: "max_tokens",
        tool_output_images: true,
      },
      512,
    ).requestBody(prompt(history));
    expect(body.messages).toEqual([
      { role: "developer", content: "be helpful" },
      { role: "user", content: "<env>cwd=/repo</env>" },
      { role: "user", content: "sys note" },
      { role: "user", content: "look" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "c1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } },
        ],
      },
      {
        role: "tool",
        tool_call_id: "c1",
        content: [
          { type: "text", text: "see" },
          { type: "image_url", image_url: { url: "data:image/png;base64,BBBB", detail: "low" } },
        ],
      },
    ]);
    expect(body.max_tokens).toBe(512);
    expect(body).not.toHaveProperty("max_completion_tokens");
  });

  it("posts the body to {base}/chat/completions with the bearer key, asking for SSE", async () => {
    const h = harness(`${standIn.url}/`);
    const p = prompt([user("hi")], { tools: [LOOKUP] });
    const { error } = await drain(h.client, p);
    expect(error).toBeUndefined();
    const [request] = standIn.requests;
    expect(request?.path).toBe("/v1/chat/completions");
    expect(request?.headers.authorization).toBe("Bearer sk-test-chat");
    expect(request?.headers["content-type"]).toBe("application/json");
    expect(request?.headers.accept).toBe("text/event-stream");
    expect(request?.body).toEqual(h.client.requestBody(p));
  });
});
