/**
 * The OpenAI-compatible surface (design §17) driven by the official `openai` SDK, the current
 * major and the one before, pointed at the worker as a client would point it at OpenAI.
 */
import { exports } from "cloudflare:workers";
import OpenAI from "openai";
import OpenAIv6 from "openai-v6";
import { describe, expect, it } from "vitest";
import { parseResponseId } from "../../../shared/openai/index.ts";
import { api, BASE, DEV_KEY, json, newThreadId } from "../helpers/api.ts";

type Client = OpenAI;

const fetchWorker = (url: unknown, init: unknown) =>
  exports.default.fetch(url as string, init as RequestInit);

/** Each SDK with its own error classes (an `instanceof` needs the module that threw). */
interface Sdk {
  clientFor: (key: string) => Client;
  errors: { NotFoundError: unknown; AuthenticationError: unknown; BadRequestError: unknown };
}

const SDKS: [string, Sdk][] = [
  [
    "openai 7",
    {
      clientFor: (key) =>
        new OpenAI({ apiKey: key, baseURL: `${BASE}/v1`, fetch: fetchWorker, maxRetries: 0 }),
      errors: OpenAI,
    },
  ],
  [
    "openai 6",
    {
      clientFor: (key) =>
        new OpenAIv6({
          apiKey: key,
          baseURL: `${BASE}/v1`,
          fetch: fetchWorker,
          maxRetries: 0,
        }) as unknown as Client,
      errors: OpenAIv6,
    },
  ],
];

const MODEL = "spindle-local";
const LOOKUP = {
  type: "function" as const,
  name: "lookup",
  description: "Looks a word up",
  parameters: { type: "object", properties: { q: { type: "string" } } },
  strict: false,
};

/** The thread a response ran on. */
function threadOf(responseId: string): string {
  const ref = parseResponseId(responseId);
  if (!ref) throw new Error(`not a Spindle response id: ${responseId}`);
  return ref.threadId;
}

async function threadPrompt(threadId: string) {
  return json<{ input: { role?: string; content?: { text?: string }[] }[] }>(
    await api("GET", `/v1/threads/${threadId}/prompt`),
  );
}

const texts = (prompt: Awaited<ReturnType<typeof threadPrompt>>) =>
  prompt.input.flatMap((item) => (item.content ?? []).map((part) => part.text ?? ""));

describe.each(SDKS)("%s", (_name, { clientFor, errors }) => {
  const client = clientFor(DEV_KEY);
  const { NotFoundError, AuthenticationError, BadRequestError } = errors as typeof OpenAI;

  it("creates a response: output, usage, the settings echoed", async () => {
    const response = await client.responses.create({
      model: MODEL,
      input: "hello there",
      metadata: { team: "a" },
      temperature: 0.5,
    });
    expect(response.id).toMatch(/^resp_/);
    expect(response.object).toBe("response");
    expect(response.status).toBe("completed");
    expect(response.model).toBe(MODEL);
    expect(response.output_text).toContain('Last user message: "hello there"');
    expect(response.usage?.input_tokens).toBeGreaterThan(0);
    expect(response.usage?.input_tokens_details.cached_tokens).toBe(0);
    expect(response.usage?.output_tokens_details.reasoning_tokens).toBe(0);
    expect(response.metadata).toEqual({ team: "a" });
    expect(response.temperature).toBe(0.5);
    // Retrieved, it is the same response.
    const again = await client.responses.retrieve(response.id);
    expect(again.output).toEqual(response.output);
    expect(again.status).toBe("completed");
  });

  it("streams OpenAI's events in order, with strictly increasing sequence numbers", async () => {
    const stream = await client.responses.create({ model: MODEL, input: "hello", stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 4)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    expect(types.slice(-4)).toEqual([
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const sequence = events.map((e) => e.sequence_number);
    expect(sequence).toEqual([...sequence].sort((a, b) => a - b));
    expect(new Set(sequence).size).toBe(sequence.length);
    const deltas = events.flatMap((e) =>
      e.type === "response.output_text.delta" ? [e.delta] : [],
    );
    const completed = events.at(-1);
    if (completed?.type !== "response.completed") throw new Error("no response.completed");
    expect(deltas.join("")).toBe(outputText(completed.response));
  });

  it("streams through the SDK's stream helper to the final response", async () => {
    const stream = client.responses.stream({ model: MODEL, input: "through the helper" });
    let text = "";
    stream.on("response.output_text.delta", (event) => {
      text += event.delta;
    });
    const final = await stream.finalResponse();
    expect(final.status).toBe("completed");
    expect(outputText(final)).toBe(text);
    expect(text).toContain("through the helper");
  });

  it("applies instructions to one response only, and takes system and developer input", async () => {
    const first = await client.responses.create({
      model: MODEL,
      instructions: "Answer like a pirate.",
      input: [
        { role: "system", content: "You are terse." },
        { role: "developer", content: "Prefer short words." },
        { role: "user", content: "hi" },
      ],
    });
    expect(first.instructions).toBe("Answer like a pirate.");
    const thread = threadOf(first.id);
    const seen = texts(await threadPrompt(thread));
    expect(seen.some((t) => t.includes("Answer like a pirate."))).toBe(true);
    expect(seen).toContain("You are terse.");
    expect(seen).toContain("Prefer short words.");

    const second = await client.responses.create({
      model: MODEL,
      previous_response_id: first.id,
      input: "and now?",
    });
    expect(second.instructions).toBeNull();
    expect(threadOf(second.id)).toBe(thread);
    // The instructions left the world state: the model was told (a diff), not sent them again.
    const after = texts(await threadPrompt(thread));
    expect(after.filter((t) => t.includes("Answer like a pirate.")).length).toBe(1);
    const input = await client.responses.inputItems.list(first.id, { order: "asc" });
    expect(input.data.map((i) => (i as { role?: string }).role)).toEqual([
      "developer",
      "developer",
      "user",
    ]);
  });

  it("round-trips a function tool: the call in output, its output resumes the turn", async () => {
    const called = await client.responses.create({
      model: MODEL,
      tools: [LOOKUP],
      input: '/call lookup {"q":"spindle"}',
    });
    expect(called.status).toBe("completed");
    const call = called.output.find((item) => item.type === "function_call");
    expect(call).toMatchObject({
      type: "function_call",
      name: "lookup",
      arguments: '{"q":"spindle"}',
    });
    if (call?.type !== "function_call") throw new Error("no call");

    const answered = await client.responses.create({
      model: MODEL,
      tools: [LOOKUP],
      previous_response_id: called.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "a tool of wool" }],
    });
    expect(answered.status).toBe("completed");
    expect(answered.output_text).toContain("a tool of wool");
    expect(answered.id).not.toBe(called.id);
    // The same turn of the same thread, resumed: a tool call with its output, once.
    const ref = parseResponseId(answered.id);
    expect(ref?.turnId).toBe(parseResponseId(called.id)?.turnId);
    const turn = await json<{ status: string; items: { type: string }[] }>(
      await api("GET", `/v1/threads/${ref?.threadId}/turns/${ref?.turnId}`),
    );
    expect(turn.status).toBe("completed");
    expect(turn.items.filter((i) => i.type === "function_call_output")).toHaveLength(1);
    // Each response shows its own stretch of the turn.
    const before = await client.responses.retrieve(called.id);
    expect(before.output.map((i) => i.type)).toEqual(["function_call"]);
    const inputs = await client.responses.inputItems.list(answered.id);
    expect(inputs.data.map((i) => i.type)).toEqual(["function_call_output"]);
  });

  it("resumes a paused turn with a streamed response of what follows", async () => {
    const called = await client.responses.create({
      model: MODEL,
      tools: [LOOKUP],
      input: '/call lookup {"q":"stream"}',
    });
    const call = called.output.find((item) => item.type === "function_call");
    if (call?.type !== "function_call") throw new Error("no call");
    const stream = await client.responses.create({
      model: MODEL,
      tools: [LOOKUP],
      previous_response_id: called.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "streamed wool" }],
      stream: true,
    });
    const types: string[] = [];
    let final: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.completed") final = event.response;
    }
    expect(types[0]).toBe("response.created");
    expect(final?.output.map((i) => i.type)).toEqual(["message"]);
    expect(outputText(final as OpenAI.Responses.Response)).toContain("streamed wool");
    expect(parseResponseId(final?.id ?? "")?.turnId).toBe(parseResponseId(called.id)?.turnId);
  });

  it("streams a tool call's argument events", async () => {
    const stream = await client.responses.create({
      model: MODEL,
      tools: [LOOKUP],
      input: '/call lookup {"q":"x"}',
      stream: true,
    });
    const types: string[] = [];
    let args = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.function_call_arguments.delta") args += event.delta;
    }
    expect(types).toContain("response.function_call_arguments.delta");
    expect(types).toContain("response.function_call_arguments.done");
    expect(args).toBe('{"q":"x"}');
    expect(types.at(-1)).toBe("response.completed");
  });

  it("chains previous_response_id on one thread, and branches on a fork from an older one", async () => {
    const r1 = await client.responses.create({ model: MODEL, input: "one" });
    const r2 = await client.responses.create({
      model: MODEL,
      previous_response_id: r1.id,
      input: "two",
    });
    expect(threadOf(r2.id)).toBe(threadOf(r1.id));
    const branch = await client.responses.create({
      model: MODEL,
      previous_response_id: r1.id,
      input: "two, again",
    });
    const fork = threadOf(branch.id);
    expect(fork).not.toBe(threadOf(r1.id));
    const forked = await json<{ forked_from: string; turn_count: number }>(
      await api("GET", `/v1/threads/${fork}`),
    );
    expect(forked.forked_from).toBe(threadOf(r1.id));
    // The branch saw "one" but not "two".
    const seen = texts(await threadPrompt(fork));
    expect(seen).toContain("one");
    expect(seen).not.toContain("two");
    expect(seen).toContain("two, again");
    // The original thread is as it was: two turns.
    const original = await json<{ turn_count: number }>(
      await api("GET", `/v1/threads/${threadOf(r1.id)}`),
    );
    expect(original.turn_count).toBe(2);
  });

  it("continues the newest response streamed, refuses one still running, and 404s an unknown one", async () => {
    const r1 = await client.responses.create({ model: MODEL, input: "first" });
    const stream = await client.responses.create({
      model: MODEL,
      previous_response_id: r1.id,
      input: "second",
      stream: true,
    });
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream)
      if (event.type === "response.completed") completed = event.response;
    expect(completed?.previous_response_id).toBe(r1.id);
    expect(threadOf(completed?.id ?? "")).toBe(threadOf(r1.id));
    // A streamed event's response has no `output_text` helper: the message's text is in output.
    expect(JSON.stringify(completed?.output)).toContain('Last user message: \\"second\\"');

    const running = await client.responses.create({
      model: MODEL,
      previous_response_id: completed?.id,
      input: "/slow 300 still going",
      background: true,
    });
    const refused = await client.responses
      .create({ model: MODEL, previous_response_id: running.id, input: "too soon" })
      .catch((e) => e);
    expect(refused).toBeInstanceOf(BadRequestError);
    expect(refused.param).toBe("previous_response_id");
    await client.responses.cancel(running.id);
    // Nothing was added by the refused request: three turns, the last one cancelled.
    const thread = await json<{ turn_count: number; last_turn_id: string }>(
      await api("GET", `/v1/threads/${threadOf(r1.id)}`),
    );
    expect(thread.turn_count).toBe(3);
    expect(thread.last_turn_id).toBe(parseResponseId(running.id)?.turnId);

    const unknown = `resp_${newThreadId()}.turn_x.0.1`;
    const missing = await client.responses
      .create({ model: MODEL, previous_response_id: unknown, input: "x" })
      .catch((e) => e);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing.param).toBe("previous_response_id");
  });

  it("echoes the settings the continuation ran with, not the thread's earlier ones", async () => {
    const r1 = await client.responses.create({
      model: MODEL,
      input: "with a tool",
      tools: [LOOKUP],
      reasoning: { effort: "low" },
      metadata: { team: "b" },
    });
    expect(r1.tools.map((tool) => (tool as { name: string }).name)).toEqual(["lookup"]);
    expect(r1.reasoning?.effort).toBe("low");
    const r2 = await client.responses.create({
      model: MODEL,
      previous_response_id: r1.id,
      input: "without",
    });
    // Tools, instructions and reasoning are each response's own; so is the metadata it echoes.
    expect(r2.tools).toEqual([]);
    expect(r2.instructions).toBeNull();
    expect(r2.reasoning?.effort ?? null).toBeNull();
    expect(r2.metadata).toEqual({});
    const config = await json<{ config: { tools?: unknown[]; reasoning?: unknown } }>(
      await api("GET", `/v1/threads/${threadOf(r2.id)}`),
    );
    expect(config.config.tools ?? []).toEqual([]);
    expect(config.config.reasoning).toBeUndefined();
    // Read back, a response shows its thread as it is: the conversation's metadata.
    const stored = await client.responses.retrieve(r2.id);
    expect(stored.tools).toEqual([]);
    expect(stored.metadata).toEqual({ team: "b" });
  });

  it("keeps conversations: create with items, list with order and pages, retrieve, update, delete", async () => {
    const conversation = await client.conversations.create({
      metadata: { topic: "wool" },
      items: [
        { type: "message", role: "user", content: "first" },
        { type: "message", role: "assistant", content: "noted" },
      ],
    });
    expect(conversation.id).toMatch(/^conv_/);
    expect(conversation.metadata).toEqual({ topic: "wool" });
    const response = await client.responses.create({
      model: MODEL,
      conversation: conversation.id,
      input: "second",
    });
    expect(response.conversation?.id).toBe(conversation.id);
    expect(response.output_text).toContain("second");

    const asc = await client.conversations.items.list(conversation.id, { order: "asc" });
    const roles = asc.data.map((i) => (i as { role?: string }).role);
    expect(roles).toEqual(["user", "assistant", "user", "assistant"]);
    const desc = await client.conversations.items.list(conversation.id, { limit: 2 });
    expect(desc.data.map((i) => i.id)).toEqual([asc.data[3]?.id, asc.data[2]?.id]);
    expect(desc.has_more).toBe(true);
    const next = await client.conversations.items.list(conversation.id, {
      limit: 2,
      after: desc.data[1]?.id,
    });
    expect(next.data.map((i) => i.id)).toEqual([asc.data[1]?.id, asc.data[0]?.id]);
    expect(next.has_more).toBe(false);
    const one = await client.conversations.items.retrieve(asc.data[0]?.id ?? "", {
      conversation_id: conversation.id,
    });
    expect(one).toMatchObject({ type: "message", role: "user" });

    const added = await client.conversations.items.create(conversation.id, {
      items: [{ type: "message", role: "user", content: "third" }],
    });
    expect(added.data).toHaveLength(1);

    const updated = await client.conversations.update(conversation.id, {
      metadata: { owner: "b" },
    });
    expect(updated.metadata).toEqual({ owner: "b" });
    expect((await client.conversations.retrieve(conversation.id)).metadata).toEqual({ owner: "b" });

    const deleted = await client.conversations.delete(conversation.id);
    expect(deleted.deleted).toBe(true);
    await expect(client.conversations.retrieve(conversation.id)).rejects.toBeInstanceOf(
      NotFoundError,
    );
  });

  it("lists a response's input items without Spindle's context messages", async () => {
    const response = await client.responses.create({
      model: MODEL,
      input: [
        { role: "user", content: "earlier question" },
        { role: "assistant", content: "earlier answer" },
        { role: "user", content: "now this" },
      ],
    });
    const items = await client.responses.inputItems.list(response.id, { order: "asc" });
    expect(items.data.map((i) => (i as { content: { text: string }[] }).content[0]?.text)).toEqual([
      "earlier question",
      "earlier answer",
      "now this",
    ]);
    // The model saw the replayed transcript after Spindle's context.
    const seen = texts(await threadPrompt(threadOf(response.id)));
    expect(seen.some((t) => t.startsWith("<environment_context>"))).toBe(true);
    // (The prompt of the next request: the answer comes last.)
    expect(seen.slice(-4, -1)).toEqual(["earlier question", "earlier answer", "now this"]);
  });

  it("keeps nothing of a store: false response", async () => {
    const response = await client.responses.create({
      model: MODEL,
      input: "forget me",
      store: false,
    });
    expect((response as unknown as { store: boolean }).store).toBe(false);
    expect(response.output_text).toContain("forget me");
    await expect(client.responses.retrieve(response.id)).rejects.toBeInstanceOf(NotFoundError);
    const thread = await api("GET", `/v1/threads/${threadOf(response.id)}`);
    expect(thread.status).toBe(404);
  });

  it("runs a background response, followed with retrieve and ended with cancel", async () => {
    const started = await client.responses.create({
      model: MODEL,
      input: "/slow 300 a long answer to cancel",
      background: true,
    });
    expect(started.background).toBe(true);
    expect(started.status).toBe("in_progress");
    const running = await client.responses.retrieve(started.id);
    expect(running.status).toBe("in_progress");
    const cancelled = await client.responses.cancel(started.id);
    expect(cancelled.status).toBe("cancelled");
    expect((await client.responses.retrieve(started.id)).status).toBe("cancelled");

    const quick = await client.responses.create({ model: MODEL, input: "quick", background: true });
    for (let i = 0; i < 50; i++) {
      if ((await client.responses.retrieve(quick.id)).status === "completed") break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect((await client.responses.retrieve(quick.id)).output_text).toContain("quick");
  });

  it("takes image input", async () => {
    const image = "data:image/png;base64,iVBORw0KGgo=";
    const response = await client.responses.create({
      model: MODEL,
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "what is this?" },
            { type: "input_image", image_url: image, detail: "low" },
          ],
        },
      ],
    });
    expect(response.status).toBe("completed");
    const prompt = await json<{ input: { content?: { type: string; image_url?: string }[] }[] }>(
      await api("GET", `/v1/threads/${threadOf(response.id)}/prompt`),
    );
    const parts = prompt.input.flatMap((item) => item.content ?? []);
    expect(parts).toContainEqual({ type: "input_image", image_url: image, detail: "low" });
  });

  it("answers the SDK's typed errors: 401, 400, 404", async () => {
    const stranger = clientFor("sk-not-a-key");
    const unauthorized = await stranger.responses
      .create({ model: MODEL, input: "x" })
      .catch((e) => e);
    expect(unauthorized).toBeInstanceOf(AuthenticationError);
    expect(unauthorized.status).toBe(401);

    const bad = await client.responses
      .create({
        model: MODEL,
        input: "x",
        text: { format: { type: "json_schema", name: "x", schema: {} } },
      })
      .catch((e) => e);
    expect(bad).toBeInstanceOf(BadRequestError);
    expect(bad.code).toBe("unsupported_parameter");
    expect(bad.param).toBe("text.format");

    const invalid = await client.responses
      .create({ model: MODEL, input: [{ role: "user", content: [] }] })
      .catch((e) => e);
    expect(invalid).toBeInstanceOf(BadRequestError);
    expect(invalid.param).toBe("input[0].content");

    const missing = await client.responses.retrieve("resp_nothing").catch((e) => e);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing.error).toMatchObject({ type: "invalid_request_error", code: "not_found" });

    const unknownModel = await client.responses
      .create({ model: "no-such-model", input: "x" })
      .catch((e) => e);
    expect(unknownModel).toBeInstanceOf(BadRequestError);
    expect(unknownModel.code).toBe("unknown_model");
  });

  it("answers a retry with the same Idempotency-Key with the first response, run once", async () => {
    const key = crypto.randomUUID();
    const first = await client.responses.create(
      { model: MODEL, input: "once only" },
      { headers: { "Idempotency-Key": key } },
    );
    const retry = await client.responses.create(
      { model: MODEL, input: "once only" },
      { headers: { "Idempotency-Key": key } },
    );
    expect(retry.id).toBe(first.id);
    expect(retry.output).toEqual(first.output);
    const thread = await json<{ turn_count: number }>(
      await api("GET", `/v1/threads/${threadOf(first.id)}`),
    );
    expect(thread.turn_count).toBe(1);

    const next = { model: MODEL, previous_response_id: first.id, input: "and once more" };
    const a = await client.responses.create(next, { headers: { "Idempotency-Key": `${key}-2` } });
    const b = await client.responses.create(next, { headers: { "Idempotency-Key": `${key}-2` } });
    expect(b.id).toBe(a.id);
    const after = await json<{ turn_count: number }>(
      await api("GET", `/v1/threads/${threadOf(first.id)}`),
    );
    expect(after.turn_count).toBe(2);
  });

  it("lists and gets the catalog's models", async () => {
    const models = [];
    for await (const model of client.models.list()) models.push(model.id);
    expect(models).toContain(MODEL);
    expect((await client.models.retrieve(MODEL)).id).toBe(MODEL);
  });
});

describe("invariant 18: the same conversation is the same thread", () => {
  const client = SDKS[0]?.[1].clientFor(DEV_KEY) as Client;

  it("shows a response's turn through Spindle's routes, and a Spindle thread as a conversation", async () => {
    const response = await client.responses.create({ model: MODEL, input: "via openai" });
    const history = await json<{ data: { type: string; role?: string }[] }>(
      await api("GET", `/v1/threads/${threadOf(response.id)}/history`),
    );
    const roles = history.data.filter((i) => i.type === "message").map((i) => i.role);
    expect(roles).toContain("assistant");

    const thread = newThreadId();
    await json(await api("POST", "/v1/threads", { id: thread }), 201);
    await json(await api("POST", `/v1/threads/${thread}/turns`, { input: "via spindle" }));
    const items = await client.conversations.items.list(thread, { order: "asc" });
    expect(items.data.map((i) => (i as { role?: string }).role)).toEqual(["user", "assistant"]);
    const next = await client.responses.create({
      model: MODEL,
      conversation: thread,
      input: "and via openai",
    });
    expect(threadOf(next.id)).toBe(thread);
    const turns = await json<{ turn_count: number }>(await api("GET", `/v1/threads/${thread}`));
    expect(turns.turn_count).toBe(2);
  });
});

function outputText(response: OpenAI.Responses.Response): string {
  return response.output
    .flatMap((item) => (item.type === "message" ? item.content : []))
    .map((part) => (part.type === "output_text" ? part.text : ""))
    .join("");
}
