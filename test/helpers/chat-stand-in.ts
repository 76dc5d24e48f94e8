/**
 * A local stand-in for a Chat Completions host: `POST {url}/chat/completions` on 127.0.0.1,
 * streaming chunks as OpenAI frames them: data-only SSE, every chunk a full
 * `chat.completion.chunk` (`id`, `object`, `created`, `model`, `system_fingerprint`, `choices`
 * with `index`, `delta`, `logprobs`, `finish_reason`, and `usage: null` when usage was asked
 * for), the first delta `{role, content: "", refusal: null}`, a tool call's `id`, `type` and
 * `name` in its first fragment and then only `arguments`, a `finish_reason` chunk with an
 * empty delta, the usage chunk (`choices: []`) when `stream_options.include_usage` is set, and
 * `data: [DONE]`.
 *
 * Its answer to a request, from the request's `messages`:
 * - `tool` messages after the last user message: text quoting each, `Tool NAME returned: OUTPUT`;
 * - last user text containing `call NAME` (optionally followed by a JSON object), NAME one of
 *   the request's tools: a tool call of it (`{}` without JSON), its arguments split into
 *   fragments;
 * - otherwise the text `Echo: TEXT`.
 *
 * A test may script the next answers instead (`script`): an HTTP error, or raw SSE text written
 * as given (then the connection ends, is reset, or is held open). Every request is recorded.
 */
import type { ServerResponse } from "node:http";
import { isContextualUserMessageContent } from "../../shared/context/classify.ts";
import { asRecord, cacheAlive, type Json, serveJson } from "./json-stand-in.ts";

export interface ChatStandInRequest {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The body parsed as JSON. */
  body: Json;
}

/** A scripted answer to one request. */
export type ChatScript =
  | { status: number; body: unknown; headers?: Record<string, string> }
  /** SSE text, written piece by piece; then the body ends (`end`), the socket is destroyed
   * (`reset`), or the connection is left open until the client goes away (`hang`). */
  | { sse: string[]; ending?: "end" | "reset" | "hang" };

export interface ChatStandIn {
  /** The API root, `http://127.0.0.1:PORT/v1`. */
  url: string;
  requests: ChatStandInRequest[];
  /** Answers the next requests with these, in order, before answering by the rules again. */
  script(...answers: ChatScript[]): void;
  /** Resolves when the connection of request `n` (0-based) has closed. */
  closed(n: number): Promise<void>;
  reset(): void;
  close(): Promise<void>;
}

/** One SSE frame of a chunk (or of any JSON, e.g. an error). */
export function sse(data: unknown): string {
  return `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;
}

export const DONE = "data: [DONE]\n\n";

/** A chunk as OpenAI sends it: choice 0 with `delta` and `finish_reason`. */
export function chunk(
  delta: Json,
  finishReason: string | null = null,
  extra: Json = { usage: null },
): Json {
  return {
    id: "chatcmpl-standin",
    object: "chat.completion.chunk",
    created: 1_800_000_000,
    model: "stand-in",
    system_fingerprint: "fp_standin",
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...extra,
  };
}

/** The usage chunk that ends a stream asked for `include_usage`. */
export function usageChunk(usage: Json): Json {
  return { ...chunk({}), choices: [], usage };
}

export function usage(prompt: number, completion: number, cached = 0, reasoning = 0): Json {
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: reasoning,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((p) => {
      const part = asRecord(p);
      if (part?.type === "text") return String(part.text);
      return part?.type === "image_url" ? "[image]" : "";
    })
    .join("");
}

function isRealUserMessage(message: Json): boolean {
  if (message.role !== "user") return false;
  const text = textOf(message.content);
  return !isContextualUserMessageContent([{ type: "input_text", text }]);
}

type Answer = { text: string } | { call: { name: string; arguments: string } };

/** What the stand-in answers to `body` (see the file comment). */
export function decide(body: Json): Answer {
  const messages = Array.isArray(body.messages)
    ? body.messages.map(asRecord).filter((m): m is Json => m !== undefined)
    : [];
  const lastUser = messages.findLastIndex(isRealUserMessage);
  const after = messages.slice(lastUser + 1);
  const names = new Map<string, string>();
  for (const m of after) {
    for (const c of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
      const call = asRecord(c);
      names.set(String(call?.id), String(asRecord(call?.function)?.name));
    }
  }
  const outputs = after.filter((m) => m.role === "tool");
  if (outputs.length > 0) {
    return {
      text: outputs
        .map(
          (o) => `Tool ${names.get(String(o.tool_call_id)) ?? "?"} returned: ${textOf(o.content)}`,
        )
        .join("\n"),
    };
  }
  const userText = lastUser >= 0 ? textOf((messages[lastUser] as Json).content).trim() : "";
  const offered = new Set(
    (Array.isArray(body.tools) ? body.tools : []).map((t) => asRecord(asRecord(t)?.function)?.name),
  );
  const asked = /\bcall\s+([A-Za-z0-9_-]{1,64})(?:\s+(\{[\s\S]*\}))?/.exec(userText);
  if (asked?.[1] && offered.has(asked[1])) {
    let args = "{}";
    try {
      if (asked[2]) args = JSON.stringify(JSON.parse(asked[2]));
    } catch {
      // not JSON: no arguments
    }
    return { call: { name: asked[1], arguments: args } };
  }
  return { text: `Echo: ${userText || "(no user message)"}` };
}

function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

export async function startChatStandIn(
  /**
   * `port`: 0 (the default) takes any free one. `cacheTtlMs`: the simulated prompt cache's
   * lifetime (unset: it never expires).
   */
  options: { deltaChars?: number; port?: number; cacheTtlMs?: number } = {},
): Promise<ChatStandIn> {
  const deltaChars = options.deltaChars ?? 6;
  const requests: ChatStandInRequest[] = [];
  const scripts: ChatScript[] = [];
  const closings: Promise<void>[] = [];
  let calls = 0;
  let previousPrompt = "";
  let previousAt = 0;

  /** The frames of a rule-based answer. */
  function answerFrames(body: Json): string[] {
    const answer = decide(body);
    const withUsage = asRecord(body.stream_options)?.include_usage === true;
    const extra = withUsage ? { usage: null } : {};
    const frames = [sse(chunk({ role: "assistant", content: "", refusal: null }, null, extra))];
    let completion: string;
    if ("text" in answer) {
      completion = answer.text;
      for (const piece of pieces(answer.text, deltaChars)) {
        frames.push(sse(chunk({ content: piece }, null, extra)));
      }
      frames.push(sse(chunk({}, "stop", extra)));
    } else {
      const { name, arguments: args } = answer.call;
      completion = name + args;
      const id = `call_standin${String(++calls).padStart(4, "0")}`;
      frames.push(
        sse(
          chunk(
            {
              tool_calls: [{ index: 0, id, type: "function", function: { name, arguments: "" } }],
            },
            null,
            extra,
          ),
        ),
      );
      for (const piece of pieces(args, deltaChars)) {
        frames.push(
          sse(chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] }, null, extra)),
        );
      }
      frames.push(sse(chunk({}, "tool_calls", extra)));
    }
    if (withUsage) {
      // Cached: the prefix this request shares with the previous one, as whole tokens.
      const prompt = JSON.stringify([body.messages, body.tools]);
      let common = 0;
      const cached = cacheAlive(previousAt, options.cacheTtlMs) ? previousPrompt : "";
      while (common < Math.min(prompt.length, cached.length)) {
        if (prompt.charCodeAt(common) !== cached.charCodeAt(common)) break;
        common++;
      }
      previousPrompt = prompt;
      previousAt = Date.now();
      const promptTokens = Math.ceil(prompt.length / 4);
      frames.push(
        sse(
          usageChunk(usage(promptTokens, Math.ceil(completion.length / 4), Math.floor(common / 4))),
        ),
      );
    }
    frames.push(DONE);
    return frames;
  }

  function write(res: ServerResponse, script: ChatScript): void {
    if ("status" in script) {
      res.writeHead(script.status, { "content-type": "application/json", ...script.headers });
      res.end(JSON.stringify(script.body));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    for (const piece of script.sse) res.write(piece);
    // Destroyed once what was written has left, so the client reads it before the cut.
    if (script.ending === "reset") res.write("", () => res.socket?.destroy());
    else if (script.ending !== "hang") res.end();
  }

  const server = await serveJson(({ method, path, headers, body }, res) => {
    closings.push(new Promise((resolve) => res.on("close", () => resolve())));
    if (method !== "POST" || path !== "/v1/chat/completions" || !body) {
      const message = body ? `no route ${method} ${path}` : "the body is not JSON";
      write(res, {
        status: body ? 404 : 400,
        body: { error: { message, type: "invalid_request_error", param: null, code: null } },
      });
      return;
    }
    requests.push({ path, headers, body });
    write(res, scripts.shift() ?? { sse: answerFrames(body) });
  }, options.port);
  return {
    url: `${server.origin}/v1`,
    requests,
    script: (...answers) => {
      scripts.push(...answers);
    },
    closed: (n) => closings[n] ?? Promise.reject(new Error(`no request ${n}`)),
    reset: () => {
      requests.length = 0;
      scripts.length = 0;
      closings.length = 0;
      previousPrompt = "";
    },
    close: () => server.close(),
  };
}
