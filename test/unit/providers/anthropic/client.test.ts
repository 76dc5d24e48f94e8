import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { PromptInput } from "../../../../shared/context-manager/index.ts";
import type { KnownResponseItem, Prompt } from "../../../../shared/protocol/index.ts";
import {
  AnthropicClient,
  type AnthropicClientConfig,
  createAnthropicClientFromEnv,
  type ModelEvent,
  type ModelPrompt,
  ProviderError,
} from "../../../../shared/providers/index.ts";
import {
  type AnthropicStandIn,
  errorBody,
  type ScriptedAnswer,
  sse,
  startAnthropicStandIn,
} from "../../../helpers/anthropic-stand-in.ts";
import { drain, user } from "../prompts.ts";

// The anthropic client against a loopback stand-in of the Messages API
// (test/helpers/anthropic-stand-in.ts), which validates requests as the API does.

let api: AnthropicStandIn;

beforeAll(async () => {
  api = await startAnthropicStandIn();
});
afterAll(async () => {
  await api.close();
});
beforeEach(() => {
  api.reset();
});

const LOOKUP = {
  type: "function" as const,
  name: "lookup",
  description: "find things",
  parameters: { type: "object", properties: { q: { type: "string" } } },
};
const PING = {
  type: "function" as const,
  name: "ping",
  description: "",
  parameters: { type: "object" },
};

function prompt(input: KnownResponseItem[], overrides: Partial<Omit<Prompt, "input">> = {}) {
  const p: ModelPrompt = {
    instructions: "be helpful",
    input: PromptInput.of(input),
    tools: [LOOKUP, PING],
    parallel_tool_calls: true,
    ...overrides,
  };
  return p;
}

function harness(overrides: Partial<AnthropicClientConfig> = {}) {
  const sleeps: number[] = [];
  const client = new AnthropicClient({
    fetch: (input, init) => fetch(input, init),
    baseUrl: api.url,
    apiKey: "sk-ant-test",
    model: "claude-test",
    maxOutputTokens: 32_000,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    random: () => 0.5,
    ...overrides,
  });
  return { client, sleeps };
}

const items = (events: ModelEvent[]) =>
  events.flatMap((e) => (e.type === "output_item_done" ? [e.item] : []));
const deltas = (events: ModelEvent[]) =>
  events.flatMap((e) => (e.type === "output_text_delta" ? [e.delta] : []));
const usage = (events: ModelEvent[]) => {
  const last = events.at(-1);
  if (last?.type !== "completed" || !last.usage) throw new Error("no usage");
  return last.usage;
};

// --- scripted answers -------------------------------------------------------------------------

type Event = Record<string, unknown> & { type: string };

const START: Event = {
  type: "message_start",
  message: {
    id: "msg_1",
    type: "message",
    role: "assistant",
    model: "claude-test",
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: {
      input_tokens: 10,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: 1,
    },
  },
};
const textStart = (index: number): Event => ({
  type: "content_block_start",
  index,
  content_block: { type: "text", text: "" },
});
const textDelta = (index: number, text: string): Event => ({
  type: "content_block_delta",
  index,
  delta: { type: "text_delta", text },
});
const stop = (index: number): Event => ({ type: "content_block_stop", index });
const messageDelta = (stopReason: string, outputTokens = 5): Event => ({
  type: "message_delta",
  delta: { stop_reason: stopReason, stop_sequence: null },
  usage: { output_tokens: outputTokens },
});
const STOP: Event = { type: "message_stop" };

function answer(...events: Event[]): ScriptedAnswer {
  return (_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const e of events) res.write(sse(e));
    res.end();
  };
}

/** Writes the events, then the first `cut` characters of `next`, then tears the socket down. */
function cutAfter(events: Event[], next: Event, cut: number): ScriptedAnswer {
  return (_req, res: ServerResponse) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const e of events) res.write(sse(e));
    res.write(sse(next).slice(0, cut), () => res.socket?.destroy());
  };
}

function httpError(status: number, type: string, message: string, headers = {}): ScriptedAnswer {
  return (_req, res) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(errorBody(type, message));
  };
}

// --- tests ------------------------------------------------------------------------------------

describe("AnthropicClient streaming", () => {
  it("posts to {base}/messages with the key and version headers, streams text as deltas, then one message, then usage", async () => {
    const { events, error } = await drain(harness().client, prompt([user("hello there")]));
    expect(error).toBeUndefined();
    const [req] = api.requests;
    expect(req?.path).toBe("/v1/messages");
    expect(req?.headers).toMatchObject({
      "x-api-key": "sk-ant-test",
      "anthropic-version": "2023-06-01",
      "content-type": "application/json",
      accept: "text/event-stream",
    });
    expect(req?.body).toMatchObject({ model: "claude-test", max_tokens: 32_000, stream: true });
    // The stand-in streams 7 characters a delta (and a ping among them).
    expect(deltas(events)).toEqual(["Echo: h", "ello th", "ere"]);
    expect(items(events)).toEqual([
      {
        type: "message",
        role: "assistant",
        content: [{ type: "output_text", text: "Echo: hello there" }],
      },
    ]);
    const u = usage(events);
    expect(u).toMatchObject({ cached_input_tokens: 0, reasoning_output_tokens: 0 });
    expect(u.total_tokens).toBe(u.input_tokens + u.output_tokens);
    expect(events.at(-1)?.type).toBe("completed");
  });

  it("maps usage: the prompt is input plus both cache counters, cached is what was read; message_delta's counts win", async () => {
    api.script(
      answer(
        {
          ...START,
          message: {
            ...(START.message as object),
            usage: {
              input_tokens: 10,
              cache_creation_input_tokens: 200,
              cache_read_input_tokens: 1000,
              output_tokens: 1,
            },
          },
        },
        textStart(0),
        textDelta(0, "ok"),
        stop(0),
        {
          type: "message_delta",
          delta: { stop_reason: "end_turn", stop_sequence: null },
          usage: { input_tokens: 12, cache_read_input_tokens: 1000, output_tokens: 42 },
        },
        STOP,
      ),
    );
    const { events } = await drain(harness().client, prompt([user("hi")]));
    expect(usage(events)).toEqual({
      input_tokens: 1212,
      cached_input_tokens: 1000,
      output_tokens: 42,
      reasoning_output_tokens: 0,
      total_tokens: 1254,
    });
  });

  it("a request reads the whole previous prompt from the cache, even when a step appended more than 20 blocks", async () => {
    const { client } = harness();
    const history: KnownResponseItem[] = [user("call lookup {}")];
    const first = await drain(client, prompt(history));
    expect(usage(first.events).cached_input_tokens).toBe(0);
    // The model's answer and 12 parallel calls with their outputs: 25 blocks past the last one.
    history.push(...items(first.events));
    for (let c = 0; c < 12; c++) {
      history.push({
        type: "function_call",
        name: "ping",
        arguments: "{}",
        call_id: `toolu_p${c}`,
      });
    }
    for (const item of items(first.events)) {
      if (item.type === "function_call")
        history.push({ type: "function_call_output", call_id: item.call_id, output: "x" });
    }
    for (let c = 0; c < 12; c++)
      history.push({ type: "function_call_output", call_id: `toolu_p${c}`, output: "pong" });
    const second = await drain(client, prompt(history));
    expect(second.error).toBeUndefined();
    expect(usage(second.events).cached_input_tokens).toBe(usage(first.events).input_tokens);
    expect(usage(second.events).input_tokens).toBeGreaterThan(usage(first.events).input_tokens);
  });

  it("assembles a tool call streamed in pieces into one function_call; a call without arguments gets {}", async () => {
    const { client } = harness();
    const { events, error } = await drain(
      client,
      prompt([user('call lookup {"q":"weather in Paris"}')]),
    );
    expect(error).toBeUndefined();
    expect(deltas(events)).toEqual([]);
    const [call] = items(events);
    expect(call).toEqual({
      type: "function_call",
      name: "lookup",
      arguments: '{"q":"weather in Paris"}',
      call_id: expect.stringMatching(/^toolu_/),
    });
    const empty = await drain(client, prompt([user("call ping")]));
    expect(items(empty.events)).toEqual([
      {
        type: "function_call",
        name: "ping",
        arguments: "{}",
        call_id: expect.stringMatching(/^toolu_/),
      },
    ]);
  });

  it("a tool round trip: the call goes back as tool_use, its output as the next turn's tool_result", async () => {
    const { client } = harness();
    const history: KnownResponseItem[] = [user('call lookup {"q":"x"}')];
    const first = await drain(client, prompt(history));
    const [call] = items(first.events);
    if (call?.type !== "function_call") throw new Error("no call");
    history.push(call, { type: "function_call_output", call_id: call.call_id, output: "sunny" });
    const second = await drain(client, prompt(history));
    expect(second.error).toBeUndefined();
    expect(items(second.events)).toEqual([
      {
        type: "message",
        role: "assistant",
        content: [{ type: "output_text", text: "Tool lookup returned: sunny" }],
      },
    ]);
    expect(api.requests[1]?.body?.messages).toEqual([
      // The previous request's last block: the breakpoint it wrote is read here.
      {
        role: "user",
        content: [
          { type: "text", text: 'call lookup {"q":"x"}', cache_control: { type: "ephemeral" } },
        ],
      },
      {
        role: "assistant",
        content: [{ type: "tool_use", id: call.call_id, name: "lookup", input: { q: "x" } }],
      },
      {
        role: "user",
        content: [
          {
            type: "tool_result",
            tool_use_id: call.call_id,
            content: "sunny",
            cache_control: { type: "ephemeral" },
          },
        ],
      },
    ]);
  });

  it("keeps thinking as a reasoning item and sends it back with its signature, which the API checks", async () => {
    const { client } = harness();
    const thinking = { reasoning: { effort: "low" as const } };
    const history: KnownResponseItem[] = [user("call ping")];
    const first = await drain(client, prompt(history, thinking));
    expect(api.requests[0]?.body?.thinking).toEqual({ type: "enabled", budget_tokens: 4096 });
    const [reasoning, call] = items(first.events);
    expect(reasoning).toMatchObject({
      type: "reasoning",
      summary: [],
      content: [{ type: "reasoning_text", text: "Let me think about it." }],
      encrypted_content: expect.stringContaining('"signature":"sig_'),
    });
    if (reasoning?.type !== "reasoning" || call?.type !== "function_call")
      throw new Error("no reasoning and call");
    history.push(reasoning, call, {
      type: "function_call_output",
      call_id: call.call_id,
      output: "pong",
    });
    const second = await drain(client, prompt(history, thinking));
    expect(second.error).toBeUndefined();
    const sent = api.requests[1]?.body?.messages as { content: { type: string }[] }[];
    expect(sent[1]?.content.map((b) => b.type)).toEqual(["thinking", "tool_use"]);
    // A changed thinking text is refused, so the replay above was byte for byte.
    const tampered = {
      ...reasoning,
      encrypted_content: String(reasoning.encrypted_content).replace("think about", "thunk about"),
    };
    const third = await drain(
      client,
      prompt([history[0] as KnownResponseItem, tampered, ...history.slice(2)], thinking),
    );
    expect(third.error).toMatchObject({
      status: 400,
      message: expect.stringContaining("Invalid `signature`"),
    });
  });

  it("completes at max_tokens without the call it cut off; a call that is not JSON otherwise fails", async () => {
    const cutCall: Event[] = [
      START,
      textStart(0),
      textDelta(0, "Partial"),
      stop(0),
      {
        type: "content_block_start",
        index: 1,
        content_block: { type: "tool_use", id: "toolu_1", name: "lookup", input: {} },
      },
      {
        type: "content_block_delta",
        index: 1,
        delta: { type: "input_json_delta", partial_json: '{"q":"wea' },
      },
      stop(1),
    ];
    api.script(
      answer(...cutCall, messageDelta("max_tokens"), STOP),
      answer(...cutCall, messageDelta("tool_use"), STOP),
    );
    const { client } = harness();
    const truncated = await drain(client, prompt([user("hi")]));
    expect(truncated.error).toBeUndefined();
    expect(truncated.events).toEqual([
      { type: "output_text_delta", delta: "Partial" },
      {
        type: "output_item_done",
        item: {
          type: "message",
          role: "assistant",
          content: [{ type: "output_text", text: "Partial" }],
        },
      },
      {
        type: "completed",
        usage: {
          input_tokens: 10,
          cached_input_tokens: 0,
          output_tokens: 5,
          reasoning_output_tokens: 0,
          total_tokens: 15,
        },
      },
    ]);
    const broken = await drain(client, prompt([user("hi")]));
    expect(broken.error).toBeInstanceOf(ProviderError);
    expect((broken.error as Error).message).toBe(
      "anthropic: the model's call of lookup has input that is not a JSON object",
    );
    expect(items(broken.events)).toHaveLength(1);
  });

  it("fails a refusal", async () => {
    api.script(
      answer(START, textStart(0), textDelta(0, "I can't"), stop(0), messageDelta("refusal"), STOP),
    );
    const { events, error } = await drain(harness().client, prompt([user("hi")]));
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe(
      "anthropic: the model refused to answer (stop_reason refusal)",
    );
    expect(events.some((e) => e.type === "completed")).toBe(false);
  });

  it("fails a stream with a second message_start", async () => {
    api.script(answer(START, START, STOP));
    const { error } = await drain(harness({ maxAttempts: 1 }).client, prompt([user("hi")]));
    expect((error as Error).message).toBe("anthropic: a second message_start in one stream");
  });
});

describe("AnthropicClient retries and failures", () => {
  it("waits the retry-after seconds of a 429, then succeeds", async () => {
    api.script(
      httpError(
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit",
        { "retry-after": "3" },
      ),
    );
    const h = harness();
    const { events, error } = await drain(h.client, prompt([user("hi")]));
    expect(error).toBeUndefined();
    expect(h.sleeps).toEqual([3000]);
    expect(api.requests).toHaveLength(2);
    expect(deltas(events).join("")).toBe("Echo: hi");
  });

  it("retries a 529 overloaded answer with backoff", async () => {
    api.script(httpError(529, "overloaded_error", "Overloaded"));
    const h = harness();
    const { error } = await drain(h.client, prompt([user("hi")]));
    expect(error).toBeUndefined();
    expect(h.sleeps).toEqual([250]);
    expect(api.requests).toHaveLength(2);
  });

  it("retries an overloaded_error event that came before anything was yielded, but not one after", async () => {
    const overloaded: Event = {
      type: "error",
      error: { type: "overloaded_error", message: "Overloaded" },
    };
    api.script(answer(START, { type: "ping" }, overloaded));
    const h = harness();
    const retried = await drain(h.client, prompt([user("hi")]));
    expect(retried.error).toBeUndefined();
    expect(api.requests).toHaveLength(2);

    api.reset();
    api.script(answer(START, textStart(0), textDelta(0, "Hel"), overloaded));
    const failed = await drain(h.client, prompt([user("hi")]));
    expect(failed.events).toEqual([{ type: "output_text_delta", delta: "Hel" }]);
    expect(failed.error).toBeInstanceOf(ProviderError);
    expect((failed.error as Error).message).toBe("anthropic: overloaded_error: Overloaded");
    expect(api.requests).toHaveLength(1);
  });

  it("fails a 400 at once with the API's message", async () => {
    api.script(
      httpError(
        400,
        "invalid_request_error",
        "messages.0.content.0.text: text content blocks must be non-empty",
      ),
    );
    const h = harness();
    const { events, error } = await drain(h.client, prompt([user("hi")]));
    expect(events).toEqual([]);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({
      status: 400,
      message:
        "anthropic: HTTP 400: messages.0.content.0.text: text content blocks must be non-empty",
    });
    expect(api.requests).toHaveLength(1);
    expect(h.sleeps).toEqual([]);
  });

  it("a stream cut inside a text block fails without the half message and is not retried", async () => {
    api.script(cutAfter([START, textStart(0), textDelta(0, "Hel")], textDelta(0, "lo"), 30));
    const { events, error } = await drain(harness().client, prompt([user("hi")]));
    expect(events).toEqual([{ type: "output_text_delta", delta: "Hel" }]);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("stream ended before the response completed");
    expect(api.requests).toHaveLength(1);
  });

  it("a stream cut inside a tool call, nothing yielded yet, is tried again", async () => {
    const call: Event = {
      type: "content_block_start",
      index: 0,
      content_block: { type: "tool_use", id: "toolu_1", name: "lookup", input: {} },
    };
    const piece: Event = {
      type: "content_block_delta",
      index: 0,
      delta: { type: "input_json_delta", partial_json: '{"q":' },
    };
    api.script(cutAfter([START, call, piece], stop(0), 10));
    const { events, error } = await drain(
      harness().client,
      prompt([user('call lookup {"q":"x"}')]),
    );
    expect(error).toBeUndefined();
    expect(api.requests).toHaveLength(2);
    expect(items(events)).toEqual([
      {
        type: "function_call",
        name: "lookup",
        arguments: '{"q":"x"}',
        call_id: expect.stringMatching(/^toolu_standin/),
      },
    ]);
  });

  it("a stream that ends cleanly before message_stop fails", async () => {
    api.script(answer(START, textStart(0), textDelta(0, "Hi"), stop(0), messageDelta("end_turn")));
    const { events, error } = await drain(harness().client, prompt([user("hi")]));
    expect(items(events)).toHaveLength(1);
    expect((error as Error).message).toBe("stream ended before the response completed");
  });

  it("stops promptly mid-stream when the caller aborts", async () => {
    api.script((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(sse(START) + sse(textStart(0)) + sse(textDelta(0, "Hel")));
    });
    const controller = new AbortController();
    const started = performance.now();
    const { events, error } = await drain(
      harness().client,
      prompt([user("hi")]),
      controller.signal,
      () => controller.abort(),
    );
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(events).toEqual([{ type: "output_text_delta", delta: "Hel" }]);
    expect(error).not.toBeInstanceOf(ProviderError);
    expect((error as Error).name).toBe("AbortError");
    await api.closed(0);
  });
});

describe("createAnthropicClientFromEnv", () => {
  const deps = {
    fetch: (input: string, init: RequestInit) => fetch(input, init),
    model: "claude-test",
  };

  it("requires ANTHROPIC_API_KEY", () => {
    expect(() => createAnthropicClientFromEnv({ ANTHROPIC_API_KEY: " " }, deps)).toThrow(
      /ANTHROPIC_API_KEY is not set/,
    );
  });

  it("uses the configured base URL (trailing slash ignored), else the public endpoint", async () => {
    const client = createAnthropicClientFromEnv(
      { ANTHROPIC_API_KEY: "sk-ant-env", ANTHROPIC_BASE_URL: `${api.url}/` },
      deps,
    );
    const { error } = await drain(client, prompt([user("hi")]));
    expect(error).toBeUndefined();
    expect(api.requests[0]).toMatchObject({
      path: "/v1/messages",
      headers: { "x-api-key": "sk-ant-env" },
    });
    const urls: string[] = [];
    const fallback = createAnthropicClientFromEnv(
      { ANTHROPIC_API_KEY: "sk-ant-env" },
      {
        model: "claude-test",
        maxAttempts: 1,
        fetch: async (input) => {
          urls.push(input);
          return new Response(errorBody("authentication_error", "invalid x-api-key"), {
            status: 401,
          });
        },
      },
    );
    const failed = await drain(fallback, prompt([user("hi")]));
    expect(urls).toEqual(["https://api.anthropic.com/v1/messages"]);
    expect((failed.error as Error).message).toBe("anthropic: HTTP 401: invalid x-api-key");
  });
});
