import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ProviderError } from "../../../../shared/providers/index.ts";
import {
  type ChatStandIn,
  chunk,
  DONE,
  sse,
  startChatStandIn,
  usage,
  usageChunk,
} from "../../../helpers/chat-stand-in.ts";
import { deltasOf, drain, harness, itemsOf, LOOKUP, prompt, user } from "./harness.ts";

let standIn: ChatStandIn;
beforeAll(async () => {
  standIn = await startChatStandIn();
});
afterAll(() => standIn.close());
beforeEach(() => standIn.reset());

const client = () => harness(standIn.url).client;
const withLookup = (text: string) => prompt([user(text)], { tools: [LOOKUP] });
const callDelta = (fragment: Record<string, unknown>) => chunk({ tool_calls: [fragment] });

describe("openai-chat streaming", () => {
  it("streams text as deltas, then one assistant message, then usage with cached tokens", async () => {
    const first = await drain(client(), prompt([user("hello there")]));
    expect(first.error).toBeUndefined();
    // "Echo: hello there" in pieces of six characters, as the host sent them.
    expect(deltasOf(first.events)).toEqual(["Echo: ", "hello ", "there"]);
    expect(itemsOf(first.events)).toEqual([
      {
        type: "message",
        role: "assistant",
        content: [{ type: "output_text", text: "Echo: hello there" }],
      },
    ]);
    const last = first.events.at(-1);
    expect(last).toMatchObject({ type: "completed", usage: { cached_input_tokens: 0 } });
    // The second request repeats the first one's prefix: the host reports cached tokens.
    const second = await drain(client(), prompt([user("hello there"), user("again")]));
    const done = second.events.at(-1);
    if (done?.type !== "completed" || !done.usage) throw new Error("no usage");
    expect(done.usage.cached_input_tokens).toBeGreaterThan(0);
    expect(done.usage.cached_input_tokens).toBeLessThan(done.usage.input_tokens);
  });

  it("maps every usage field", async () => {
    standIn.script({
      sse: [
        sse(chunk({ role: "assistant", content: "ok" })),
        sse(chunk({}, "stop")),
        sse(usageChunk(usage(1200, 40, 1024, 16))),
        DONE,
      ],
    });
    const { events } = await drain(client());
    expect(events.at(-1)).toEqual({
      type: "completed",
      usage: {
        input_tokens: 1200,
        cached_input_tokens: 1024,
        output_tokens: 40,
        reasoning_output_tokens: 16,
        total_tokens: 1240,
      },
    });
  });

  it("assembles a tool call split across deltas into one function_call item", async () => {
    const { events, error } = await drain(client(), withLookup('call lookup {"q":"a long query"}'));
    expect(error).toBeUndefined();
    // The arguments came in four fragments; nothing of the call was yielded before it finished.
    expect(events.map((e) => e.type)).toEqual(["output_item_done", "completed"]);
    expect(itemsOf(events)).toEqual([
      {
        type: "function_call",
        name: "lookup",
        arguments: '{"q":"a long query"}',
        call_id: "call_standin0001",
      },
    ]);
  });

  it("assembles parallel calls by index, interleaved, with a name that arrives late and repeated ids", async () => {
    standIn.script({
      sse: [
        sse(chunk({ role: "assistant", content: null })),
        sse(callDelta({ index: 0, id: "call_0", type: "function", function: { arguments: "" } })),
        sse(
          callDelta({ index: 1, id: "call_1", function: { name: "lookup", arguments: '{"q":' } }),
        ),
        sse(callDelta({ index: 0, function: { name: "lookup", arguments: '{"q":' } })),
        // A gateway repeating id and name in every fragment: arguments append, nothing else.
        sse(callDelta({ index: 1, id: "call_1", function: { name: "lookup", arguments: '"b"}' } })),
        sse(callDelta({ index: 0, function: { arguments: '"a"}' } })),
        sse(chunk({}, "tool_calls")),
        DONE,
      ],
    });
    const { events, error } = await drain(client(), withLookup("two"));
    expect(error).toBeUndefined();
    expect(itemsOf(events)).toEqual([
      { type: "function_call", name: "lookup", arguments: '{"q":"a"}', call_id: "call_0" },
      { type: "function_call", name: "lookup", arguments: '{"q":"b"}', call_id: "call_1" },
    ]);
    // No usage chunk was sent: usage stays unknown rather than zero.
    expect(events.at(-1)).toEqual({ type: "completed" });
  });

  it("reads calls without index (one per id), whole calls in one delta, and makes up missing ids", async () => {
    standIn.script({
      sse: [
        sse(callDelta({ id: "g1", function: { name: "lookup", arguments: '{"q"' } })),
        sse(callDelta({ function: { arguments: ':"x"}' } })),
        sse(callDelta({ id: "g2", function: { name: "lookup", arguments: '{"q":"y"}' } })),
        sse(chunk({}, "tool_calls")),
        DONE,
      ],
    });
    const noIndex = await drain(client(), withLookup("google"));
    expect(itemsOf(noIndex.events)).toEqual([
      { type: "function_call", name: "lookup", arguments: '{"q":"x"}', call_id: "g1" },
      { type: "function_call", name: "lookup", arguments: '{"q":"y"}', call_id: "g2" },
    ]);

    standIn.script({
      sse: [
        // Ollama: whole calls, no ids, and a call without arguments.
        sse(callDelta({ index: 0, function: { name: "lookup", arguments: '{"q":"z"}' } })),
        sse(callDelta({ index: 1, function: { name: "lookup" } })),
        sse(chunk({}, "tool_calls")),
        DONE,
      ],
    });
    const noIds = itemsOf((await drain(client(), withLookup("ollama"))).events);
    expect(noIds).toMatchObject([
      { type: "function_call", name: "lookup", arguments: '{"q":"z"}' },
      { type: "function_call", name: "lookup", arguments: "{}" },
    ]);
    const ids = noIds.map((i) => (i.type === "function_call" ? i.call_id : ""));
    expect(ids[0]).toMatch(/^call_[0-9a-f]{32}$/);
    expect(new Set(ids).size).toBe(2);
  });

  it("keeps a host's reasoning text (reasoning or reasoning_content) as a reasoning item before the message", async () => {
    for (const field of ["reasoning", "reasoning_content"]) {
      standIn.script({
        sse: [
          sse(chunk({ role: "assistant", [field]: "Think" })),
          sse(chunk({ [field]: "ing." })),
          sse(chunk({ content: "Answer" })),
          sse(chunk({}, "stop")),
          DONE,
        ],
      });
      const { events } = await drain(client());
      // Reasoning is not text of the answer.
      expect(deltasOf(events)).toEqual(["Answer"]);
      expect(itemsOf(events)).toEqual([
        {
          type: "reasoning",
          summary: [],
          content: [{ type: "reasoning_text", text: "Thinking." }],
        },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Answer" }] },
      ]);
    }
  });

  it("skips SSE comments and Azure's opening chunk without choices, and reads usage on the finishing chunk", async () => {
    standIn.script({
      sse: [
        ": OPENROUTER PROCESSING\n\n",
        sse({ id: "", object: "", created: 0, model: "", choices: [], prompt_filter_results: [] }),
        sse(chunk({ content: "Hi" })),
        // Groq: usage rides on the chunk that finishes.
        sse(chunk({}, "stop", { usage: usage(10, 2), x_groq: { usage: usage(10, 2) } })),
        DONE,
      ],
    });
    const { events, error } = await drain(client());
    expect(error).toBeUndefined();
    expect(deltasOf(events)).toEqual(["Hi"]);
    expect(events.at(-1)).toEqual({
      type: "completed",
      usage: {
        input_tokens: 10,
        cached_input_tokens: 0,
        output_tokens: 2,
        reasoning_output_tokens: 0,
        total_tokens: 12,
      },
    });
  });

  it("completes a response cut by the token limit, without a call whose arguments were cut", async () => {
    standIn.script({
      sse: [
        sse(chunk({ content: "Partial" })),
        sse(
          callDelta({ index: 0, id: "c0", function: { name: "lookup", arguments: '{"q":"a"}' } }),
        ),
        sse(
          callDelta({ index: 1, id: "c1", function: { name: "lookup", arguments: '{"q":"unfin' } }),
        ),
        sse(chunk({}, "length")),
        sse(usageChunk(usage(5, 7))),
        DONE,
      ],
    });
    const { events, error } = await drain(client(), withLookup("long"));
    expect(error).toBeUndefined();
    expect(itemsOf(events)).toEqual([
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Partial" }] },
      { type: "function_call", name: "lookup", arguments: '{"q":"a"}', call_id: "c0" },
    ]);
    expect(events.at(-1)?.type).toBe("completed");
  });

  it("completes a stream that said why it finished but sent no [DONE]", async () => {
    standIn.script({ sse: [sse(chunk({ content: "Done" })), sse(chunk({}, "stop"))] });
    const { events, error } = await drain(client());
    expect(error).toBeUndefined();
    expect(itemsOf(events)).toHaveLength(1);
    expect(events.at(-1)).toEqual({ type: "completed" });
  });
});

describe("openai-chat stream failures", () => {
  it("fails a response stopped by a content filter, yielding no item", async () => {
    standIn.script({
      sse: [sse(chunk({ content: "Some" })), sse(chunk({}, "content_filter")), DONE],
    });
    const { events, error } = await drain(client());
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("the response was stopped by a content filter");
    expect(itemsOf(events)).toEqual([]);
    expect(standIn.requests).toHaveLength(1);
  });

  it("turns a mid-stream error chunk into a ProviderError with the host's message", async () => {
    standIn.script({
      sse: [
        sse(chunk({ content: "Hel" })),
        sse({ error: { message: "upstream model crashed", code: 502 } }),
        DONE,
      ],
    });
    const { events, error } = await drain(client());
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("upstream model crashed");
    expect(events).toEqual([{ type: "output_text_delta", delta: "Hel" }]);
  });

  it("fails a stream that ends without any finish_reason once text was shown, and does not retry", async () => {
    standIn.script({ sse: [sse(chunk({ content: "Hel" })), DONE] });
    const { events, error } = await drain(client());
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("stream ended before the response completed");
    expect(itemsOf(events)).toEqual([]);
    expect(standIn.requests).toHaveLength(1);
  });

  it("fails on a chunk that is not JSON, and on a call that never got a name", async () => {
    standIn.script({ sse: ["data: {not json\n\n"] });
    const notJson = await drain(client());
    expect((notJson.error as Error).message).toBe("the model stream sent a chunk that is not JSON");
    standIn.script({
      sse: [
        sse(callDelta({ index: 0, id: "c", function: { arguments: "{}" } })),
        sse(chunk({}, "tool_calls")),
        DONE,
      ],
    });
    const nameless = await drain(client(), withLookup("x"));
    expect(nameless.error).toBeInstanceOf(ProviderError);
    expect((nameless.error as Error).message).toBe(
      "the model stream sent a tool call without a name",
    );
    expect(nameless.events).toEqual([]);
  });
});
