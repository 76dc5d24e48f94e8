/**
 * The Workers AI binding (`env.AI.run`) as a `fetch`: the `workers-ai` provider is the
 * `openai-chat` client over this, so the Chat Completions mapping, the chunk parser and the
 * attempt loop (retries, timeouts, aborts) are the same code for both. Chat-shaped models take
 * the Chat Completions body as their inputs and stream its chunks as SSE; the older models'
 * native answers are rewritten as such chunks (reference providers.md §3.2–3.3).
 */
import { isPlainObject } from "../../protocol/index.ts";
import type { FetchFn } from "../http/attempts.ts";
import { asChatStream, chatCallOf, chatChunkOf, isNativeAnswer } from "./native-answers.ts";

/** The part of the `AI` binding the provider uses; the Durable Object passes `env.AI` in. */
export interface AiRunner {
  run(
    model: string,
    inputs: Record<string, unknown>,
    options?: {
      signal?: AbortSignal;
      extraHeaders?: Record<string, string>;
      gateway?: { id: string; skipCache?: boolean };
    },
  ): Promise<unknown>;
}

export interface BindingFetchOptions {
  /** The model's Workers AI name (`@cf/…`): the binding takes it beside the inputs. */
  model: string;
  /** Sent as `x-session-affinity`, so a thread's requests reach the replica holding its prefix. */
  sessionAffinity?: string;
  /** An AI Gateway to route through; its response cache is always skipped (a retry is a new sample). */
  gatewayId?: string;
}

/**
 * The binding's errors carry no HTTP status, only an internal code at the start of the
 * message (`"3040: Capacity temporarily exceeded"`); these are the documented statuses, so the
 * attempt loop retries what is worth retrying (429, 5xx) and fails the rest at once.
 */
const STATUS_OF_CODE: Readonly<Record<string, number>> = {
  "3040": 429,
  "3036": 429,
  "3007": 408,
  "3008": 408,
  "3006": 413,
  "5007": 400,
  "5004": 400,
  "3003": 400,
  "3042": 404,
  "5016": 403,
  "5018": 403,
  "3023": 403,
  "3041": 403,
};

export function bindingFetch(ai: AiRunner, options: BindingFetchOptions): FetchFn {
  return async (_url, init) => {
    const { model: _sent, ...inputs } = JSON.parse(bodyText(init.body)) as Record<string, unknown>;
    let answer: unknown;
    try {
      answer = await ai.run(options.model, inputs, {
        ...(init.signal ? { signal: init.signal } : {}),
        ...(options.sessionAffinity
          ? { extraHeaders: { "x-session-affinity": options.sessionAffinity } }
          : {}),
        ...(options.gatewayId ? { gateway: { id: options.gatewayId, skipCache: true } } : {}),
      });
    } catch (error) {
      // An abort is the caller's, not the model's: it goes on as it came.
      if (init.signal?.aborted) throw error;
      return failure(error);
    }
    const body = answer instanceof ReadableStream ? asChatStream(answer) : chunkStream(answer);
    return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
  };
}

function bodyText(body: RequestInit["body"]): string {
  if (typeof body === "string") return body;
  if (body instanceof Uint8Array) return new TextDecoder().decode(body);
  throw new TypeError("the workers-ai request body must be JSON text or its bytes");
}

/** A thrown binding error as the HTTP answer it stands for, with the message the API gave. */
function failure(error: unknown): Response {
  const message = error instanceof Error ? error.message : String(error);
  const code = /^(\d{4}):/.exec(message)?.[1];
  const status = (code !== undefined ? STATUS_OF_CODE[code] : undefined) ?? 500;
  return new Response(JSON.stringify({ error: { message } }), {
    status,
    headers: { "content-type": "application/json" },
  });
}

interface CompletionOutput {
  choices?: {
    message?: {
      content?: string | null;
      reasoning_content?: string | null;
      tool_calls?: unknown[];
    };
    finish_reason?: string | null;
  }[];
  usage?: unknown;
}

/**
 * Some models answer a whole completion even when asked to stream (reference §3.3): it is
 * streamed as the one chunk it amounts to, then `[DONE]`, so the one chunk parser reads both.
 */
function chunkStream(answer: unknown): ReadableStream<Uint8Array> {
  const chunk = isNativeAnswer(answer) ? wholeNativeChunk(answer) : wholeChatChunk(answer);
  const text = `data: ${JSON.stringify(chunk)}\n\ndata: [DONE]\n\n`;
  return new Blob([text]).stream();
}

/** A whole native answer as one chunk: finished, since nothing follows it. */
function wholeNativeChunk(answer: Record<string, unknown>) {
  const chunk = chatChunkOf(answer);
  const [choice] = chunk.choices;
  choice.finish_reason ??= choice.delta.tool_calls ? "tool_calls" : "stop";
  return chunk;
}

/** A whole Chat completion as the one chunk it amounts to. */
function wholeChatChunk(answer: unknown) {
  const output = (typeof answer === "object" && answer !== null ? answer : {}) as CompletionOutput;
  const choice = output.choices?.[0];
  const message = choice?.message ?? {};
  const toolCalls = (message.tool_calls ?? []).filter(isPlainObject).map(chatCallOf);
  return {
    choices: [
      {
        index: 0,
        delta: {
          role: "assistant",
          ...(message.content ? { content: message.content } : {}),
          ...(message.reasoning_content ? { reasoning_content: message.reasoning_content } : {}),
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: choice?.finish_reason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
      },
    ],
    ...(output.usage === undefined ? {} : { usage: output.usage }),
  };
}
