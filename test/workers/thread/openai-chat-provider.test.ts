import { afterEach, describe, expect, it, vi } from "vitest";
import { api, json, newThreadId, post } from "../helpers/api.ts";
import { requestJson } from "../helpers/openai.ts";
import { createThread, prompt, type Turn, text, turn } from "../helpers/turns.ts";

// `chat-test` is served by openai-chat at https://chat.test/v1 as `qwen3-test`, with
// `developer_role: "user"` (vitest.workers.config.ts); a fetch spy answers as the host.

afterEach(() => {
  vi.restoreAllMocks();
});

type Json = Record<string, unknown>;

const chunk = (delta: Json, finish: string | null = null) => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 1_800_000_000,
  model: "qwen3-test",
  choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  usage: null,
});
const USAGE = {
  prompt_tokens: 60,
  completion_tokens: 4,
  total_tokens: 64,
  prompt_tokens_details: { cached_tokens: 32 },
  completion_tokens_details: { reasoning_tokens: 0 },
};
const stream = (...chunks: Json[]) =>
  new Response(
    [...chunks, { ...chunk({}), choices: [], usage: USAGE }]
      .map((c) => `data: ${JSON.stringify(c)}\n\n`)
      .concat("data: [DONE]\n\n")
      .join(""),
    { headers: { "content-type": "text/event-stream" } },
  );
const textAnswer = (answer: string) =>
  stream(chunk({ role: "assistant", content: "" }), chunk({ content: answer }), chunk({}, "stop"));

/** Answers the chat host with `answer(n, body)` for the n-th request (1-based). */
function host(answer: (n: number, body: Json) => Response) {
  const bodies: Json[] = [];
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    if (url !== "https://chat.test/v1/chat/completions") throw new Error(`unexpected ${url}`);
    expect(new Headers(init?.headers).get("authorization")).toBe("Bearer sk-test-chat");
    const body = await requestJson(init);
    bodies.push(body);
    return answer(bodies.length, body);
  });
  return { bodies, spy };
}

describe("the openai-chat provider", () => {
  it("runs a turn: Chat Completions request, the streamed answer, usage with cached tokens", async () => {
    const id = newThreadId();
    await createThread(id, { model: "chat-test", cwd: "/repo" });
    const { bodies } = host(() => textAnswer("Hello from the chat host"));
    const done = await turn(id, "hi");
    expect(done.status).toBe("completed");
    expect(text(done.items.at(-1))).toBe("Hello from the chat host");
    const [body] = bodies;
    const messages = body?.messages as { role: string; content: unknown }[];
    const preview = await prompt(id);
    expect(messages[0]).toEqual({ role: "system", content: preview.instructions });
    // The model's host takes no developer messages: the thread's go as user messages.
    expect(preview.input.some((i) => i.role === "developer")).toBe(true);
    expect(messages.map((m) => m.role)).not.toContain("developer");
    expect(messages.at(-1)).toEqual({ role: "user", content: "hi" });
    expect(body).toMatchObject({
      model: "qwen3-test",
      stream: true,
      stream_options: { include_usage: true },
      max_completion_tokens: 4096,
    });
    expect(body).not.toHaveProperty("prompt_cache_key");
    const thread = await json<{
      token_usage: { last_token_usage: { input_tokens: number; cached_input_tokens: number } };
    }>(await api("GET", `/v1/threads/${id}`));
    expect(thread.token_usage.last_token_usage).toMatchObject({
      input_tokens: 60,
      cached_input_tokens: 32,
    });
  });

  it("a function tool round trip: the streamed call pauses the turn, the client's output resumes it", async () => {
    const id = newThreadId();
    await createThread(id, {
      model: "chat-test",
      tools: [{ name: "lookup", description: "find things", parameters: { type: "object" } }],
    });
    const { bodies } = host((n) =>
      n === 1
        ? stream(
            chunk({ role: "assistant", content: "Looking it up." }),
            chunk({
              tool_calls: [
                {
                  index: 0,
                  id: "call_chat1",
                  type: "function",
                  function: { name: "lookup", arguments: "" },
                },
              ],
            }),
            chunk({ tool_calls: [{ index: 0, function: { arguments: '{"q":' } }] }),
            chunk({ tool_calls: [{ index: 0, function: { arguments: '"x"}' } }] }),
            chunk({}, "tool_calls"),
          )
        : textAnswer("Found 42 results"),
    );
    const paused = await turn(id, "look up x");
    expect(paused.status).toBe("requires_action");
    expect(paused.pending_calls).toEqual([
      expect.objectContaining({
        type: "function_call",
        name: "lookup",
        arguments: '{"q":"x"}',
        call_id: "call_chat1",
      }),
    ]);
    expect(bodies[0]?.tools).toEqual([
      {
        type: "function",
        function: { name: "lookup", description: "find things", parameters: { type: "object" } },
      },
    ]);

    const done = await json<Turn>(
      await post(`/v1/threads/${id}/turns/${paused.id}/outputs`, {
        items: [{ type: "function_call_output", call_id: "call_chat1", output: "42 results" }],
      }),
    );
    expect(done.status).toBe("completed");
    expect(text(done.items.at(-1))).toBe("Found 42 results");
    // The step's text and call as one assistant message, the output right after it.
    const messages = bodies[1]?.messages as Json[];
    expect(messages.slice(-2)).toEqual([
      {
        role: "assistant",
        content: "Looking it up.",
        tool_calls: [
          {
            id: "call_chat1",
            type: "function",
            function: { name: "lookup", arguments: '{"q":"x"}' },
          },
        ],
      },
      { role: "tool", tool_call_id: "call_chat1", content: "42 results" },
    ]);
  });

  it("retries a 429 and a 503, then completes", async () => {
    const id = newThreadId();
    await createThread(id, { model: "chat-test" });
    const { spy } = host((n) => {
      if (n === 1) return new Response("{}", { status: 429, headers: { "retry-after": "0" } });
      if (n === 2) {
        return new Response(JSON.stringify({ error: { message: "overloaded" } }), {
          status: 503,
          headers: { "retry-after": "0" },
        });
      }
      return textAnswer("third time lucky");
    });
    const done = await turn(id, "hi");
    expect(spy).toHaveBeenCalledTimes(3);
    expect(done.status).toBe("completed");
    expect(text(done.items.at(-1))).toBe("third time lucky");
  });

  it("a 400 fails the turn with provider_error and the host's message, without retrying", async () => {
    const id = newThreadId();
    await createThread(id, { model: "chat-test" });
    const { spy } = host(
      () =>
        new Response(JSON.stringify({ error: { message: "Unexpected message role." } }), {
          status: 400,
        }),
    );
    const failed = await turn(id, "hi");
    expect(spy).toHaveBeenCalledTimes(1);
    expect(failed.status).toBe("failed");
    expect(failed.error?.code).toBe("provider_error");
    expect(failed.error?.message).toContain("Unexpected message role.");
  });
});
