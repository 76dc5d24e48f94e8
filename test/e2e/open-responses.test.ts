import { readFileSync } from "node:fs";
import { type OutputUnit, Validator } from "@cfworker/json-schema";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SseParser } from "../../shared/providers/http/sse.ts";
import {
  type ResponsesStandIn,
  type ScriptedCall,
  startResponsesStandIn,
} from "../helpers/responses-stand-in.ts";
import { call, DEV_KEY, REQUEST_TIMEOUT_MS, text } from "./local-worker.ts";
import { persistedWorker } from "./persisted-worker.ts";

/**
 * The Open Responses compliance suite (openresponses/openresponses, src/lib/compliance-tests.ts:
 * seven request templates, each answer validated against the specification's ResponseResource
 * schema, each streamed event against its event schema), run here with @cfworker/json-schema
 * against the vendored schemas (test/fixtures/open-responses), plus the stream checks the suite
 * leaves out: strictly increasing `sequence_number`, the event order of the specification's
 * "Items are streamable", ids and indices that agree, `[DONE]` last.
 *
 * Three targets: the Responses stand-in itself (proves the harness and the stand-in's wire);
 * Spindle's own thread routes on the `openai` provider pointed at the stand-in; and Spindle's
 * `/v1/responses` (design §17), skipped until that route exists.
 */

// --- the specification's schemas ----------------------------------------------------------------

const SCHEMAS = JSON.parse(
  readFileSync(new URL("../fixtures/open-responses/schemas.json", import.meta.url), "utf8"),
) as { components: { schemas: Record<string, unknown> } };

/** Streamed event `type` → its component (the `text/event-stream` union of `POST /responses`). */
const EVENT_SCHEMAS: Record<string, string> = {
  "response.created": "ResponseCreatedStreamingEvent",
  "response.queued": "ResponseQueuedStreamingEvent",
  "response.in_progress": "ResponseInProgressStreamingEvent",
  "response.completed": "ResponseCompletedStreamingEvent",
  "response.failed": "ResponseFailedStreamingEvent",
  "response.incomplete": "ResponseIncompleteStreamingEvent",
  "response.output_item.added": "ResponseOutputItemAddedStreamingEvent",
  "response.output_item.done": "ResponseOutputItemDoneStreamingEvent",
  "response.reasoning_summary_part.added": "ResponseReasoningSummaryPartAddedStreamingEvent",
  "response.reasoning_summary_part.done": "ResponseReasoningSummaryPartDoneStreamingEvent",
  "response.content_part.added": "ResponseContentPartAddedStreamingEvent",
  "response.content_part.done": "ResponseContentPartDoneStreamingEvent",
  "response.output_text.delta": "ResponseOutputTextDeltaStreamingEvent",
  "response.output_text.done": "ResponseOutputTextDoneStreamingEvent",
  "response.refusal.delta": "ResponseRefusalDeltaStreamingEvent",
  "response.refusal.done": "ResponseRefusalDoneStreamingEvent",
  "response.reasoning.delta": "ResponseReasoningDeltaStreamingEvent",
  "response.reasoning.done": "ResponseReasoningDoneStreamingEvent",
  "response.reasoning_summary_text.delta": "ResponseReasoningSummaryDeltaStreamingEvent",
  "response.reasoning_summary_text.done": "ResponseReasoningSummaryDoneStreamingEvent",
  "response.output_text.annotation.added": "ResponseOutputTextAnnotationAddedStreamingEvent",
  "response.function_call_arguments.delta": "ResponseFunctionCallArgumentsDeltaStreamingEvent",
  "response.function_call_arguments.done": "ResponseFunctionCallArgumentsDoneStreamingEvent",
  error: "ErrorStreamingEvent",
};

const TERMINAL = new Set(["response.completed", "response.failed", "response.incomplete"]);

const validators = new Map<string, Validator>();

/** Schema errors of `instance` against component `name` (empty: valid), prefixed by `where`. */
function schemaErrors(name: string, instance: unknown, where: string): string[] {
  let validator = validators.get(name);
  if (!validator) {
    // Each validator indexes its own copy: dereferencing marks the schema objects it walks.
    const root = {
      $ref: `#/components/schemas/${name}`,
      components: structuredClone(SCHEMAS.components),
    };
    validator = new Validator(root, "2020-12", false);
    validators.set(name, validator);
  }
  const result = validator.validate(instance);
  if (result.valid) return [];
  return describeErrors(result.errors).map((e) => `${where}: ${name}: ${e}`);
}

/** The most specific errors (those no other error's location extends), at most eight. */
function describeErrors(errors: OutputUnit[]): string[] {
  const leaves = errors.filter(
    (e) =>
      !errors.some((o) => o !== e && o.keywordLocation.startsWith(`${e.keywordLocation}/`)) &&
      e.keyword !== "$ref",
  );
  const picked = leaves.length > 0 ? leaves : errors;
  return [...new Set(picked.map((e) => `${e.instanceLocation || "#"} ${e.error}`))].slice(0, 8);
}

// --- the seven templates ------------------------------------------------------------------------

type Json = Record<string, unknown>;

/** A semantic check of the suite on the final ResponseResource (the schema check comes first). */
type ResponseValidator = (response: Json, events: StreamEvent[] | undefined) => string[];

interface Template {
  id: string;
  name: string;
  description: string;
  streaming: boolean;
  request(model: string): Json;
  validators: ResponseValidator[];
}

const hasOutput: ResponseValidator = (response) =>
  Array.isArray(response.output) && response.output.length > 0
    ? []
    : ["Response has no output items"];

const hasOutputType =
  (type: string): ResponseValidator =>
  (response) =>
    Array.isArray(response.output) && response.output.some((i) => (i as Json)?.type === type)
      ? []
      : [`Expected output item of type "${type}" but none found`];

const completedStatus: ResponseValidator = (response) =>
  response.status === "completed"
    ? []
    : [`Expected status "completed" but got "${String(response.status)}"`];

const streamingEvents: ResponseValidator = (_, events) =>
  events && events.length > 0 ? [] : ["No streaming events received"];

/** `tool-calling-streaming`: the function call's own events are there. */
const functionCallEvents: ResponseValidator = (_, events = []) => {
  const errors: string[] = [];
  const types = events.map((e) => e.data.type);
  const withCall = (type: string) =>
    events.some((e) => e.data.type === type && (e.data.item as Json)?.type === "function_call");
  if (!withCall("response.output_item.added"))
    errors.push("Missing response.output_item.added event with function_call item");
  if (!types.includes("response.function_call_arguments.delta"))
    errors.push("Missing response.function_call_arguments.delta event");
  if (!types.includes("response.function_call_arguments.done"))
    errors.push("Missing response.function_call_arguments.done event");
  if (!withCall("response.output_item.done"))
    errors.push("Missing response.output_item.done event with function_call item");
  return errors;
};

const WEATHER_TOOL = {
  type: "function",
  name: "get_weather",
  description: "Get the current weather for a location",
  parameters: {
    type: "object",
    properties: {
      location: { type: "string", description: "The city and state, e.g. San Francisco, CA" },
    },
    required: ["location"],
  },
};

/** A red heart icon on a white background, as the suite sends it. */
const HEART_PNG =
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAIAAAD8GO2jAAABmklEQVR42tyWAaTyUBzFew/eG4AHz+MBSAHKBiJRGFKwIgQQJKLUIioBIhCAiCAAEizAQIAECaASqFFJq84nudjnaqvuPnxzgP9xfrq5938csPn7PwHTKSoViCIEAYEAMhmoKsU2mUCWEQqB5xEMIp/HaGQG2G6RSuH9HQ7H34rFrtPbdz4jl6PbwmEsl3QA1mt4vcRKk8dz9eg6IpF7tt9fzGY0gCgafFRFo5Blc5vLhf3eCOj1yNhM5GRMVK0aATxPZoz09YXjkQDmczJgquGQAPp9WwCNBgG027YACgUC6HRsAZRKBDAY2AJoNv/ZnwzA6WScznG3p4UAymXGAEkyXrTFAh8fLAGqagQAyGaZpYsi7bHTNPz8MEj//LxuFPo+UBS8vb0KaLXubrRa7aX0RMLCykwmn0z3+XA4WACcTpCkh9MFAZpmuVXo+mO/w+/HZvNgbblcUCxaSo/Hyck80Yu6XXDcvfVZr79cvMZjuN2U9O9vKAqjZrfbIZ0mV4TUi9Xqz6jddNy//7+e3n8Fhf/Llo2kxi8AQyGRoDkmAhAAAAAASUVORK5CYII=";

/**
 * The suite's templates (openresponses/openresponses, src/lib/compliance-tests.ts at
 * 0cb939ccf839234347b4f0c317569b49fad8fd0e), with their semantic validators. The suite sends each
 * body with `stream` set (false or true) and checks the final ResponseResource against the
 * schema before the validators; for a stream, every event against its event schema too.
 */
const TEMPLATES: Template[] = [
  {
    id: "basic-response",
    name: "Basic Text Response",
    description: "Simple user message, validates ResponseResource schema",
    streaming: false,
    request: (model) => ({
      model,
      input: [{ type: "message", role: "user", content: "Say hello in exactly 3 words." }],
    }),
    validators: [hasOutput, completedStatus],
  },
  {
    id: "streaming-response",
    name: "Streaming Response",
    description: "Validates SSE streaming events and final response",
    streaming: true,
    request: (model) => ({
      model,
      input: [{ type: "message", role: "user", content: "Count from 1 to 5." }],
    }),
    validators: [streamingEvents, completedStatus],
  },
  {
    id: "system-prompt",
    name: "System Prompt",
    description: "Include system role message in input",
    streaming: false,
    request: (model) => ({
      model,
      input: [
        {
          type: "message",
          role: "system",
          content: "You are a pirate. Always respond in pirate speak.",
        },
        { type: "message", role: "user", content: "Say hello." },
      ],
    }),
    validators: [hasOutput, completedStatus],
  },
  {
    id: "tool-calling",
    name: "Tool Calling",
    description: "Define a function tool and verify function_call output",
    streaming: false,
    request: (model) => ({
      model,
      input: [
        { type: "message", role: "user", content: "What's the weather like in San Francisco?" },
      ],
      tools: [WEATHER_TOOL],
    }),
    validators: [hasOutput, hasOutputType("function_call")],
  },
  {
    id: "tool-calling-streaming",
    name: "Tool Calling (Streaming)",
    description:
      "Streaming tool call: validates function_call SSE events including arguments delta/done",
    streaming: true,
    request: (model) => ({
      model,
      input: [
        { type: "message", role: "user", content: "What's the weather like in San Francisco?" },
      ],
      tools: [WEATHER_TOOL],
    }),
    validators: [streamingEvents, functionCallEvents],
  },
  {
    id: "image-input",
    name: "Image Input",
    description: "Send image URL in user content",
    streaming: false,
    request: (model) => ({
      model,
      input: [
        {
          type: "message",
          role: "user",
          content: [
            { type: "input_text", text: "What do you see in this image? Answer in one sentence." },
            { type: "input_image", image_url: HEART_PNG },
          ],
        },
      ],
    }),
    validators: [hasOutput, completedStatus],
  },
  {
    id: "multi-turn",
    name: "Multi-turn Conversation",
    description: "Send assistant + user messages as conversation history",
    streaming: false,
    request: (model) => ({
      model,
      input: [
        { type: "message", role: "user", content: "My name is Alice." },
        {
          type: "message",
          role: "assistant",
          content: "Hello Alice! Nice to meet you. How can I help you today?",
        },
        { type: "message", role: "user", content: "What is my name?" },
      ],
    }),
    validators: [hasOutput, completedStatus],
  },
];

/** What the stand-in does for the tool templates' question (it has no `call NAME` in it). */
const WEATHER_CALL: ScriptedCall = {
  match: /weather/i,
  name: "get_weather",
  arguments: { location: "San Francisco, CA" },
};

// --- running a template ------------------------------------------------------------------------

interface StreamEvent {
  /** The SSE `event:` field (`message` when the stream named none). */
  event: string;
  data: Json;
}

interface Outcome {
  status: number;
  contentType: string;
  /** The JSON answer, or the terminal event's `response`. */
  response: Json | undefined;
  events?: StreamEvent[];
  /** The stream ended with `data: [DONE]`. */
  done?: boolean;
  /** Everything the suite and the stream checks found wrong (empty: compliant). */
  errors: string[];
}

interface Target {
  /** The API root, e.g. `http://127.0.0.1:PORT/v1`. */
  baseUrl: string;
  apiKey: string;
  model: string;
}

async function post(target: Target, body: Json): Promise<Response> {
  return fetch(`${target.baseUrl}/responses`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${target.apiKey}` },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
}

/** Parses an SSE body into events; a frame that is not one JSON object is an error. */
function parseStream(body: string): { events: StreamEvent[]; done: boolean; errors: string[] } {
  const parser = new SseParser();
  const frames = [...parser.push(body), ...parser.end()];
  const events: StreamEvent[] = [];
  const errors: string[] = [];
  let done = false;
  frames.forEach((frame, index) => {
    if (done) errors.push(`frame ${index}: an event after data: [DONE]`);
    if (frame.data === "[DONE]") {
      done = true;
      return;
    }
    // The suite's parser reads one `data:` line per event: JSON over several lines is lost.
    if (frame.data.includes("\n")) errors.push(`frame ${index}: data spans several lines`);
    let data: unknown;
    try {
      data = JSON.parse(frame.data);
    } catch {
      errors.push(`frame ${index}: data is not JSON: ${frame.data.slice(0, 120)}`);
      return;
    }
    if (typeof data !== "object" || data === null || Array.isArray(data)) {
      errors.push(`frame ${index}: data is not a JSON object`);
      return;
    }
    events.push({ event: frame.event, data: data as Json });
  });
  return { events, done, errors };
}

/** The Open Responses stream rules beyond each event's own schema. */
function streamErrors(events: StreamEvent[]): string[] {
  const errors: string[] = [];
  const at = (i: number, e: StreamEvent) => `event ${i} (${String(e.data.type)})`;
  let previousSequence = Number.NEGATIVE_INFINITY;
  /** output_index → the item as added, and what has been seen of it. */
  const items = new Map<
    number,
    { id: string; type: string; done: boolean; parts: Map<number, PartState>; args: string }
  >();
  let terminalAt = -1;
  let inProgressAt = -1;
  let firstOutputAt = -1;

  events.forEach((e, i) => {
    const type = typeof e.data.type === "string" ? e.data.type : "";
    const where = at(i, e);
    // Each event against its schema (the suite's union of event schemas).
    const schema = EVENT_SCHEMAS[type];
    if (!schema) errors.push(`${where}: not an event of the specification`);
    else errors.push(...schemaErrors(schema, e.data, where));
    // Spec, HTTP streaming: "The `event` field MUST match the `type` in the event body."
    if (e.event !== type) errors.push(`${where}: SSE event name ${JSON.stringify(e.event)}`);
    const sequence = e.data.sequence_number;
    if (typeof sequence === "number") {
      if (!(sequence > previousSequence))
        errors.push(`${where}: sequence_number ${sequence} after ${previousSequence}`);
      previousSequence = sequence;
    }
    if (terminalAt >= 0) errors.push(`${where}: after the terminal event`);
    if (i === 0 && type !== "response.created")
      errors.push(`${where}: the first event must be response.created`);
    if (type === "response.created" && i !== 0) errors.push(`${where}: response.created again`);
    if (type === "response.in_progress" && inProgressAt < 0) inProgressAt = i;
    if (TERMINAL.has(type)) terminalAt = i;

    const outputIndex = typeof e.data.output_index === "number" ? e.data.output_index : undefined;
    if (outputIndex === undefined) return;
    if (firstOutputAt < 0) firstOutputAt = i;
    const item = e.data.item as Json | undefined;
    const state = items.get(outputIndex);

    if (type === "response.output_item.added") {
      if (state) errors.push(`${where}: output_index ${outputIndex} added twice`);
      if (outputIndex !== items.size)
        errors.push(`${where}: output_index ${outputIndex}, expected ${items.size}`);
      if (item?.status !== "in_progress")
        errors.push(`${where}: an added item's status is ${String(item?.status)}`);
      items.set(outputIndex, {
        id: String(item?.id),
        type: String(item?.type),
        done: false,
        parts: new Map(),
        args: "",
      });
      return;
    }
    if (!state) {
      errors.push(`${where}: output_index ${outputIndex} before its response.output_item.added`);
      return;
    }
    if (state.done) errors.push(`${where}: output_index ${outputIndex} after its output_item.done`);
    if (type === "response.output_item.done") {
      state.done = true;
      if (item?.id !== state.id) errors.push(`${where}: item.id ${String(item?.id)} ≠ ${state.id}`);
      if (item?.type !== state.type) errors.push(`${where}: item.type changed`);
      if (item?.status === "in_progress") errors.push(`${where}: a done item still in_progress`);
      for (const [index, part] of state.parts) {
        if (part.stage !== "closed")
          errors.push(`${where}: content part ${index} of ${state.id} was never closed`);
      }
      if (state.type === "message") {
        const content = Array.isArray(item?.content) ? (item.content as Json[]) : [];
        for (const [index, part] of state.parts) {
          if (content[index]?.text !== part.text)
            errors.push(`${where}: content[${index}].text ≠ the streamed text`);
        }
      }
      if (state.type === "function_call" && item?.arguments !== state.args && state.args !== "")
        errors.push(`${where}: arguments ≠ the streamed arguments`);
      return;
    }
    if (e.data.item_id !== state.id)
      errors.push(`${where}: item_id ${String(e.data.item_id)} ≠ ${state.id}`);
    if (type.startsWith("response.function_call_arguments.")) {
      if (state.type !== "function_call") errors.push(`${where}: on a ${state.type} item`);
      if (type.endsWith(".delta")) state.args += String(e.data.delta);
      else if (e.data.arguments !== state.args)
        errors.push(`${where}: arguments ≠ the concatenated deltas`);
      return;
    }
    if (typeof e.data.content_index === "number") {
      errors.push(...partErrors(state.parts, e.data.content_index, type, e.data, where));
    }
  });

  if (terminalAt < 0) errors.push("no terminal event (response.completed, .failed, .incomplete)");
  // Design §17 lists response.in_progress after response.created, as OpenAI sends it.
  if (inProgressAt < 0) errors.push("no response.in_progress event");
  else if (firstOutputAt >= 0 && inProgressAt > firstOutputAt)
    errors.push("response.in_progress after the first output event");
  for (const [index, state] of items) {
    if (!state.done) errors.push(`output_index ${index} (${state.id}) never got output_item.done`);
  }
  // The terminal response's output is the items streamed, in order.
  const terminal = terminalAt >= 0 ? (events[terminalAt]?.data.response as Json) : undefined;
  if (terminal && Array.isArray(terminal.output)) {
    const ids = (terminal.output as Json[]).map((o) => o?.id);
    const streamed = [...items.entries()].sort((a, b) => a[0] - b[0]).map(([, s]) => s.id);
    if (JSON.stringify(ids) !== JSON.stringify(streamed))
      errors.push(
        `the final output ${JSON.stringify(ids)} ≠ the streamed items ${JSON.stringify(streamed)}`,
      );
  }
  return errors;
}

interface PartState {
  stage: "open" | "text-done" | "closed";
  text: string;
}

/** content_part.added → (output_text|refusal|reasoning).delta* → ….done → content_part.done. */
function partErrors(
  parts: Map<number, PartState>,
  index: number,
  type: string,
  data: Json,
  where: string,
): string[] {
  const part = parts.get(index);
  if (type === "response.content_part.added") {
    if (part) return [`${where}: content_index ${index} added twice`];
    if (index !== parts.size) return [`${where}: content_index ${index}, expected ${parts.size}`];
    parts.set(index, { stage: "open", text: "" });
    return [];
  }
  if (!part) return [`${where}: content_index ${index} before its response.content_part.added`];
  if (type === "response.content_part.done") {
    const errors: string[] = [];
    if (part.stage !== "text-done") errors.push(`${where}: content part closed before its .done`);
    const text = (data.part as Json | undefined)?.text;
    if (typeof text === "string" && text !== part.text)
      errors.push(`${where}: part.text ≠ the streamed text`);
    part.stage = "closed";
    return errors;
  }
  if (part.stage !== "open") return [`${where}: after the content part's .done`];
  if (type.endsWith(".delta")) {
    part.text += String(data.delta);
    return [];
  }
  if (type.endsWith(".done")) {
    part.stage = "text-done";
    const final = data.text ?? data.refusal;
    if (final !== part.text) return [`${where}: the final text ≠ the concatenated deltas`];
  }
  return [];
}

/**
 * Stricter than the current schemas: `logprobs` on output_text parts and text events, which the
 * 2026-01-15 schemas required (the ones the seven-template suite was written against) and
 * clients of that version still expect.
 */
function logprobsErrors(response: Json | undefined, events: StreamEvent[] = []): string[] {
  const errors: string[] = [];
  const check = (part: unknown, where: string) => {
    const p = part as Json | undefined;
    if (p?.type === "output_text" && !Array.isArray(p.logprobs))
      errors.push(`${where}: output_text without logprobs`);
  };
  const items = (response?.output as Json[] | undefined) ?? [];
  items.forEach((item, i) => {
    const content = Array.isArray(item?.content) ? (item.content as unknown[]) : [];
    content.forEach((p, j) => {
      check(p, `output[${i}].content[${j}]`);
    });
  });
  events.forEach((e, i) => {
    const type = e.data.type;
    if (
      (type === "response.output_text.delta" || type === "response.output_text.done") &&
      !Array.isArray(e.data.logprobs)
    )
      errors.push(`event ${i} (${type}): without logprobs`);
    if (type === "response.content_part.added" || type === "response.content_part.done")
      check(e.data.part, `event ${i} (${type}).part`);
  });
  return errors;
}

/** Sends `template` as the suite does and applies every check; never throws on a bad answer. */
async function runTemplate(target: Target, template: Template): Promise<Outcome> {
  const body = { ...template.request(target.model), stream: template.streaming };
  const res = await post(target, body);
  const contentType = res.headers.get("content-type") ?? "";
  const raw = await res.text();
  if (res.status !== 200) {
    return {
      status: res.status,
      contentType,
      response: undefined,
      errors: [`HTTP ${res.status}: ${raw.slice(0, 500)}`],
    };
  }
  const errors: string[] = [];
  let response: Json | undefined;
  let events: StreamEvent[] | undefined;
  let done: boolean | undefined;
  if (template.streaming) {
    // Spec: streaming answers are `text/event-stream`.
    if (!contentType.startsWith("text/event-stream"))
      errors.push(`content-type ${contentType} for a stream`);
    const parsed = parseStream(raw);
    events = parsed.events;
    done = parsed.done;
    errors.push(...parsed.errors, ...streamErrors(events));
    const terminal = events.find((e) => TERMINAL.has(String(e.data.type)));
    response = terminal?.data.response as Json | undefined;
  } else {
    // Spec: "When not streaming, servers MUST return data only as `application/json`."
    if (!contentType.startsWith("application/json"))
      errors.push(`content-type ${contentType} for JSON`);
    try {
      response = JSON.parse(raw) as Json;
    } catch {
      errors.push(`the answer is not JSON: ${raw.slice(0, 200)}`);
    }
  }
  if (response === undefined) {
    errors.push("no ResponseResource (no JSON answer, or no terminal event)");
  } else {
    const schema = schemaErrors("ResponseResource", response, "response");
    errors.push(...schema);
    // The suite runs the semantic validators only on a response that passed the schema.
    if (schema.length === 0) {
      for (const validate of template.validators) errors.push(...validate(response, events));
    }
  }
  return { status: res.status, contentType, response, events, done, errors };
}

function byId(id: string): Template {
  const template = TEMPLATES.find((t) => t.id === id);
  if (!template) throw new Error(`no template ${id}`);
  return template;
}

// --- the stand-in, and Spindle on it ------------------------------------------------------------

const MODEL = "gpt-standin";
let standIn: ResponsesStandIn;
/** A second stand-in that ends its streams with `[DONE]`, as the specification requires. */
let specStandIn: ResponsesStandIn;

beforeAll(async () => {
  standIn = await startResponsesStandIn({ calls: [WEATHER_CALL] });
  specStandIn = await startResponsesStandIn({ calls: [WEATHER_CALL], doneSentinel: true });
});

afterAll(async () => {
  await standIn?.close();
  await specStandIn?.close();
});

const { base } = persistedWorker("spindle-e2e-open-responses-", () => ({
  OPENAI_BASE_URL: standIn.url,
  OPENAI_API_KEY: "test",
  SPINDLE_OPENAI_MODELS: JSON.stringify([{ slug: MODEL, context_window: 128_000 }]),
}));

async function as<T>(method: string, path: string, body?: unknown, status = 200): Promise<T> {
  return JSON.parse(await text(await call(base(), method, path, body), status)) as T;
}

interface Turn {
  id: string;
  status: string;
  items: Json[];
  pending_calls: Json[];
  usage: Json | null;
  error: Json | null;
}

function lastText(turn: Turn): string {
  const last = turn.items.at(-1) as Json | undefined;
  const content = (last?.content as Json[] | undefined) ?? [];
  return content.map((p) => String(p.text ?? "")).join("");
}

describe("the compliance harness against the Responses stand-in", () => {
  for (const template of TEMPLATES) {
    it(`${template.id}: ${template.description}`, async () => {
      const outcome = await runTemplate(
        { baseUrl: specStandIn.url, apiKey: "test", model: MODEL },
        template,
      );
      expect(outcome.errors).toEqual([]);
      if (template.streaming) {
        expect(outcome.done).toBe(true);
        expect(logprobsErrors(outcome.response, outcome.events)).toEqual([]);
      }
    });
  }

  it("finds what is wrong: a missing field, a broken order, a reused sequence number", async () => {
    const stream = await runTemplate(
      { baseUrl: specStandIn.url, apiKey: "test", model: MODEL },
      byId("streaming-response"),
    );
    const events = stream.events ?? [];
    expect(stream.errors).toEqual([]);
    const withoutUsage = { ...(stream.response as Json) };
    delete withoutUsage.usage;
    expect(schemaErrors("ResponseResource", withoutUsage, "r")).toEqual([
      'r: ResponseResource: # Instance does not have required property "usage".',
    ]);
    const noCachedTokens = structuredClone(stream.response as Json);
    delete (noCachedTokens.usage as { input_tokens_details: Json }).input_tokens_details
      .cached_tokens;
    expect(schemaErrors("ResponseResource", noCachedTokens, "r").join("\n")).toContain(
      "cached_tokens",
    );
    // A delta before its item, a reused sequence number, no terminal event.
    const [created, inProgress, added, partAdded, delta] = events;
    const broken = [created, inProgress, delta, added, partAdded].map((e) => e as StreamEvent);
    broken[3] = { ...broken[3], data: { ...broken[3]?.data, sequence_number: 1 } } as StreamEvent;
    const errors = streamErrors(broken).join("\n");
    expect(errors).toContain("before its response.output_item.added");
    expect(errors).toMatch(/sequence_number 1 after \d+/);
    expect(errors).toContain("no terminal event");
    expect(errors).toContain("never got output_item.done");
    // A delta without logprobs passes today's schema but not the 2026-01-15 one.
    const noLogprobs = events.map((e) => {
      const { logprobs: _, ...data } = e.data;
      return { ...e, data };
    });
    expect(streamErrors(noLogprobs)).toEqual([]);
    expect(logprobsErrors(undefined, noLogprobs).length).toBeGreaterThan(0);
  });
});

describe("Spindle's thread routes on the openai provider, answered by the stand-in", () => {
  it("runs a turn that reaches the stand-in and completes with its answer and usage", async () => {
    standIn.reset();
    const thread = `or-${crypto.randomUUID().slice(0, 8)}`;
    await as("POST", "/v1/threads", { id: thread, model: MODEL }, 201);
    const turn = await as<Turn>("POST", `/v1/threads/${thread}/turns`, {
      input: "hello stand-in",
    });
    expect(turn.error).toBeNull();
    expect(turn.status).toBe("completed");
    expect(lastText(turn)).toBe("Echo: hello stand-in");

    const [request] = standIn.requests;
    expect(standIn.requests).toHaveLength(1);
    expect(request?.method).toBe("POST");
    expect(request?.path).toBe("/v1/responses");
    expect(request?.headers.authorization).toBe("Bearer test");
    expect(request?.body?.model).toBe(MODEL);
    expect(request?.body?.stream).toBe(true);
    expect(request?.body?.store).toBe(false);
    expect(request?.body?.prompt_cache_key).toBe(thread);
    expect(request?.raw).toContain("hello stand-in");
    expect(turn.usage).toMatchObject({ input_tokens: expect.any(Number) });
    expect(Number(turn.usage?.input_tokens)).toBeGreaterThan(0);

    // The next turn's request repeats the first's prefix: the stand-in reports it cached.
    const second = await as<Turn>("POST", `/v1/threads/${thread}/turns`, { input: "again" });
    expect(second.status).toBe("completed");
    expect(lastText(second)).toBe("Echo: again");
    expect(standIn.requests).toHaveLength(2);
    expect(Number(second.usage?.cached_input_tokens)).toBeGreaterThan(0);
  });

  it("pauses on the stand-in's function call and completes once the output is posted", async () => {
    standIn.reset();
    const thread = `or-${crypto.randomUUID().slice(0, 8)}`;
    const tool = {
      name: "lookup",
      description: "Looks a word up",
      parameters: { type: "object", properties: { q: { type: "string" } } },
    };
    await as("POST", "/v1/threads", { id: thread, model: MODEL, tools: [tool] }, 201);
    const paused = await as<Turn>("POST", `/v1/threads/${thread}/turns`, {
      input: 'please call lookup {"q":"spindle"}',
    });
    expect(paused.status).toBe("requires_action");
    expect(paused.pending_calls).toHaveLength(1);
    const pending = paused.pending_calls[0] as Json;
    expect(pending).toMatchObject({ type: "function_call", name: "lookup" });
    expect(JSON.parse(String(pending.arguments))).toEqual({ q: "spindle" });
    const sentTools = standIn.requests[0]?.body?.tools as Json[];
    expect(sentTools.map((t) => t.name)).toContain("lookup");

    const resumed = await as<Turn>("POST", `/v1/threads/${thread}/turns/${paused.id}/outputs`, {
      items: [{ type: "function_call_output", call_id: pending.call_id, output: "a word" }],
    });
    expect(resumed.status).toBe("completed");
    expect(lastText(resumed)).toBe("Tool lookup returned: a word");
    expect(standIn.requests).toHaveLength(2);
    const input = standIn.requests[1]?.body?.input as Json[];
    expect(input.at(-1)).toMatchObject({
      type: "function_call_output",
      call_id: pending.call_id,
      output: "a word",
    });
  });
});

// --- Spindle's /v1/responses --------------------------------------------------------------------

describe("Open Responses compliance of Spindle's /v1/responses (design §17)", () => {
  const target = (): Target => ({ baseUrl: `${base().href}v1`, apiKey: DEV_KEY, model: MODEL });

  for (const template of TEMPLATES) {
    it(`${template.id}: ${template.description}`, async () => {
      standIn.reset();
      const outcome = await runTemplate(target(), template);
      expect(outcome.errors).toEqual([]);
      // The request reached the model: the stand-in answered it.
      expect(standIn.responseBodies().length).toBeGreaterThan(0);
    });
  }

  it("streams end with data: [DONE] and carry logprobs on text (spec 2026-01-15)", async () => {
    for (const id of ["streaming-response", "tool-calling-streaming"]) {
      const outcome = await runTemplate(target(), byId(id));
      expect(outcome.errors).toEqual([]);
      expect(outcome.done, `${id}: data: [DONE] last`).toBe(true);
      expect(logprobsErrors(outcome.response, outcome.events)).toEqual([]);
    }
    const basic = await runTemplate(target(), byId("basic-response"));
    expect(logprobsErrors(basic.response)).toEqual([]);
  });

  it("gives the model what each template sent", async () => {
    const sent = async (id: string) => {
      standIn.reset();
      const outcome = await runTemplate(target(), byId(id));
      expect(outcome.errors).toEqual([]);
      return standIn
        .responseBodies()
        .map((b) => JSON.stringify(b))
        .join("\n");
    };
    expect(await sent("system-prompt")).toContain("You are a pirate.");
    const tools = await sent("tool-calling");
    expect(tools).toContain('"name":"get_weather"');
    expect(tools).toContain("San Francisco");
    expect(await sent("image-input")).toContain(HEART_PNG.slice(0, 64));
    const multi = await sent("multi-turn");
    expect(multi).toContain("My name is Alice.");
    expect(multi).toContain("Hello Alice! Nice to meet you.");
    expect(multi).toContain("What is my name?");
  });

  it("reads a stored response back with GET /v1/responses/{id}", async () => {
    const created = await runTemplate(target(), byId("basic-response"));
    expect(created.errors).toEqual([]);
    const id = String(created.response?.id);
    const res = await fetch(`${target().baseUrl}/responses/${id}`, {
      headers: { authorization: `Bearer ${DEV_KEY}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    expect(res.status).toBe(200);
    const read = (await res.json()) as Json;
    expect(schemaErrors("ResponseResource", read, "GET")).toEqual([]);
    expect(read.id).toBe(id);
    expect(read.output).toEqual(created.response?.output);
  });

  it("streams the same response the JSON answer gives (usage, output, settings)", async () => {
    const outcome = await runTemplate(target(), byId("streaming-response"));
    expect(outcome.errors).toEqual([]);
    const response = outcome.response as Json;
    expect(response.model).toBe(MODEL);
    expect(response.usage).toMatchObject({
      input_tokens_details: { cached_tokens: expect.any(Number) },
      output_tokens_details: { reasoning_tokens: expect.any(Number) },
    });
    // The created and completed snapshots describe one response.
    const created = outcome.events?.[0]?.data.response as Json;
    expect(created.id).toBe(response.id);
    expect(created.status).toBe("in_progress");
  });
});
