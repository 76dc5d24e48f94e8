import { describe, expect, it } from "vitest";
import type { ThreadEvent, TurnResource } from "../../../shared/api/index.ts";
import {
  isClientVisible,
  OpenAIInputError,
  parseResponseId,
  type ResponseSettings,
  ResponseStream,
  responseId,
  responseInput,
  responseStretch,
  serverToolOf,
} from "../../../shared/openai/index.ts";
import type { ResponseItem } from "../../../shared/protocol/index.ts";

const user = (text: string, id = `msg_${text}`): ResponseItem => ({
  type: "message",
  id,
  role: "user",
  content: [{ type: "input_text", text }],
});
const assistant = (text: string, id = `msg_a_${text}`): ResponseItem => ({
  type: "message",
  id,
  role: "assistant",
  content: [{ type: "output_text", text }],
});
const call = (name: string, callId: string): ResponseItem => ({
  type: "function_call",
  id: `fc_${callId}`,
  name,
  arguments: "{}",
  call_id: callId,
});
const output = (callId: string, text: string): ResponseItem => ({
  type: "function_call_output",
  id: `fco_${callId}`,
  call_id: callId,
  output: text,
});
/** Context as the engine records it: the world-state bundle (no ids) and a reminder. */
const context: ResponseItem[] = [
  {
    type: "message",
    role: "developer",
    content: [
      { type: "input_text", text: "<permissions instructions>x</permissions instructions>" },
    ],
  },
  {
    type: "message",
    role: "user",
    content: [{ type: "input_text", text: "<environment_context>x</environment_context>" }],
  },
];

const idOf = (item: ResponseItem) => ("id" in item ? item.id : undefined);

describe("response ids", () => {
  it("name a thread, a turn and a stretch, and nothing else parses", () => {
    const ref = { threadId: "thr_a-b", turnId: "turn_1", start: 12, inputs: 3 };
    expect(responseId(ref)).toBe("resp_thr_a-b.turn_1.12.3");
    expect(parseResponseId(responseId(ref))).toEqual(ref);
    for (const id of [
      "resp_x",
      "resp_a.b.c",
      "resp_a.b.1.x",
      "resp_a/b.c.1.1",
      "msg_a.b.1.1",
      "resp_a.b.01.1",
    ]) {
      expect(parseResponseId(id)).toBeUndefined();
    }
  });
});

describe("responseInput", () => {
  it("makes a string one user message", () => {
    expect(responseInput("hi")).toEqual({
      content: [{ type: "input_text", text: "hi" }],
      replayed: [],
      answers: [],
      recordedCount: 1,
    });
  });

  it("replays what comes before the trailing user messages, system as developer", () => {
    const input = responseInput([
      { role: "system", content: "be brief" },
      { role: "user", content: "q1" },
      { role: "assistant", content: "a1" },
      { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
      { type: "function_call_output", call_id: "c1", output: "r" },
      { role: "user", content: [{ type: "input_text", text: "q2" }] },
      { role: "user", content: "q3" },
    ]);
    expect(input.replayed.map((i) => (i.type === "message" ? i.role : i.type))).toEqual([
      "developer",
      "user",
      "assistant",
      "function_call",
      "function_call_output",
    ]);
    expect(input.content).toEqual([
      { type: "input_text", text: "q2" },
      { type: "input_text", text: "q3" },
    ]);
    expect(input.answers).toEqual([{ type: "function_call_output", call_id: "c1", output: "r" }]);
    expect(input.recordedCount).toBe(6);
  });

  it("keeps tool outputs that end the input as replayed items and answers", () => {
    const input = responseInput([{ type: "function_call_output", call_id: "c1", output: "r" }]);
    expect(input.content).toEqual([]);
    expect(input.replayed).toHaveLength(1);
    expect(input.answers).toHaveLength(1);
    expect(input.recordedCount).toBe(1);
  });

  it("names the parameter it cannot take", () => {
    const attempts: [unknown, string][] = [
      [[{ role: "user", content: [{ type: "input_file" }] }], "input[0].content[0]"],
      [
        [{ role: "user", content: [{ type: "input_image", file_id: "f", detail: "auto" }] }],
        "input[0].content[0].file_id",
      ],
      [[{ role: "user", content: [] }], "input[0].content"],
      [[{ type: "item_reference", id: "x" }], "input[0]"],
    ];
    for (const [items, param] of attempts) {
      try {
        responseInput(items as Parameters<typeof responseInput>[0]);
        expect.unreachable();
      } catch (error) {
        expect(error).toBeInstanceOf(OpenAIInputError);
        expect((error as OpenAIInputError).param).toBe(param);
      }
    }
  });
});

describe("what a client sees", () => {
  it("hides Spindle's context, shows a client's developer message", () => {
    expect(context.map(isClientVisible)).toEqual([false, false]);
    const reminder: ResponseItem = {
      type: "message",
      id: "msg_r",
      role: "developer",
      content: [{ type: "input_text", text: "<current_time>now</current_time>" }],
    };
    const client: ResponseItem = {
      type: "message",
      id: "msg_d",
      role: "developer",
      content: [{ type: "input_text", text: "be brief" }],
    };
    expect([reminder, client, user("q"), assistant("a")].map(isClientVisible)).toEqual([
      false,
      true,
      true,
      true,
    ]);
  });

  it("splits a turn into the stretches of its responses at a resume", () => {
    const items = [
      ...context,
      user("q"),
      call("mcp__docs__echo", "s1"),
      output("s1", "server says"),
      call("lookup", "c1"),
      output("c1", "client says"),
      assistant("done"),
    ];
    const first = responseStretch(items, 0, 1);
    expect(first.input.map(idOf)).toEqual(["msg_q"]);
    expect(first.output.map(idOf)).toEqual(["fc_s1", "fco_s1", "fc_c1"]);
    expect(first.resumed).toBe(true);
    // The resume recorded its outputs from index 6 on.
    const second = responseStretch(items, 6, 1);
    expect(second.input.map(idOf)).toEqual(["fco_c1"]);
    expect(second.output.map(idOf)).toEqual(["msg_a_done"]);
    expect(second.resumed).toBe(false);
  });

  it("reads a server tool's label and name", () => {
    expect(serverToolOf("mcp__docs__echo")).toEqual({ server_label: "docs", name: "echo" });
    expect(serverToolOf("lookup")).toBeUndefined();
  });
});

const SETTINGS: ResponseSettings = {
  model: "m",
  instructions: null,
  tools: [],
  tool_choice: "auto",
  parallel_tool_calls: true,
  reasoning: null,
  text: { format: { type: "text" } },
  max_output_tokens: null,
  max_tool_calls: null,
  temperature: 1,
  top_p: 1,
  top_logprobs: 0,
  presence_penalty: 0,
  frequency_penalty: 0,
  truncation: "disabled",
  metadata: {},
  store: true,
  background: false,
  user: null,
  safety_identifier: null,
  prompt_cache_key: null,
  service_tier: "default",
  previous_response_id: null,
  conversation: null,
};

function turn(
  id: string,
  status: TurnResource["status"],
  items: ResponseItem[],
  kind: TurnResource["kind"] = "turn",
): TurnResource {
  return {
    object: "turn",
    id,
    thread_id: "thr",
    kind,
    status,
    items,
    pending_calls: [],
    usage: null,
    error: null,
  };
}

describe("ResponseStream", () => {
  it("turns a turn's events into Responses events in order, a compaction before it unseen", () => {
    const stream = new ResponseStream({
      settings: SETTINGS,
      pending: { threadId: "thr", start: 0, inputs: 1 },
      nowMs: () => 0,
    });
    let seq = 0;
    const ev = (e: Omit<ThreadEvent, "seq">) => ({ ...e, seq: seq++ }) as ThreadEvent;
    const items = [...context, user("q"), assistant("hello", "msg_1"), call("lookup", "c1")];
    const events = [
      ev({
        type: "turn.started",
        turn_id: "cmp",
        data: turn("cmp", "in_progress", [], "compaction"),
      }),
      ev({
        type: "turn.completed",
        turn_id: "cmp",
        data: turn("cmp", "completed", [], "compaction"),
      }),
      ev({ type: "turn.started", turn_id: "t1", data: turn("t1", "in_progress", []) }),
      ...items
        .slice(0, 3)
        .map((item, i) =>
          ev({ type: "item.completed", turn_id: "t1", data: { item, context: i < 2 } }),
        ),
      ev({ type: "item.delta", turn_id: "t1", data: { item_id: "msg_1", delta: "hel" } }),
      ev({ type: "item.delta", turn_id: "t1", data: { item_id: "msg_1", delta: "lo" } }),
      ev({
        type: "item.completed",
        turn_id: "t1",
        data: { item: items[3] as ResponseItem, context: false },
      }),
      ev({
        type: "item.completed",
        turn_id: "t1",
        data: { item: items[4] as ResponseItem, context: false },
      }),
      ev({
        type: "turn.requires_action",
        turn_id: "t1",
        data: turn("t1", "requires_action", items),
      }),
    ];
    const out = events.flatMap((e) => stream.push(e));
    expect(out.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(out.map((e) => e.sequence_number)).toEqual(out.map((_, i) => i));
    expect(out[2]).toMatchObject({ output_index: 0, item: { id: "msg_1", status: "in_progress" } });
    expect(out[6]).toMatchObject({ item_id: "msg_1", text: "hello" });
    expect(out[9]).toMatchObject({
      output_index: 1,
      item: { type: "function_call", arguments: "" },
    });
    const completed = out.at(-1) as unknown as {
      response: { id: string; status: string; output: { id: string }[] };
    };
    expect(completed.response.id).toBe("resp_thr.t1.0.1");
    expect(completed.response.status).toBe("completed");
    expect(completed.response.output.map((item) => item.id)).toEqual(["msg_1", "fc_c1"]);
    expect(stream.ended).toBe(true);
  });
});
