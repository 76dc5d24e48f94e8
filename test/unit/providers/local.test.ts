import { describe, expect, it } from "vitest";
import { PromptInput } from "../../../shared/context-manager/index.ts";
import type { KnownResponseItem, Prompt } from "../../../shared/protocol/index.ts";
import {
  LocalModelClient,
  type ModelEvent,
  type ModelPrompt,
} from "../../../shared/providers/index.ts";
import { SUMMARIZATION_REQUEST, summaryMessage } from "../../../shared/session/index.ts";

function prompt(input: KnownResponseItem[], tools: Prompt["tools"] = []): ModelPrompt {
  return {
    instructions: "be local",
    input: PromptInput.of(input),
    tools,
    parallel_tool_calls: true,
  };
}
const user = (t: string): KnownResponseItem => ({
  type: "message",
  role: "user",
  content: [{ type: "input_text", text: t }],
});
const tool = { type: "function" as const, name: "lookup", description: "", parameters: {} };

async function collect(p: ModelPrompt): Promise<ModelEvent[]> {
  const out: ModelEvent[] = [];
  for await (const e of new LocalModelClient().stream(p)) out.push(e);
  return out;
}

describe("LocalModelClient", () => {
  it("answers with the count of input items and the last user text, streamed as deltas", async () => {
    const events = await collect(
      prompt([user("<environment_context>x</environment_context>"), user("hello there")]),
    );
    const done = events.find((e) => e.type === "output_item_done");
    expect(done?.type === "output_item_done" && done.item).toEqual({
      type: "message",
      role: "assistant",
      content: [
        { type: "output_text", text: 'Received 2 input items. Last user message: "hello there"' },
      ],
    });
    const deltas = events
      .flatMap((e) => (e.type === "output_text_delta" ? [e.delta] : []))
      .join("");
    expect(deltas).toBe('Received 2 input items. Last user message: "hello there"');
  });

  it("streams a long answer in at most 1,000 deltas, each of 24 characters or more", async () => {
    const long = "x".repeat(200_000);
    const events = await collect(prompt([user(long)]));
    const deltas = events.flatMap((e) => (e.type === "output_text_delta" ? [e.delta] : []));
    expect(deltas.length).toBeLessThanOrEqual(1_000);
    expect(deltas.length).toBeGreaterThan(900);
    expect(deltas.slice(0, -1).every((d) => d.length === deltas[0]?.length)).toBe(true);
    expect(deltas.join("")).toBe(`Received 1 input items. Last user message: "${long}"`);
    const short = await collect(prompt([user("hi")]));
    const shortDeltas = short.flatMap((e) => (e.type === "output_text_delta" ? [e.delta] : []));
    expect(shortDeltas.slice(0, -1).every((d) => d.length === 24)).toBe(true);
  });

  it("cuts a message answer to its output limit", async () => {
    const limited = new LocalModelClient({ maxOutputTokens: 100 });
    const events: ModelEvent[] = [];
    for await (const e of limited.stream(prompt([user("y".repeat(10_000))]))) events.push(e);
    const done = events.find((e) => e.type === "output_item_done");
    const completed = events.find((e) => e.type === "completed");
    const text =
      done?.type === "output_item_done" && done.item.type === "message" ? done.item : null;
    const part = text?.content[0];
    expect(part?.type === "output_text" && part.text).toMatch(
      /^Received 1 input items\. Last user message: "y+$/,
    );
    const out = completed?.type === "completed" ? completed.usage?.output_tokens : undefined;
    expect(out).toBeLessThanOrEqual(100);
    expect(out).toBeGreaterThan(90);
    const deltas = events.flatMap((e) => (e.type === "output_text_delta" ? [e.delta] : []));
    expect(text?.content[0]).toEqual({ type: "output_text", text: deltas.join("") });
    // Within the limit: as without one.
    const p = prompt([user("hello")]);
    expect(new LocalModelClient({ maxOutputTokens: 100 }).respond(p)).toEqual(
      new LocalModelClient().respond(p),
    );
    // A call is the one written in `/call`, as it is.
    const args = JSON.stringify({ q: "z".repeat(2_000) });
    const call: ModelEvent[] = [];
    for await (const e of limited.stream(prompt([user(`/call lookup ${args}`)], [tool]))) {
      call.push(e);
    }
    const item = call.find((e) => e.type === "output_item_done");
    expect(item?.type === "output_item_done" && item.item).toMatchObject({
      type: "function_call",
      arguments: args,
    });
  });

  it("emits a function call with a deterministic call id for /call on a declared tool", async () => {
    const p = prompt([user('/call lookup {"q":1}')], [tool]);
    const a = new LocalModelClient().respond(p);
    const b = new LocalModelClient().respond(p);
    expect(a).toEqual(b);
    expect(a).toMatchObject({ type: "function_call", name: "lookup", arguments: '{"q":1}' });
    expect(a.type === "function_call" && a.call_id).toMatch(/^call_[0-9a-f]{24}$/);
  });

  it("refuses to call a tool that is not declared", () => {
    const item = new LocalModelClient().respond(prompt([user("/call missing {}")]));
    expect(item.type).toBe("message");
  });

  it("quotes tool outputs that follow the last user message", () => {
    const item = new LocalModelClient().respond(
      prompt(
        [
          user("/call lookup {}"),
          { type: "function_call", name: "lookup", arguments: "{}", call_id: "c1" },
          { type: "function_call_output", call_id: "c1", output: "42 results" },
        ],
        [tool],
      ),
    );
    expect(item).toEqual({
      type: "message",
      role: "assistant",
      content: [{ type: "output_text", text: "Tool output received.\nc1: 42 results" }],
    });
  });

  it("answers the summarization request with a deterministic summary of what came before", () => {
    const answer: KnownResponseItem = {
      type: "message",
      role: "assistant",
      content: [{ type: "output_text", text: "ok" }],
    };
    const p = prompt([
      user("<environment_context>x</environment_context>"),
      user("first"),
      answer,
      user("second task"),
      answer,
      user(SUMMARIZATION_REQUEST),
    ]);
    const item = new LocalModelClient().respond(p);
    expect(item).toEqual({
      type: "message",
      role: "assistant",
      content: [
        {
          type: "output_text",
          text: 'Summary of 5 earlier items; last user request: "second task"',
        },
      ],
    });
    expect(new LocalModelClient().respond(p)).toEqual(item);
  });

  it("skips earlier compaction summaries when quoting the last user request", () => {
    const item = new LocalModelClient().respond(
      prompt([user("original"), summaryMessage("old"), user(SUMMARIZATION_REQUEST)]),
    );
    expect(item.type === "message" && item.content[0]).toEqual({
      type: "output_text",
      text: 'Summary of 2 earlier items; last user request: "original"',
    });
  });

  it("summarizes an empty conversation with an empty quote", () => {
    const item = new LocalModelClient().respond(prompt([user(SUMMARIZATION_REQUEST)]));
    expect(item.type === "message" && item.content[0]).toEqual({
      type: "output_text",
      text: 'Summary of 0 earlier items; last user request: ""',
    });
  });

  it("reports token usage that grows with the prompt", async () => {
    const small = await collect(prompt([user("a")]));
    const large = await collect(prompt([user("a".repeat(4000))]));
    const usage = (e: ModelEvent[]) => e.find((x) => x.type === "completed");
    const s = usage(small);
    const l = usage(large);
    expect(
      s?.type === "completed" &&
        l?.type === "completed" &&
        (l.usage?.input_tokens ?? 0) > (s.usage?.input_tokens ?? 0) + 900,
    ).toBe(true);
  });

  it("stops when the signal is aborted", async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(collect_(controller.signal)).rejects.toThrow();
  });
});

async function collect_(signal: AbortSignal) {
  for await (const _ of new LocalModelClient().stream(prompt([user("x")]), signal)) {
    // draining
  }
}

describe("LocalModelClient /slow", () => {
  it("waits the given time before each delta and stops when aborted", async () => {
    const waits: number[] = [];
    const controller = new AbortController();
    const client = new LocalModelClient({
      sleep: async (ms, signal) => {
        waits.push(ms);
        if (waits.length === 2) controller.abort(new Error("stop"));
        signal?.throwIfAborted();
      },
    });
    const seen: string[] = [];
    const run = async () => {
      for await (const e of client.stream(prompt([user("/slow 250 hello")]), controller.signal))
        seen.push(e.type);
    };
    await expect(run()).rejects.toThrow("stop");
    expect(waits).toEqual([250, 250]);
    expect(seen).toEqual(["output_text_delta"]);
  });
});
