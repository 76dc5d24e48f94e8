import { afterEach, describe, expect, it, vi } from "vitest";
import { DEFAULT_MAX_OUTPUT_TOKENS } from "../../../shared/models/index.ts";
import { api, json, newThreadId } from "../helpers/api.ts";
import { answerEvents, requestJson, responsesStream } from "../helpers/openai.ts";
import { createThread, type Item, prompt, promptText, text, turn } from "../helpers/turns.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the openai provider", () => {
  it("a 429 then success: the turn completes, usage (with cached tokens) is recorded", async () => {
    const id = newThreadId();
    await createThread(id, { model: "gpt-test" });
    const bodies: Record<string, unknown>[] = [];
    const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      if (!url.startsWith("https://openai.test/")) throw new Error(`unexpected fetch ${url}`);
      bodies.push(await requestJson(init));
      if (bodies.length === 1)
        return new Response("{}", { status: 429, headers: { "retry-after": "0" } });
      return new Response(responsesStream(answerEvents("Hello from upstream")), {
        headers: { "content-type": "text/event-stream" },
      });
    });
    const done = await turn(id, "hi");
    expect(spy).toHaveBeenCalledTimes(2);
    expect(done.status).toBe("completed");
    expect(text(done.items.at(-1))).toBe("Hello from upstream");
    expect(bodies[1]).toMatchObject({
      model: "gpt-test",
      store: false,
      stream: true,
      prompt_cache_key: id,
    });
    const thread = await json<{
      token_usage: { last_token_usage: { cached_input_tokens: number } };
    }>(await api("GET", `/v1/threads/${id}`));
    expect(thread.token_usage.last_token_usage.cached_input_tokens).toBe(20);
  });

  it("a reasoning model's request carries reasoning {effort, summary}, encrypted reasoning and text {verbosity}; a turn override changes the effort", async () => {
    const id = newThreadId();
    await createThread(id, { model: "gpt-think", cwd: "/repo" });
    const bodies: Record<string, unknown>[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (_input, init) => {
      bodies.push(await requestJson(init));
      return new Response(responsesStream(answerEvents(`answer ${bodies.length}`)), {
        headers: { "content-type": "text/event-stream" },
      });
    });
    await turn(id, "hi");
    await turn(id, "think harder", { overrides: { reasoning: { effort: "xhigh" } } });
    const [first, second] = bodies;
    const instructions = first?.instructions;
    expect(typeof instructions).toBe("string");
    expect({ ...first, input: undefined }).toEqual({
      model: "gpt-5.4",
      instructions,
      input: undefined,
      tools: [],
      tool_choice: "auto",
      parallel_tool_calls: true,
      reasoning: { effort: "medium", summary: "auto" },
      store: false,
      stream: true,
      include: ["reasoning.encrypted_content"],
      prompt_cache_key: id,
      text: { verbosity: "low" },
      // The catalog entry's output limit (the configured default).
      max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
    });
    expect(second?.reasoning).toEqual({ effort: "xhigh", summary: "auto" });
    expect((await prompt(id)) as unknown).toMatchObject({
      reasoning: { effort: "xhigh", summary: "auto" },
      text: { verbosity: "low" },
    });
  });

  it("GET …/prompt is byte for byte the input of the next request, which only adds the new user message", async () => {
    const id = newThreadId();
    await createThread(id, {
      model: "gpt-think",
      cwd: "/repo",
      agents_md: { directory: "/repo", text: "Be brief." },
      tools: [{ name: "lookup", parameters: { type: "object" } }],
    });
    const bodies: { input: unknown[]; [key: string]: unknown }[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (_input, init) => {
      bodies.push(await requestJson(init));
      return new Response(responsesStream(answerEvents(`answer ${bodies.length}`)), {
        headers: { "content-type": "text/event-stream" },
      });
    });
    await turn(id, "first");
    const previewText = await promptText(id);
    const preview = JSON.parse(previewText) as { input: Item[]; [key: string]: unknown };
    // No bookkeeping: no item carries an id or the turn-id passthrough.
    expect(previewText).not.toContain('"id"');
    expect(previewText).not.toContain("internal_chat_message_metadata_passthrough");
    await turn(id, "second");
    const sent = bodies[1];
    if (!sent) throw new Error("no second request");
    const n = preview.input.length;
    expect(JSON.stringify(sent.input.slice(0, n))).toBe(JSON.stringify(preview.input));
    expect(sent.input.slice(n)).toEqual([
      { type: "message", role: "user", content: [{ type: "input_text", text: "second" }] },
    ]);
    // The other channels as previewed; the provider adds model, tool_choice, store, stream,
    // include, prompt_cache_key, and `strict: false` on a tool that does not set it.
    expect(sent.instructions).toBe(preview.instructions);
    expect(sent.parallel_tool_calls).toBe(preview.parallel_tool_calls);
    expect(sent.reasoning).toEqual(preview.reasoning);
    expect(sent.text).toEqual(preview.text);
    expect(preview.tools).toEqual([
      {
        type: "function",
        name: "lookup",
        description: "",
        parameters: { type: "object" },
      },
    ]);
    expect(sent.tools).toEqual([
      {
        type: "function",
        name: "lookup",
        description: "",
        parameters: { type: "object" },
        strict: false,
      },
    ]);
  });

  it("a stream cut mid-item fails the turn with provider_error and leaves no partial item", async () => {
    const id = newThreadId();
    await createThread(id, { model: "gpt-test" });
    vi.spyOn(globalThis, "fetch").mockImplementation(async () => {
      const encoder = new TextEncoder();
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(
            encoder.encode(responsesStream([{ type: "response.output_text.delta", delta: "Hel" }])),
          );
          controller.error(new Error("connection reset"));
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const failed = await turn(id, "hi");
    expect(failed.status).toBe("failed");
    expect(failed.error?.code).toBe("provider_error");
    expect(failed.items.some((i) => i.role === "assistant")).toBe(false);
    vi.restoreAllMocks();
    vi.spyOn(globalThis, "fetch").mockImplementation(
      async () =>
        new Response(responsesStream(answerEvents("recovered")), {
          headers: { "content-type": "text/event-stream" },
        }),
    );
    const next = await turn(id, "again");
    expect(next.status).toBe("completed");
  });
});
