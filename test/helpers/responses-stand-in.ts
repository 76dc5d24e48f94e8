/**
 * A local stand-in for the OpenAI Responses API: `POST {url}/responses` on 127.0.0.1, answering
 * deterministically, as SSE (`stream: true`, what Spindle's `openai` provider sends) or as one
 * JSON ResponseResource. What it emits is what the real API emits, and what the Open Responses
 * specification requires (test/fixtures/open-responses): every ResponseResource field, every
 * event's `sequence_number`, `item_id`, `output_index`, `content_index`, `logprobs`.
 *
 * Its answer to a request, from the request's `input`:
 * - tool outputs after the last user message (`function_call_output` items): a message quoting
 *   each output, `Tool NAME returned: OUTPUT`;
 * - last user text containing `call NAME` (optionally followed by a JSON object, the arguments),
 *   NAME being a function of the request's `tools`: a `function_call` of it (`{}` without JSON);
 * - last user text matching one of `options.calls` (the function in the tools): that call;
 * - otherwise a message `Echo: TEXT` (TEXT the last user text, or `(no user message)`).
 *
 * The last user message is the newest `user` message that is not one of Spindle's contextual
 * ones (`<environment_context>`, …). Every request is recorded in `requests`, parsed.
 */
import type { ServerResponse } from "node:http";
import { isContextualUserMessageContent } from "../../shared/context/classify.ts";
import type { ContentItem } from "../../shared/protocol/index.ts";
import { asRecord, cacheAlive, type Json, type JsonRequest, serveJson } from "./json-stand-in.ts";

/** One request the stand-in received. */
export type StandInRequest = JsonRequest;

/** A call the stand-in makes when the last user text matches `match` and `name` is offered. */
export interface ScriptedCall {
  match: RegExp;
  name: string;
  arguments: Record<string, unknown>;
}

export interface ResponsesStandInOptions {
  /** Calls made on matching text besides the `call NAME` convention. */
  calls?: ScriptedCall[];
  /**
   * End each stream with `data: [DONE]`, as the Open Responses specification requires; the
   * OpenAI API itself does not (default false).
   */
  doneSentinel?: boolean;
  /** Characters per text or argument delta (default 8). */
  deltaChars?: number;
  /** The simulated prompt cache's lifetime (unset: it never expires). */
  cacheTtlMs?: number;
}

export interface ResponsesStandIn {
  /** The API root, `http://127.0.0.1:PORT/v1` (for `OPENAI_BASE_URL`). */
  url: string;
  /** Every request received, in order. */
  requests: StandInRequest[];
  /** The `POST …/responses` requests' parsed bodies, in order. */
  responseBodies(): Record<string, unknown>[];
  /** The next `POST …/responses` is answered with this HTTP error instead (once). */
  failNext(status: number, message: string): void;
  /** Forgets the recorded requests. */
  reset(): void;
  close(): Promise<void>;
}

interface Answer {
  kind: "message" | "function_call";
  text: string;
  name: string;
  arguments: string;
}

const CALL_PATTERN = /\bcall\s+([A-Za-z0-9_-]{1,64})(?:\s+(\{[\s\S]*\}))?/;

/** A message's content as content parts (a string is one `input_text`). */
function parts(content: unknown): ContentItem[] {
  if (typeof content === "string") return [{ type: "input_text", text: content }];
  if (!Array.isArray(content)) return [];
  return content.filter((p): p is ContentItem => typeof asRecord(p)?.type === "string");
}

function textOf(content: unknown): string {
  return parts(content)
    .map((p) => {
      if (p.type === "input_text" || p.type === "output_text") return p.text;
      if (p.type === "input_image") return "[image]";
      return "";
    })
    .join("")
    .trim();
}

/** Items of the request's `input` (a string is one user message). */
function inputItems(body: Json): Json[] {
  const input = body.input;
  if (typeof input === "string") return [{ type: "message", role: "user", content: input }];
  if (!Array.isArray(input)) return [];
  return input.map(asRecord).filter((i): i is Json => i !== undefined);
}

function isMessage(item: Json): boolean {
  return item.type === "message" || (item.type === undefined && typeof item.role === "string");
}

function functionNames(body: Json): Set<string> {
  const names = new Set<string>();
  if (!Array.isArray(body.tools)) return names;
  for (const tool of body.tools) {
    const t = asRecord(tool);
    if (t?.type === "function" && typeof t.name === "string") names.add(t.name);
  }
  return names;
}

function outputString(output: unknown): string {
  if (typeof output === "string") return output;
  if (Array.isArray(output)) return textOf(output);
  return JSON.stringify(output ?? null);
}

/** What the stand-in answers to `body` (see the file comment). */
export function decide(body: Json, calls: readonly ScriptedCall[] = []): Answer {
  const items = inputItems(body);
  let lastUser = -1;
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i] as Json;
    if (
      isMessage(item) &&
      item.role === "user" &&
      !isContextualUserMessageContent(parts(item.content))
    ) {
      lastUser = i;
      break;
    }
  }
  const after = items.slice(lastUser + 1);
  const outputs = after.filter((i) => i.type === "function_call_output");
  if (outputs.length > 0) {
    const names = new Map<string, string>();
    for (const i of after) {
      if (i.type === "function_call" && typeof i.call_id === "string" && typeof i.name === "string")
        names.set(i.call_id, i.name);
    }
    const text = outputs
      .map((o) => `Tool ${names.get(String(o.call_id)) ?? "?"} returned: ${outputString(o.output)}`)
      .join("\n");
    return { kind: "message", text, name: "", arguments: "" };
  }
  const userText = lastUser >= 0 ? textOf((items[lastUser] as Json).content) : "";
  const offered = functionNames(body);
  const asked = CALL_PATTERN.exec(userText);
  if (asked?.[1] && offered.has(asked[1])) {
    let args = "{}";
    if (asked[2]) {
      try {
        args = JSON.stringify(JSON.parse(asked[2]));
      } catch {
        args = "{}";
      }
    }
    return { kind: "function_call", text: "", name: asked[1], arguments: args };
  }
  for (const call of calls) {
    if (call.match.test(userText) && offered.has(call.name)) {
      return {
        kind: "function_call",
        text: "",
        name: call.name,
        arguments: JSON.stringify(call.arguments),
      };
    }
  }
  return {
    kind: "message",
    text: `Echo: ${userText || "(no user message)"}`,
    name: "",
    arguments: "",
  };
}

function approxTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text, "utf8") / 4);
}

function chunks(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out.length > 0 ? out : [""];
}

/** The request's tools as the ResponseResource echoes them (function tools, every field set). */
function echoedTools(body: Json): Json[] {
  if (!Array.isArray(body.tools)) return [];
  return body.tools
    .map(asRecord)
    .filter((t): t is Json => t?.type === "function" && typeof t.name === "string")
    .map((t) => ({
      type: "function",
      name: t.name,
      description: typeof t.description === "string" ? t.description : null,
      parameters: asRecord(t.parameters) ?? null,
      strict: typeof t.strict === "boolean" ? t.strict : true,
    }));
}

function echoedReasoning(body: Json): Json | null {
  const r = asRecord(body.reasoning);
  if (!r) return null;
  return { effort: r.effort ?? null, summary: r.summary ?? null };
}

export async function startResponsesStandIn(
  options: ResponsesStandInOptions = {},
): Promise<ResponsesStandIn> {
  const calls = options.calls ?? [];
  const deltaChars = options.deltaChars ?? 8;
  const requests: StandInRequest[] = [];
  let counter = 0;
  let failure: { status: number; message: string } | undefined;
  /** Per `prompt_cache_key`: the previous request's serialized input, for `cached_tokens`. */
  const lastPrompt = new Map<string, { prompt: string; atMs: number }>();

  const nextId = (prefix: string) => `${prefix}_standin${String(++counter).padStart(4, "0")}`;

  function usageFor(body: Json, answer: Answer): Json {
    const prompt = `${typeof body.instructions === "string" ? body.instructions : ""}${JSON.stringify(body.input ?? null)}${JSON.stringify(body.tools ?? [])}`;
    const inputTokens = approxTokens(prompt);
    let cached = 0;
    if (typeof body.prompt_cache_key === "string") {
      const entry = lastPrompt.get(body.prompt_cache_key);
      const previous =
        entry && cacheAlive(entry.atMs, options.cacheTtlMs) ? entry.prompt : undefined;
      if (previous !== undefined) {
        let common = 0;
        const max = Math.min(previous.length, prompt.length);
        while (common < max && previous.charCodeAt(common) === prompt.charCodeAt(common)) common++;
        cached = Math.min(inputTokens, Math.floor(common / 4));
      }
      lastPrompt.set(body.prompt_cache_key, { prompt, atMs: Date.now() });
    }
    const reasoningTokens = asRecord(body.reasoning) ? 8 : 0;
    const outputTokens =
      approxTokens(answer.kind === "message" ? answer.text : answer.name + answer.arguments) +
      reasoningTokens;
    return {
      input_tokens: inputTokens,
      input_tokens_details: { cached_tokens: cached },
      output_tokens: outputTokens,
      output_tokens_details: { reasoning_tokens: reasoningTokens },
      total_tokens: inputTokens + outputTokens,
    };
  }

  function resource(body: Json, id: string, createdAt: number): Json {
    return {
      id,
      object: "response",
      created_at: createdAt,
      completed_at: null,
      status: "in_progress",
      incomplete_details: null,
      model: typeof body.model === "string" ? body.model : "stand-in",
      previous_response_id:
        typeof body.previous_response_id === "string" ? body.previous_response_id : null,
      instructions: typeof body.instructions === "string" ? body.instructions : null,
      output: [],
      error: null,
      tools: echoedTools(body),
      tool_choice: body.tool_choice ?? "auto",
      truncation: body.truncation === "auto" ? "auto" : "disabled",
      parallel_tool_calls:
        typeof body.parallel_tool_calls === "boolean" ? body.parallel_tool_calls : true,
      text:
        asRecord(body.text) && asRecord(asRecord(body.text)?.format)
          ? body.text
          : { format: { type: "text" } },
      top_p: typeof body.top_p === "number" ? body.top_p : 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      top_logprobs: typeof body.top_logprobs === "number" ? body.top_logprobs : 0,
      temperature: typeof body.temperature === "number" ? body.temperature : 1,
      reasoning: echoedReasoning(body),
      usage: null,
      max_output_tokens: typeof body.max_output_tokens === "number" ? body.max_output_tokens : null,
      max_tool_calls: typeof body.max_tool_calls === "number" ? body.max_tool_calls : null,
      store: typeof body.store === "boolean" ? body.store : true,
      background: false,
      service_tier: "default",
      metadata: asRecord(body.metadata) ?? {},
      safety_identifier: null,
      prompt_cache_key: typeof body.prompt_cache_key === "string" ? body.prompt_cache_key : null,
    };
  }

  /** The events of one response, in the order the API sends them, without sequence numbers. */
  function events(body: Json): { events: Json[]; final: Json } {
    const answer = decide(body, calls);
    const createdAt = Math.floor(Date.now() / 1000);
    const base = resource(body, nextId("resp"), createdAt);
    const out: Json[] = [];
    out.push({ type: "response.created", response: base });
    out.push({ type: "response.in_progress", response: base });
    let item: Json;
    if (answer.kind === "message") {
      const itemId = nextId("msg");
      const at = { item_id: itemId, output_index: 0, content_index: 0 };
      out.push({
        type: "response.output_item.added",
        output_index: 0,
        item: {
          id: itemId,
          type: "message",
          status: "in_progress",
          content: [],
          role: "assistant",
        },
      });
      out.push({
        type: "response.content_part.added",
        ...at,
        part: { type: "output_text", annotations: [], logprobs: [], text: "" },
      });
      for (const delta of chunks(answer.text, deltaChars)) {
        out.push({ type: "response.output_text.delta", ...at, delta, logprobs: [] });
      }
      out.push({ type: "response.output_text.done", ...at, text: answer.text, logprobs: [] });
      const part = { type: "output_text", annotations: [], logprobs: [], text: answer.text };
      out.push({ type: "response.content_part.done", ...at, part });
      item = {
        id: itemId,
        type: "message",
        status: "completed",
        content: [part],
        role: "assistant",
      };
    } else {
      const itemId = nextId("fc");
      const callId = nextId("call");
      const at = { item_id: itemId, output_index: 0 };
      out.push({
        type: "response.output_item.added",
        output_index: 0,
        item: {
          id: itemId,
          type: "function_call",
          status: "in_progress",
          arguments: "",
          call_id: callId,
          name: answer.name,
        },
      });
      for (const delta of chunks(answer.arguments, deltaChars)) {
        out.push({ type: "response.function_call_arguments.delta", ...at, delta });
      }
      out.push({
        type: "response.function_call_arguments.done",
        ...at,
        arguments: answer.arguments,
      });
      item = {
        id: itemId,
        type: "function_call",
        status: "completed",
        arguments: answer.arguments,
        call_id: callId,
        name: answer.name,
      };
    }
    out.push({ type: "response.output_item.done", output_index: 0, item });
    const final = {
      ...base,
      status: "completed",
      completed_at: Math.max(createdAt, Math.floor(Date.now() / 1000)),
      output: [item],
      usage: usageFor(body, answer),
    };
    out.push({ type: "response.completed", response: final });
    return { events: out, final };
  }

  function answer(req: StandInRequest, res: ServerResponse): void {
    if (req.method !== "POST" || !/\/responses\/?$/.test(req.path)) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          error: {
            message: `no route ${req.method} ${req.path}`,
            type: "invalid_request_error",
            param: null,
            code: "not_found",
          },
        }),
      );
      return;
    }
    if (failure) {
      const { status, message } = failure;
      failure = undefined;
      res.writeHead(status, { "content-type": "application/json" });
      res.end(
        JSON.stringify({ error: { message, type: "server_error", param: null, code: null } }),
      );
      return;
    }
    if (!req.body) {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          error: {
            message: "the body is not a JSON object",
            type: "invalid_request_error",
            param: null,
            code: null,
          },
        }),
      );
      return;
    }
    const { events: list, final } = events(req.body);
    if (req.body.stream !== true) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(final));
      return;
    }
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
    });
    list.forEach((event, sequence) => {
      const data = { type: event.type, sequence_number: sequence, ...event };
      res.write(`event: ${String(event.type)}\ndata: ${JSON.stringify(data)}\n\n`);
    });
    if (options.doneSentinel) res.write("data: [DONE]\n\n");
    res.end();
  }

  const server = await serveJson((request, res) => {
    requests.push(request);
    answer(request, res);
  });

  return {
    url: `${server.origin}/v1`,
    requests,
    responseBodies: () =>
      requests
        .filter((r) => r.method === "POST" && /\/responses\/?$/.test(r.path) && r.body)
        .map((r) => r.body as Json),
    failNext: (status, message) => {
      failure = { status, message };
    },
    reset: () => {
      requests.length = 0;
    },
    close: () => server.close(),
  };
}
