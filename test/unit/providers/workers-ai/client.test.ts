import { describe, expect, it } from "vitest";
import type { KnownResponseItem } from "../../../../shared/protocol/index.ts";
import {
  type AiRunner,
  createWorkersAiClient,
  type ModelEvent,
  ProviderError,
} from "../../../../shared/providers/index.ts";
import { LOOKUP, prompt, user } from "../openai-chat/harness.ts";

/** Chat chunks as a chat-shaped Workers AI model streams them: cumulative usage on each one. */
function chunks(...bodies: Record<string, unknown>[]): ReadableStream<Uint8Array> {
  const text = bodies.map((b) => `data: ${JSON.stringify(b)}\n\n`).join("");
  return new Blob([`${text}data: [DONE]\n\n`]).stream();
}

const usage = (prompt_tokens: number, completion_tokens: number, cached = 0) => ({
  prompt_tokens,
  completion_tokens,
  total_tokens: prompt_tokens + completion_tokens,
  prompt_tokens_details: { cached_tokens: cached },
});

/** A stand-in for `env.AI`: each call takes the next answer (a stream, or an error to throw). */
function fakeAi(...answers: (ReadableStream<Uint8Array> | Error)[]) {
  const calls: { model: string; inputs: Record<string, unknown>; options: unknown }[] = [];
  const ai: AiRunner = {
    run: async (model, inputs, options) => {
      calls.push({ model, inputs, options });
      const next = answers.shift();
      if (next === undefined) throw new Error("no answer left");
      if (next instanceof Error) throw next;
      return next;
    },
  };
  return { ai, calls };
}

async function collect(iterable: AsyncIterable<ModelEvent>): Promise<ModelEvent[]> {
  const out: ModelEvent[] = [];
  for await (const event of iterable) out.push(event);
  return out;
}

const noSleep = { sleep: async () => {}, random: () => 0 };

describe("the workers-ai provider", () => {
  it("sends the chat request through the binding and reads the streamed answer, usage from the last chunk", async () => {
    const { ai, calls } = fakeAi(
      chunks(
        {
          choices: [{ index: 0, delta: { role: "assistant", content: "Hel" } }],
          usage: usage(40, 1),
        },
        { choices: [{ index: 0, delta: { content: "lo" } }], usage: usage(40, 2) },
        { choices: [{ index: 0, delta: {}, finish_reason: "stop" }], usage: usage(40, 3, 32) },
      ),
    );
    const client = createWorkersAiClient({
      ai,
      model: "@cf/qwen/qwen3.8-27b",
      threadId: "thr_a",
      maxOutputTokens: 512,
    });
    const events = await collect(client.stream(prompt([user("hi")])));
    expect(events.filter((e) => e.type === "output_text_delta").map((e) => e.delta)).toEqual([
      "Hel",
      "lo",
    ]);
    const done = events.find((e) => e.type === "output_item_done");
    expect(done?.type === "output_item_done" && done.item).toMatchObject({
      type: "message",
      role: "assistant",
      content: [{ type: "output_text", text: "Hello" }],
    });
    expect(events.at(-1)).toEqual({
      type: "completed",
      usage: {
        input_tokens: 40,
        cached_input_tokens: 32,
        output_tokens: 3,
        reasoning_output_tokens: 0,
        total_tokens: 43,
      },
    });
    expect(calls[0]?.model).toBe("@cf/qwen/qwen3.8-27b");
    expect(calls[0]?.inputs).toMatchObject({
      messages: [
        { role: "system", content: "be helpful" },
        { role: "user", content: "hi" },
      ],
      stream: true,
      max_completion_tokens: 512,
    });
    expect(calls[0]?.inputs).not.toHaveProperty("model");
    // The attempt's signal goes along, so an interrupt or a timeout stops the binding's call.
    expect(calls[0]?.options).toEqual({
      signal: expect.any(AbortSignal),
      extraHeaders: { "x-session-affinity": "thr_a" },
    });
  });

  it("assembles a call split across chunks, and renames an id the thread already holds", async () => {
    const earlier: KnownResponseItem[] = [
      user("first"),
      { type: "function_call", name: "lookup", arguments: "{}", call_id: "chatcmpl-tool-0" },
      { type: "function_call_output", call_id: "chatcmpl-tool-0", output: "one" },
      user("again"),
    ];
    const { ai } = fakeAi(
      chunks(
        {
          choices: [
            {
              index: 0,
              delta: {
                tool_calls: [
                  {
                    index: 0,
                    id: "chatcmpl-tool-0",
                    type: "function",
                    function: { name: "lookup", arguments: '{"q"' },
                  },
                ],
              },
            },
          ],
        },
        {
          choices: [
            {
              index: 0,
              delta: { tool_calls: [{ index: 0, function: { arguments: ':"wool"}' } }] },
            },
          ],
        },
        { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }], usage: usage(60, 9) },
      ),
    );
    const client = createWorkersAiClient({ ai, model: "@cf/moonshotai/kimi-k2.6" });
    const events = await collect(client.stream(prompt(earlier, { tools: [LOOKUP] })));
    const calls = events.flatMap((e) =>
      e.type === "output_item_done" && e.item.type === "function_call" ? [e.item] : [],
    );
    expect(calls).toEqual([
      expect.objectContaining({
        name: "lookup",
        arguments: '{"q":"wool"}',
        call_id: "chatcmpl-tool-0_2",
      }),
    ]);
  });

  it("reads a legacy model's native stream: response text, calls without ids, a closing null fragment, [DONE] without finish_reason", async () => {
    const native = (...bodies: unknown[]) =>
      new Blob([
        `${bodies.map((b) => `data: ${JSON.stringify(b)}\n\n`).join("")}data: [DONE]\n\n`,
      ]).stream();
    const { ai } = fakeAi(
      native(
        { response: "Let me ", p: "abcd" },
        { response: "look." },
        { tool_calls: [{ index: 0, type: "function", function: { name: "lookup" } }] },
        { tool_calls: [{ index: 0, function: { arguments: '{"q":' } }] },
        { tool_calls: [{ index: 0, function: { arguments: '"wool"}' } }] },
        { tool_calls: [{ id: null, type: null, function: { name: null, arguments: null } }] },
        { response: "", usage: { prompt_tokens: 30, completion_tokens: 7, total_tokens: 37 } },
      ),
      native({ response: "Done." }),
    );
    const client = createWorkersAiClient({ ai, model: "@cf/meta/llama-3.1-8b-instruct" });
    const first = await collect(client.stream(prompt([user("find wool")], { tools: [LOOKUP] })));
    expect(first.filter((e) => e.type === "output_text_delta").map((e) => e.delta)).toEqual([
      "Let me ",
      "look.",
    ]);
    const items = first.flatMap((e) => (e.type === "output_item_done" ? [e.item] : []));
    expect(items).toEqual([
      expect.objectContaining({
        type: "message",
        content: [expect.objectContaining({ text: "Let me look." })],
      }),
      expect.objectContaining({
        type: "function_call",
        name: "lookup",
        arguments: '{"q":"wool"}',
        call_id: expect.stringMatching(/^call_/),
      }),
    ]);
    expect(first.at(-1)).toMatchObject({
      type: "completed",
      usage: { input_tokens: 30, output_tokens: 7 },
    });
    // Text only, and no finish_reason either: [DONE] finishes it as stop.
    const second = await collect(client.stream(prompt([user("thanks")])));
    expect(second.at(-1)).toMatchObject({ type: "completed" });
  });

  it("reads a legacy model's whole answer: arguments as an object, no call id", async () => {
    const ai: AiRunner = {
      run: async () => ({
        response: "",
        tool_calls: [{ name: "lookup", arguments: { q: "wool" } }],
        usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 },
      }),
    };
    const client = createWorkersAiClient({ ai, model: "@hf/nousresearch/hermes-2-pro-mistral-7b" });
    const events = await collect(client.stream(prompt([user("find wool")], { tools: [LOOKUP] })));
    const items = events.flatMap((e) => (e.type === "output_item_done" ? [e.item] : []));
    expect(items).toEqual([
      expect.objectContaining({ type: "function_call", name: "lookup", arguments: '{"q":"wool"}' }),
    ]);
    expect(events.at(-1)).toMatchObject({ type: "completed", usage: { input_tokens: 12 } });
  });

  it("takes a legacy stream that ends without [DONE] as cut short: tried again before any text, failed after", async () => {
    const cutCall = new Blob([
      'data: {"tool_calls":[{"index":0,"function":{"name":"lookup","arguments":"{"}}]}\n\n',
    ]).stream();
    const whole = new Blob(['data: {"response":"Hello"}\n\ndata: [DONE]\n\n']).stream();
    const retried = fakeAi(cutCall, whole);
    const client = createWorkersAiClient({
      ai: retried.ai,
      model: "@cf/meta/llama-3.1-8b-instruct",
      ...noSleep,
    });
    const events = await collect(client.stream(prompt([user("hi")], { tools: [LOOKUP] })));
    expect(retried.calls).toHaveLength(2);
    expect(events.flatMap((e) => (e.type === "output_item_done" ? [e.item] : []))).toEqual([
      expect.objectContaining({ content: [expect.objectContaining({ text: "Hello" })] }),
    ]);
    // Text already streamed cannot be taken back: the request fails instead.
    const cutText = fakeAi(new Blob(['data: {"response":"Hal"}\n\n']).stream());
    const failing = createWorkersAiClient({ ai: cutText.ai, model: "m", ...noSleep });
    await expect(collect(failing.stream(prompt([user("hi")])))).rejects.toThrow(ProviderError);
    expect(cutText.calls).toHaveLength(1);
  });

  it("retries the binding's out-of-capacity error, then answers; another coded error fails at once", async () => {
    const ok = chunks({
      choices: [{ index: 0, delta: { content: "fine" }, finish_reason: "stop" }],
    });
    const { ai, calls } = fakeAi(
      new Error("3040: Capacity temporarily exceeded, please try again."),
      ok,
    );
    const client = createWorkersAiClient({ ai, model: "m", ...noSleep });
    const events = await collect(client.stream(prompt()));
    expect(calls).toHaveLength(2);
    expect(events.some((e) => e.type === "completed")).toBe(true);

    const refused = fakeAi(new Error("5007: No such model @cf/none"));
    const failing = createWorkersAiClient({ ai: refused.ai, model: "@cf/none", ...noSleep });
    const error = await collect(failing.stream(prompt())).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).status).toBe(400);
    expect((error as Error).message).toBe("workers-ai: HTTP 400: 5007: No such model @cf/none");
    expect(refused.calls).toHaveLength(1);
  });

  it("goes through the configured AI Gateway with its cache skipped", async () => {
    const { ai, calls } = fakeAi(
      chunks({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }),
    );
    await collect(createWorkersAiClient({ ai, model: "m", gatewayId: "spindle" }).stream(prompt()));
    expect(calls[0]?.options).toMatchObject({ gateway: { id: "spindle", skipCache: true } });
  });
});
