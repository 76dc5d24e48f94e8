import { afterEach, describe, expect, it, vi } from "vitest";
import { api, json, newThreadId, post } from "../helpers/api.ts";
import { requestJson } from "../helpers/openai.ts";
import { createThread, type Turn, text, turn } from "../helpers/turns.ts";

// Threads on the anthropic provider's models (vitest.workers.config.ts), answered by a stubbed
// `fetch` that speaks the Messages API's stream.

afterEach(() => {
  vi.restoreAllMocks();
});

type Event = Record<string, unknown> & { type: string };
interface Body {
  model: string;
  max_tokens: number;
  system?: { type: string; text: string }[];
  messages: { role: string; content: Record<string, unknown>[] }[];
  tools?: Record<string, unknown>[];
  thinking?: unknown;
}

const USAGE = { input_tokens: 30, cache_creation_input_tokens: 50, cache_read_input_tokens: 400 };

/** A Messages stream: `message_start`, the blocks, `message_delta` with `stopReason`, `message_stop`. */
function messageStream(blocks: Event[][], stopReason: string): Response {
  const events: Event[] = [
    {
      type: "message_start",
      message: {
        id: "msg_up",
        type: "message",
        role: "assistant",
        content: [],
        usage: { ...USAGE, output_tokens: 1 },
      },
    },
    { type: "ping" },
    ...blocks.flatMap((block, index) => [
      ...block.map((e) => ({ ...e, index })),
      { type: "content_block_stop", index },
    ]),
    {
      type: "message_delta",
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: 7 },
    },
    { type: "message_stop" },
  ];
  const body = events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");
  return new Response(body, { headers: { "content-type": "text/event-stream" } });
}

const textBlock = (...pieces: string[]): Event[] => [
  { type: "content_block_start", content_block: { type: "text", text: "" } },
  ...pieces.map((t) => ({ type: "content_block_delta", delta: { type: "text_delta", text: t } })),
];
const toolUseBlock = (id: string, name: string, ...json: string[]): Event[] => [
  { type: "content_block_start", content_block: { type: "tool_use", id, name, input: {} } },
  ...json.map((p) => ({
    type: "content_block_delta",
    delta: { type: "input_json_delta", partial_json: p },
  })),
];
const thinkingBlock = (thinking: string, signature: string): Event[] => [
  { type: "content_block_start", content_block: { type: "thinking", thinking: "", signature: "" } },
  { type: "content_block_delta", delta: { type: "thinking_delta", thinking } },
  { type: "content_block_delta", delta: { type: "signature_delta", signature } },
];

/** Answers `https://anthropic.test/v1/messages` with `answers` in order, recording the bodies. */
function upstream(...answers: (() => Response)[]) {
  const bodies: Body[] = [];
  const headers: Headers[] = [];
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    if (url !== "https://anthropic.test/v1/messages") throw new Error(`unexpected fetch ${url}`);
    bodies.push(await requestJson<Body>(init));
    headers.push(new Headers(init?.headers));
    const next = answers.shift();
    if (!next) throw new Error("no answer scripted");
    return next();
  });
  return { bodies, headers, spy };
}

describe("the anthropic provider", () => {
  it("runs a turn: the instructions as system, the thread's context as user text, usage with cache reads", async () => {
    const id = newThreadId();
    await createThread(id, { model: "claude-test", cwd: "/repo" });
    const { bodies, headers } = upstream(() =>
      messageStream([textBlock("Hello ", "from Claude")], "end_turn"),
    );
    const done = await turn(id, "hi");
    expect(done.status).toBe("completed");
    expect(text(done.items.at(-1))).toBe("Hello from Claude");
    expect(headers[0]?.get("x-api-key")).toBe("sk-test-anthropic");
    expect(headers[0]?.get("anthropic-version")).toBe("2023-06-01");
    const [body] = bodies;
    expect(body).toMatchObject({ model: "claude-test", max_tokens: 8192, stream: true });
    expect(body?.system?.[0]?.text).toBeTruthy();
    // One user turn: Spindle's context (developer and contextual user messages) and "hi", last.
    expect(body?.messages).toHaveLength(1);
    const content = body?.messages[0]?.content ?? [];
    expect(content.length).toBeGreaterThan(1);
    expect(content.at(-1)).toEqual({
      type: "text",
      text: "hi",
      cache_control: { type: "ephemeral" },
    });
    expect(content.some((b) => String(b.text).includes("<environment_context>"))).toBe(true);

    const thread = await json<{
      token_usage: { last_token_usage: Record<string, number> };
      usage: Record<string, number | null>;
    }>(await api("GET", `/v1/threads/${id}`));
    expect(thread.token_usage.last_token_usage).toMatchObject({
      input_tokens: 480,
      cached_input_tokens: 400,
      output_tokens: 7,
      total_tokens: 487,
    });
    // The thread's share of prompt tokens read from the provider's cache.
    expect(thread.usage).toMatchObject({ input_tokens: 480, cached_input_tokens: 400 });
    expect(thread.usage.cache_hit_ratio).toBeCloseTo(400 / 480);
  });

  it("a client tool round trip: tool_use pauses the turn, the outputs go back as tool_result and it completes", async () => {
    const id = newThreadId();
    await createThread(id, {
      model: "claude-test",
      tools: [
        {
          name: "lookup",
          description: "find things",
          parameters: { type: "object", properties: { q: { type: "string" } } },
        },
      ],
    });
    const { bodies } = upstream(
      () =>
        messageStream(
          [textBlock("Looking."), toolUseBlock("toolu_01", "lookup", '{"q":', '"x"}')],
          "tool_use",
        ),
      () => messageStream([textBlock("42 results found")], "end_turn"),
    );
    const paused = await turn(id, "find x");
    expect(paused.status).toBe("requires_action");
    const [call] = paused.pending_calls;
    expect(call).toMatchObject({
      type: "function_call",
      name: "lookup",
      call_id: "toolu_01",
      arguments: '{"q":"x"}',
    });
    expect(bodies[0]?.tools).toEqual([
      {
        name: "lookup",
        description: "find things",
        input_schema: { type: "object", properties: { q: { type: "string" } } },
        cache_control: { type: "ephemeral" },
      },
    ]);

    const done = await json<Turn>(
      await post(`/v1/threads/${id}/turns/${paused.id}/outputs`, {
        items: [{ type: "function_call_output", call_id: "toolu_01", output: "42 results" }],
      }),
    );
    expect(done.id).toBe(paused.id);
    expect(done.status).toBe("completed");
    expect(text(done.items.at(-1))).toBe("42 results found");
    const messages = bodies[1]?.messages ?? [];
    expect(messages.slice(-2)).toEqual([
      {
        role: "assistant",
        content: [
          { type: "text", text: "Looking." },
          { type: "tool_use", id: "toolu_01", name: "lookup", input: { q: "x" } },
        ],
      },
      {
        role: "user",
        content: [
          {
            type: "tool_result",
            tool_use_id: "toolu_01",
            content: "42 results",
            cache_control: { type: "ephemeral" },
          },
        ],
      },
    ]);
  });

  it("a reasoning model thinks, and its signed thinking goes back unchanged with the tool use after the thread stored it", async () => {
    const id = newThreadId();
    await createThread(id, { model: "claude-think", tools: [{ name: "lookup" }] });
    const { bodies } = upstream(
      () =>
        messageStream(
          [
            thinkingBlock("I should look it up.", "EqQBCkYIARgC"),
            toolUseBlock("toolu_02", "lookup", ""),
          ],
          "tool_use",
        ),
      () => messageStream([textBlock("done")], "end_turn"),
    );
    const paused = await turn(id, "find y");
    expect(bodies[0]).toMatchObject({
      model: "claude-thinker-1",
      thinking: { type: "enabled", budget_tokens: 4096 },
    });
    expect(paused.pending_calls[0]).toMatchObject({ call_id: "toolu_02", arguments: "{}" });
    const done = await json<Turn>(
      await post(`/v1/threads/${id}/turns/${paused.id}/outputs`, {
        items: [{ type: "function_call_output", call_id: "toolu_02", output: "y" }],
      }),
    );
    expect(done.status).toBe("completed");
    expect(bodies[1]?.messages.at(-2)).toEqual({
      role: "assistant",
      content: [
        { type: "thinking", thinking: "I should look it up.", signature: "EqQBCkYIARgC" },
        { type: "tool_use", id: "toolu_02", name: "lookup", input: {} },
      ],
    });
  });

  it("retries a 529 overloaded answer, then completes", async () => {
    const id = newThreadId();
    await createThread(id, { model: "claude-test" });
    const { spy } = upstream(
      () =>
        new Response(
          JSON.stringify({
            type: "error",
            error: { type: "overloaded_error", message: "Overloaded" },
          }),
          { status: 529 },
        ),
      () => messageStream([textBlock("after a retry")], "end_turn"),
    );
    const done = await turn(id, "hi");
    expect(spy).toHaveBeenCalledTimes(2);
    expect(done.status).toBe("completed");
    expect(text(done.items.at(-1))).toBe("after a retry");
  });

  it("fails the turn with provider_error and the API's message on a 400", async () => {
    const id = newThreadId();
    await createThread(id, { model: "claude-test" });
    upstream(
      () =>
        new Response(
          JSON.stringify({
            type: "error",
            error: {
              type: "invalid_request_error",
              message: "prompt is too long: 210000 tokens > 200000 maximum",
            },
          }),
          { status: 400 },
        ),
    );
    const failed = await turn(id, "hi");
    expect(failed.status).toBe("failed");
    expect(failed.error).toMatchObject({
      code: "provider_error",
      message: expect.stringContaining("prompt is too long"),
    });
  });
});
