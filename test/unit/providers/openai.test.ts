import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { PromptInput } from "../../../shared/context-manager/index.ts";
import type { KnownResponseItem } from "../../../shared/protocol/index.ts";
import {
  createOpenAIClientFromEnv,
  InputSerializer,
  type ModelPrompt,
  OpenAIResponsesClient,
  type OpenAIResponsesClientConfig,
  ProviderError,
  type ScheduleFn,
} from "../../../shared/providers/index.ts";
import { drain, prompt, user } from "./prompts.ts";

// A loopback server that speaks the Responses API SSE wire format. Each test scripts the
// handlers for the requests it expects, in order; every request is recorded.

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

interface Recorded {
  method: string | undefined;
  url: string | undefined;
  headers: IncomingMessage["headers"];
  body: string;
}

let server: Server;
let baseUrl: string;
let handlers: Handler[] = [];
let requests: Recorded[] = [];
/** Resolves when the server sees a request's connection close (used to see aborts arrive). */
let closed: Promise<void>[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
    });
    req.on("end", () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      closed.push(new Promise((resolve) => res.on("close", () => resolve())));
      const handler = handlers.shift();
      if (!handler) {
        res.writeHead(599).end("no handler scripted");
        return;
      }
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  handlers = [];
  requests = [];
  closed = [];
});

function script(...hs: Handler[]): void {
  handlers.push(...hs);
}

// --- wire builders ----------------------------------------------------------------------------

function frame(type: string, payload: Record<string, unknown> = {}): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...payload })}\n\n`;
}

const USAGE = {
  input_tokens: 1200,
  input_tokens_details: { cached_tokens: 1024 },
  output_tokens: 40,
  output_tokens_details: { reasoning_tokens: 16 },
  total_tokens: 1240,
};

function completedFrame(usage: unknown = USAGE): string {
  return frame("response.completed", {
    response: { id: "resp_1", object: "response", status: "completed", output: [], usage },
  });
}

function itemDone(item: Record<string, unknown>, index = 0): string {
  return frame("response.output_item.done", { output_index: index, item });
}

function delta(text: string): string {
  return frame("response.output_text.delta", {
    item_id: "msg_1",
    output_index: 0,
    content_index: 0,
    delta: text,
  });
}

const CREATED = frame("response.created", { response: { id: "resp_1", status: "in_progress" } });

const MESSAGE_ITEM = {
  id: "msg_1",
  type: "message",
  status: "completed",
  role: "assistant",
  content: [{ type: "output_text", annotations: [], text: "Hello there" }],
};

/** Answers 200 with an SSE body written as the given chunks, then ends. */
function sseOk(...chunks: string[]): Handler {
  return (_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const c of chunks) res.write(c);
    res.end();
  };
}

/** Answers 200, writes the chunks, and keeps the stream open until the client goes away. */
function sseHang(...chunks: string[]): Handler {
  return (_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const c of chunks) res.write(c);
  };
}

function status(code: number, body: unknown, headers: Record<string, string> = {}): Handler {
  return (_req, res) => {
    res.writeHead(code, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };
}

// --- client builders --------------------------------------------------------------------------

interface Harness {
  client: OpenAIResponsesClient;
  sleeps: number[];
}

function harness(overrides: Partial<OpenAIResponsesClientConfig> = {}): Harness {
  const sleeps: number[] = [];
  const client = new OpenAIResponsesClient({
    fetch: (input, init) => fetch(input, init),
    baseUrl,
    apiKey: "sk-test-key",
    model: "gpt-test",
    threadId: "thread-1",
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    random: () => 0.5,
    clock: { nowMs: () => Date.UTC(2030, 0, 1) },
    ...overrides,
  });
  return { client, sleeps };
}

const EXPECTED_USAGE = {
  input_tokens: 1200,
  cached_input_tokens: 1024,
  output_tokens: 40,
  reasoning_output_tokens: 16,
  total_tokens: 1240,
};

// --- tests ------------------------------------------------------------------------------------

describe("OpenAIResponsesClient streaming", () => {
  it("streams text deltas, then the finished message, then usage with cached tokens", async () => {
    script(
      sseOk(CREATED, delta("Hello"), delta(" there"), itemDone(MESSAGE_ITEM), completedFrame()),
    );
    const { events, error } = await drain(harness().client);
    expect(error).toBeUndefined();
    expect(events).toEqual([
      { type: "output_text_delta", delta: "Hello" },
      { type: "output_text_delta", delta: " there" },
      { type: "output_item_done", item: MESSAGE_ITEM },
      { type: "completed", usage: EXPECTED_USAGE },
    ]);
  });

  it("reassembles events whose bytes arrive split mid-line and mid-character", async () => {
    const body = CREATED + delta("h\u00e9 \u2713") + itemDone(MESSAGE_ITEM) + completedFrame();
    const bytes = Buffer.from(body, "utf8");
    const slices: string[] = [];
    script((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      // Odd-sized slices land inside lines, CRLF-free frames and multi-byte characters.
      for (let i = 0; i < bytes.length; i += 7) {
        const slice = bytes.subarray(i, i + 7);
        slices.push(slice.toString("latin1"));
        res.write(slice);
      }
      res.end();
    });
    const { events, error } = await drain(harness().client);
    expect(error).toBeUndefined();
    expect(slices.length).toBeGreaterThan(10);
    expect(events).toEqual([
      { type: "output_text_delta", delta: "h\u00e9 \u2713" },
      { type: "output_item_done", item: MESSAGE_ITEM },
      { type: "completed", usage: EXPECTED_USAGE },
    ]);
  });

  it("yields a finished function call and ignores argument deltas and unknown item types", async () => {
    const call = {
      id: "fc_1",
      type: "function_call",
      status: "completed",
      name: "lookup",
      arguments: '{"q":"weather"}',
      call_id: "call_abc",
    };
    script(
      sseOk(
        CREATED,
        frame("response.output_item.added", {
          output_index: 0,
          item: { ...call, status: "in_progress", arguments: "" },
        }),
        frame("response.function_call_arguments.delta", {
          item_id: "fc_1",
          output_index: 0,
          delta: '{"q":',
        }),
        frame("response.function_call_arguments.done", {
          item_id: "fc_1",
          output_index: 0,
          arguments: call.arguments,
        }),
        itemDone(call),
        itemDone(
          { id: "ig_1", type: "image_generation_call", status: "completed", result: "…" },
          1,
        ),
        completedFrame(),
      ),
    );
    const { events, error } = await drain(harness().client);
    expect(error).toBeUndefined();
    expect(events).toEqual([
      { type: "output_item_done", item: call },
      { type: "completed", usage: EXPECTED_USAGE },
    ]);
  });

  it("keeps a reasoning item's encrypted content", async () => {
    const reasoning = {
      id: "rs_1",
      type: "reasoning",
      summary: [{ type: "summary_text", text: "**Looking up**" }],
      encrypted_content: "gAAAAABencrypted-blob==",
    };
    script(sseOk(CREATED, itemDone(reasoning), itemDone(MESSAGE_ITEM, 1), completedFrame()));
    const { events, error } = await drain(harness().client);
    expect(error).toBeUndefined();
    expect(events).toEqual([
      { type: "output_item_done", item: reasoning },
      { type: "output_item_done", item: MESSAGE_ITEM },
      { type: "completed", usage: EXPECTED_USAGE },
    ]);
  });

  it("treats a response cut short only by max_output_tokens as completed", async () => {
    script(
      sseOk(
        itemDone(MESSAGE_ITEM),
        frame("response.incomplete", {
          response: {
            status: "incomplete",
            incomplete_details: { reason: "max_output_tokens" },
            usage: USAGE,
          },
        }),
      ),
    );
    const { events, error } = await drain(harness().client);
    expect(error).toBeUndefined();
    expect(events).toEqual([
      { type: "output_item_done", item: MESSAGE_ITEM },
      { type: "completed", usage: EXPECTED_USAGE },
    ]);
  });

  it("reports completion without usage when the response carries none", async () => {
    script(sseOk(completedFrame(null)));
    const { events } = await drain(harness().client);
    expect(events).toEqual([{ type: "completed" }]);
  });
});

describe("OpenAIResponsesClient request", () => {
  it("posts the prompt with store false, the thread as prompt_cache_key, tools and the bearer key", async () => {
    script(sseOk(completedFrame()));
    const input: KnownResponseItem[] = [
      {
        type: "message",
        id: "msg_local-1",
        role: "user",
        content: [{ type: "input_text", text: "what's the weather?" }],
        internal_chat_message_metadata_passthrough: { turn_id: "turn-1" },
      },
      {
        type: "reasoning",
        id: "rs_local-2",
        summary: [],
        content: null,
        encrypted_content: "gAAAA-prev",
      },
      {
        type: "function_call",
        id: "fc_local-3",
        name: "lookup",
        arguments: "{}",
        call_id: "call_1",
      },
      { type: "function_call_output", call_id: "call_1", output: "sunny" },
    ];
    const p: ModelPrompt = {
      instructions: "You are a careful assistant.",
      input: PromptInput.of(input),
      tools: [
        {
          type: "function",
          name: "lookup",
          description: "Looks things up",
          parameters: { type: "object", properties: {} },
        },
        {
          type: "function",
          name: "strict_tool",
          description: "",
          parameters: { type: "object", properties: {}, additionalProperties: false },
          strict: true,
        },
      ],
      parallel_tool_calls: false,
    };
    const { error } = await drain(harness({ model: "gpt-5-codex", threadId: "thr_42" }).client, p);
    expect(error).toBeUndefined();
    expect(requests).toHaveLength(1);
    const [req] = requests;
    expect(req?.method).toBe("POST");
    expect(req?.url).toBe("/v1/responses");
    expect(req?.headers.authorization).toBe("Bearer sk-test-key");
    expect(req?.headers["content-type"]).toBe("application/json");
    expect(req?.headers.accept).toBe("text/event-stream");
    expect(JSON.parse(req?.body ?? "")).toEqual({
      model: "gpt-5-codex",
      instructions: "You are a careful assistant.",
      // Local ids and the turn-id passthrough never go on the wire.
      input: [
        {
          type: "message",
          role: "user",
          content: [{ type: "input_text", text: "what's the weather?" }],
        },
        { type: "reasoning", summary: [], content: null, encrypted_content: "gAAAA-prev" },
        { type: "function_call", name: "lookup", arguments: "{}", call_id: "call_1" },
        { type: "function_call_output", call_id: "call_1", output: "sunny" },
      ],
      tools: [
        {
          type: "function",
          name: "lookup",
          description: "Looks things up",
          parameters: { type: "object", properties: {} },
          strict: false,
        },
        {
          type: "function",
          name: "strict_tool",
          description: "",
          parameters: { type: "object", properties: {}, additionalProperties: false },
          strict: true,
        },
      ],
      tool_choice: "auto",
      parallel_tool_calls: false,
      store: false,
      stream: true,
      // No `reasoning` in the prompt: a model that does not reason, so no encrypted reasoning
      // is asked for (the API refuses it for such models).
      prompt_cache_key: "thr_42",
    });
  });

  it("sends a reasoning model's settings as reasoning {effort, summary}, asks for encrypted reasoning, and sends text {verbosity}", async () => {
    script(sseOk(completedFrame()));
    const p: ModelPrompt = {
      ...prompt(),
      reasoning: { effort: "high", summary: "detailed" },
      text: { verbosity: "low" },
    };
    const { error } = await drain(harness({ model: "gpt-5.4", threadId: "thr_7" }).client, p);
    expect(error).toBeUndefined();
    expect(JSON.parse(requests[0]?.body ?? "")).toEqual({
      model: "gpt-5.4",
      instructions: "be helpful",
      input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] }],
      tools: [],
      tool_choice: "auto",
      parallel_tool_calls: true,
      reasoning: { effort: "high", summary: "detailed" },
      store: false,
      stream: true,
      include: ["reasoning.encrypted_content"],
      prompt_cache_key: "thr_7",
      text: { verbosity: "low" },
    });
    // Codex's field order, which the body keeps.
    expect(Object.keys(JSON.parse(requests[0]?.body ?? ""))).toEqual([
      "model",
      "instructions",
      "input",
      "tools",
      "tool_choice",
      "parallel_tool_calls",
      "reasoning",
      "store",
      "stream",
      "include",
      "prompt_cache_key",
      "text",
    ]);
  });

  it("leaves out Claude's signed thinking, which a thread that moved from anthropic holds, and keeps its own reasoning", async () => {
    const claude: KnownResponseItem = {
      type: "reasoning",
      summary: [],
      content: [{ type: "reasoning_text", text: "hmm" }],
      encrypted_content: JSON.stringify({
        anthropic_model: "claude-x",
        block: { type: "thinking", thinking: "hmm", signature: "sig" },
      }),
    };
    const own: KnownResponseItem = {
      type: "reasoning",
      summary: [],
      encrypted_content: "gAAAAB-own",
    };
    const input = [user("a"), claude, user("b"), own, user("c")];
    const body = harness().client.requestBody(prompt(input));
    expect(body.input).toEqual([user("a"), user("b"), own, user("c")]);
    // What is streamed is the same body, byte for byte.
    script(sseOk(completedFrame()));
    const { error } = await drain(harness().client, prompt(input));
    expect(error).toBeUndefined();
    expect(JSON.parse(requests[0]?.body ?? "{}").input).toEqual(body.input);
  });

  it("sends the model's output limit as max_output_tokens, last, when it has one", () => {
    const body = harness({ maxOutputTokens: 8_192 }).client.requestBody(prompt());
    expect(body.max_output_tokens).toBe(8_192);
    expect(Object.keys(body).at(-1)).toBe("max_output_tokens");
    expect(harness().client.requestBody(prompt())).not.toHaveProperty("max_output_tokens");
  });

  it("a reasoning model with no effort and no summary still reasons: reasoning {} and encrypted reasoning", () => {
    const body = harness().client.requestBody({ ...prompt(), reasoning: {} });
    expect(body.reasoning).toEqual({});
    expect(body.include).toEqual(["reasoning.encrypted_content"]);
    expect(body).not.toHaveProperty("text");
  });

  it("does not mutate the prompt it serializes", async () => {
    script(sseOk(completedFrame()));
    const input: KnownResponseItem[] = [{ ...user("x"), id: "msg_9" } as KnownResponseItem];
    const before = structuredClone(input);
    await drain(harness().client, prompt(input));
    expect(input).toEqual(before);
  });
});

describe("OpenAIResponsesClient request bodies of one thread", () => {
  it("sends exactly JSON.stringify(requestBody) on each request, for clients sharing a serializer", async () => {
    script(sseOk(completedFrame()), sseOk(completedFrame()), sseOk(completedFrame()));
    const inputSerializer = new InputSerializer();
    const history = [Object.freeze({ ...user("hi"), id: "msg_1" }) as KnownResponseItem];
    const prompts: ModelPrompt[] = [];
    for (const model of ["gpt-a", "gpt-a", "gpt-b"]) {
      const p = prompt([...history]);
      prompts.push(p);
      const { client } = harness({ model, inputSerializer });
      expect((await drain(client, p)).error).toBeUndefined();
      history.push(Object.freeze(user(`after ${model}`)));
    }
    expect(requests.map((r) => r.body)).toEqual(
      prompts.map((p, i) =>
        JSON.stringify(harness({ model: ["gpt-a", "gpt-a", "gpt-b"][i] }).client.requestBody(p)),
      ),
    );
  });
});

describe("OpenAIResponsesClient retries", () => {
  it("waits the Retry-After seconds after a 429 and then succeeds", async () => {
    script(
      status(
        429,
        { error: { message: "Rate limit reached", type: "requests" } },
        { "retry-after": "3" },
      ),
      sseOk(itemDone(MESSAGE_ITEM), completedFrame()),
    );
    const h = harness();
    const { events, error } = await drain(h.client);
    expect(error).toBeUndefined();
    expect(h.sleeps).toEqual([3000]);
    expect(requests).toHaveLength(2);
    expect(events).toEqual([
      { type: "output_item_done", item: MESSAGE_ITEM },
      { type: "completed", usage: EXPECTED_USAGE },
    ]);
  });

  it("reads a Retry-After HTTP date against the injected clock", async () => {
    const now = Date.UTC(2030, 0, 1, 12, 0, 0);
    script(
      status(
        429,
        { error: { message: "slow down" } },
        { "retry-after": new Date(now + 5000).toUTCString() },
      ),
      sseOk(completedFrame()),
    );
    const h = harness({ clock: { nowMs: () => now } });
    const { error } = await drain(h.client);
    expect(error).toBeUndefined();
    expect(h.sleeps).toEqual([5000]);
  });

  it("retries 500 twice with jittered exponential backoff, then succeeds", async () => {
    script(
      status(500, { error: { message: "boom" } }),
      status(502, { error: { message: "bad gateway" } }),
      sseOk(itemDone(MESSAGE_ITEM), completedFrame()),
    );
    const draws = [0.5, 0.25];
    const h = harness({ random: () => draws.shift() ?? 0 });
    const { events, error } = await drain(h.client);
    expect(error).toBeUndefined();
    expect(requests).toHaveLength(3);
    // Full jitter: draw × min(8 s, 500 ms × 2^(attempt-1)).
    expect(h.sleeps).toEqual([250, 250]);
    expect(events.at(-1)).toEqual({ type: "completed", usage: EXPECTED_USAGE });
  });

  it("gives up after maxAttempts with the last status and message", async () => {
    script(
      status(503, { error: { message: "overloaded 1" } }),
      status(503, { error: { message: "overloaded 2" } }),
      status(503, { error: { message: "overloaded 3" } }),
    );
    const h = harness({ maxAttempts: 3 });
    const { events, error } = await drain(h.client);
    expect(events).toEqual([]);
    expect(requests).toHaveLength(3);
    expect(h.sleeps).toHaveLength(2);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ status: 503, message: "openai: HTTP 503: overloaded 3" });
  });

  it("fails a 400 at once with its status and the API's message", async () => {
    script(
      status(400, {
        error: {
          message: "Invalid schema for function 'lookup'",
          type: "invalid_request_error",
          param: "tools[0]",
        },
      }),
      sseOk(completedFrame()),
    );
    const h = harness();
    const { events, error } = await drain(h.client);
    expect(events).toEqual([]);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({
      status: 400,
      message: "openai: HTTP 400: Invalid schema for function 'lookup'",
    });
    expect(requests).toHaveLength(1);
    expect(h.sleeps).toEqual([]);
  });

  it("does not wait out a Retry-After longer than maxRetryAfterMs", async () => {
    script(
      status(429, { error: { message: "quota" } }, { "retry-after": "3600" }),
      sseOk(completedFrame()),
    );
    const h = harness();
    const { error } = await drain(h.client);
    expect(error).toMatchObject({
      name: "ProviderError",
      status: 429,
      message: "openai: HTTP 429: quota",
    });
    expect(h.sleeps).toEqual([]);
    expect(requests).toHaveLength(1);
  });

  it("retries a connection reset before any response", async () => {
    script((req) => req.socket.destroy(), sseOk(itemDone(MESSAGE_ITEM), completedFrame()));
    const h = harness();
    const { events, error } = await drain(h.client);
    expect(error).toBeUndefined();
    expect(requests).toHaveLength(2);
    expect(h.sleeps).toEqual([250]);
    expect(events).toHaveLength(2);
  });

  it("retries a stream that closes before yielding anything", async () => {
    script(sseOk(CREATED), sseOk(itemDone(MESSAGE_ITEM), completedFrame()));
    const h = harness();
    const { events, error } = await drain(h.client);
    expect(error).toBeUndefined();
    expect(requests).toHaveLength(2);
    expect(events).toEqual([
      { type: "output_item_done", item: MESSAGE_ITEM },
      { type: "completed", usage: EXPECTED_USAGE },
    ]);
  });
});

describe("OpenAIResponsesClient failures", () => {
  it("fails without yielding the half-streamed item when the socket dies mid-item, and does not retry", async () => {
    script((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(CREATED + delta("Hel"));
      // Half of the item's done event, then the connection is torn down.
      res.write(itemDone(MESSAGE_ITEM).slice(0, 40), () => res.socket?.destroy());
    }, sseOk(completedFrame()));
    const h = harness();
    const { events, error } = await drain(h.client);
    expect(events).toEqual([{ type: "output_text_delta", delta: "Hel" }]);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("stream ended before the response completed");
    expect(requests).toHaveLength(1);
  });

  it("fails when the stream closes cleanly before response.completed", async () => {
    script(sseOk(delta("Hel"), itemDone(MESSAGE_ITEM)));
    const { events, error } = await drain(harness().client);
    expect(events).toEqual([
      { type: "output_text_delta", delta: "Hel" },
      { type: "output_item_done", item: MESSAGE_ITEM },
    ]);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("stream ended before the response completed");
    expect(requests).toHaveLength(1);
  });

  it("turns a response.failed event into a ProviderError with the API's message", async () => {
    script(
      sseOk(
        CREATED,
        frame("response.failed", {
          response: {
            status: "failed",
            error: { code: "server_error", message: "The model crashed" },
          },
        }),
      ),
      sseOk(completedFrame()),
    );
    const h = harness();
    const { events, error } = await drain(h.client);
    expect(events).toEqual([]);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("The model crashed");
    expect(requests).toHaveLength(1);
  });

  it("turns an error event into a ProviderError", async () => {
    script(
      sseOk(
        frame("error", { code: "rate_limit_exceeded", message: "Too many tokens", param: null }),
      ),
    );
    const { error } = await drain(harness().client);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("Too many tokens");
  });

  it("fails a response left incomplete by a content filter", async () => {
    script(
      sseOk(
        frame("response.incomplete", {
          response: { status: "incomplete", incomplete_details: { reason: "content_filter" } },
        }),
      ),
    );
    const { error } = await drain(harness().client);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("the response is incomplete: content_filter");
  });

  it("fails on a known item type that does not parse", async () => {
    script(sseOk(itemDone({ type: "function_call", name: "lookup" }), completedFrame()));
    const { events, error } = await drain(harness().client);
    expect(events).toEqual([]);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("the model stream sent a malformed function_call item");
  });
});

describe("OpenAIResponsesClient and nesting", () => {
  const deepItem = (levels: number) =>
    `event: response.output_item.done\ndata: {"type":"response.output_item.done","output_index":0,"item":{"type":"message","role":"assistant","content":[],"extra":${"[".repeat(levels)}${"]".repeat(levels)}}}\n\n`;

  it("fails on an event nested deeper than 64 levels, yielding nothing of it", async () => {
    script(sseOk(deepItem(5_000), completedFrame()));
    const { events, error } = await drain(harness().client);
    expect(events).toEqual([]);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe(
      `the model stream sent an event nested deeper than 64 levels (at /item/extra${"/0".repeat(62)}) (response.output_item.done)`,
    );
  });

  it("fails on an item nested deeper than an item may be, though the event is within 64", async () => {
    script(sseOk(deepItem(50), completedFrame()));
    const { events, error } = await drain(harness().client);
    expect(events).toEqual([]);
    expect((error as Error).message).toBe("the model stream sent a malformed message item");
  });
});

describe("OpenAIResponsesClient abort and timeout", () => {
  it("stops promptly mid-stream when the caller aborts, with an abort error", async () => {
    script(sseHang(CREATED, delta("Hel")));
    const controller = new AbortController();
    const started = performance.now();
    const { events, error } = await drain(harness().client, prompt(), controller.signal, () =>
      controller.abort(),
    );
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(events).toEqual([{ type: "output_text_delta", delta: "Hel" }]);
    expect(error).not.toBeInstanceOf(ProviderError);
    expect((error as Error).name).toBe("AbortError");
    // The abort reached the server: the connection was closed.
    await closed[0];
    expect(requests).toHaveLength(1);
  });

  it("stops promptly even when the fetch implementation ignores the signal", async () => {
    script(sseHang(CREATED, delta("Hel")));
    const controller = new AbortController();
    const deafFetch = (input: string, init: RequestInit) => fetch(input, { ...init, signal: null });
    const started = performance.now();
    const { events, error } = await drain(
      harness({ fetch: deafFetch }).client,
      prompt(),
      controller.signal,
      () => controller.abort(),
    );
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(events).toEqual([{ type: "output_text_delta", delta: "Hel" }]);
    expect((error as Error).name).toBe("AbortError");
    // Cancelling the body still releases the connection.
    await closed[0];
  });

  it("aborts a request whose headers never arrive", async () => {
    script(() => {
      // never answers
    });
    const controller = new AbortController();
    const reason = new DOMException("user interrupted", "AbortError");
    const pending = drain(harness().client, prompt(), controller.signal);
    // Abort once the request has reached the server.
    for (let i = 0; i < 200 && requests.length === 0; i++)
      await new Promise((r) => setTimeout(r, 5));
    expect(requests).toHaveLength(1);
    controller.abort(reason);
    const { events, error } = await pending;
    expect(events).toEqual([]);
    expect(error).toBe(reason);
    await closed[0];
  });

  it("rejects at once when the signal is already aborted, sending nothing", async () => {
    const controller = new AbortController();
    controller.abort();
    const { error } = await drain(harness().client, prompt(), controller.signal);
    expect((error as Error).name).toBe("AbortError");
    expect(requests).toEqual([]);
  });

  it("stops retrying when the caller aborts during the backoff pause", async () => {
    script(status(500, { error: { message: "boom" } }), sseOk(completedFrame()));
    const controller = new AbortController();
    const { error } = await drain(
      harness({
        sleep: async () => {
          controller.abort();
        },
      }).client,
      prompt(),
      controller.signal,
    );
    expect((error as Error).name).toBe("AbortError");
    expect(requests).toHaveLength(1);
  });

  it("fails with a timeout ProviderError when the response takes longer than timeoutMs", async () => {
    script(sseHang(CREATED, delta("Hel")), sseOk(completedFrame()));
    const timers: Array<{ fn: () => void; ms: number; cancelled: boolean }> = [];
    const schedule: ScheduleFn = (fn, ms) => {
      const timer = { fn, ms, cancelled: false };
      timers.push(timer);
      return () => {
        timer.cancelled = true;
      };
    };
    const { events, error } = await drain(
      harness({ schedule, timeoutMs: 30_000 }).client,
      prompt(),
      undefined,
      () => {
        // The per-attempt deadline passes while the stream is open.
        timers[0]?.fn();
      },
    );
    expect(timers.map((t) => t.ms)).toEqual([30_000]);
    expect(timers[0]?.cancelled).toBe(true);
    expect(events).toEqual([{ type: "output_text_delta", delta: "Hel" }]);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("timed out after 30000 ms");
    expect(requests).toHaveLength(1);
    await closed[0];
  });
});

describe("createOpenAIClientFromEnv", () => {
  const deps = {
    fetch: (input: string, init: RequestInit) => fetch(input, init),
    model: "gpt-test",
  };

  it("requires OPENAI_API_KEY", () => {
    expect(() => createOpenAIClientFromEnv({}, deps)).toThrow(/OPENAI_API_KEY is not set/);
    expect(() => createOpenAIClientFromEnv({ OPENAI_API_KEY: "  " }, deps)).toThrow(
      /OPENAI_API_KEY is not set/,
    );
  });

  it("rejects a base URL that is not http(s)", () => {
    expect(() =>
      createOpenAIClientFromEnv({ OPENAI_API_KEY: "k", OPENAI_BASE_URL: "not a url" }, deps),
    ).toThrow(/not a valid URL/);
    expect(() =>
      createOpenAIClientFromEnv(
        { OPENAI_API_KEY: "k", OPENAI_BASE_URL: "ftp://example.com/v1" },
        deps,
      ),
    ).toThrow(/must be http\(s\)/);
  });

  it("uses the configured base URL (trailing slash ignored) and key", async () => {
    script(sseOk(completedFrame()));
    const client = createOpenAIClientFromEnv(
      { OPENAI_API_KEY: "sk-env", OPENAI_BASE_URL: `${baseUrl}/` },
      deps,
    );
    const { error } = await drain(client);
    expect(error).toBeUndefined();
    expect(requests[0]?.url).toBe("/v1/responses");
    expect(requests[0]?.headers.authorization).toBe("Bearer sk-env");
  });

  it("defaults to the public OpenAI endpoint", async () => {
    const seen: string[] = [];
    const client = createOpenAIClientFromEnv(
      { OPENAI_API_KEY: "sk-env" },
      {
        model: "gpt-test",
        fetch: async (input) => {
          seen.push(input);
          return new Response(completedFrame(), {
            headers: { "content-type": "text/event-stream" },
          });
        },
      },
    );
    const { error } = await drain(client);
    expect(error).toBeUndefined();
    expect(seen).toEqual(["https://api.openai.com/v1/responses"]);
  });
});
