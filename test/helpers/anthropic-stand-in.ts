/**
 * A local stand-in for the Anthropic Messages API: `POST {url}/messages` on 127.0.0.1, streamed
 * as the real API streams (named SSE events, `ping`s, `message_start` … `message_stop`), and
 * refusing, with the API's error shape and messages, the requests the real API refuses
 * (reference §2): no key or version header, no `max_tokens`, a `tool_use` not answered in the
 * next message or answered after text, empty text, more than four breakpoints, a breakpoint on
 * thinking, a thinking block it did not issue or that was changed; and, stricter than the API
 * (which would merge them), two turns of one role in a row, since Spindle merges them itself.
 *
 * Its answer, from the last user message:
 * - it holds `tool_result` blocks: a text `Tool NAME returned: OUTPUT` for each;
 * - its last text contains `call NAME` (optionally followed by a JSON object, the arguments) and
 *   NAME is one of the request's tools: a `tool_use` of it, its input streamed in pieces;
 * - otherwise a text `Echo: TEXT`.
 * With `thinking` enabled, a thinking block (signed) comes first.
 *
 * Prompt caching is simulated: each breakpoint writes the prefix up to it (tools, system,
 * messages, in that order, without the `cache_control` markers); a request reads the longest
 * written prefix that ends at one of its breakpoints or at most 20 blocks before one. Tokens are
 * bytes / 4. Tests may script answers of their own (`script`), taking precedence once each.
 */
import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { asRecord, cacheAlive, type Json, serveJson } from "./json-stand-in.ts";

export interface AnthropicRequest {
  path: string;
  headers: IncomingMessage["headers"];
  body: Json | undefined;
}

/** Answers one request in place of the stand-in's own logic. */
export type ScriptedAnswer = (req: AnthropicRequest, res: ServerResponse) => void;

export interface AnthropicStandIn {
  /** The API root, `http://127.0.0.1:PORT/v1` (for `ANTHROPIC_BASE_URL`). */
  url: string;
  /** Every request received, in order. */
  requests: AnthropicRequest[];
  /** The next requests are answered by these, in order, before the stand-in's own logic. */
  script(...answers: ScriptedAnswer[]): void;
  /** Resolves when the connection of the `n`th request (from 0) closes. */
  closed(n: number): Promise<void>;
  reset(): void;
  close(): Promise<void>;
}

/** Characters per streamed text or input piece. */
const PIECE = 7;
const LOOKBACK_BLOCKS = 20;
const CALL_PATTERN = /\bcall\s+([A-Za-z0-9_-]{1,64})(?:\s+(\{[\s\S]*\}))?/;

/** One SSE event as the API frames it: `event:` is the payload's `type`. */
export function sse(payload: Json & { type: string }): string {
  return `event: ${payload.type}\ndata: ${JSON.stringify(payload)}\n\n`;
}

/** The API's error body. */
export function errorBody(type: string, message: string): string {
  return JSON.stringify({ type: "error", error: { type, message } });
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

function records(value: unknown): Json[] {
  return Array.isArray(value) ? value.map(asRecord).filter((v): v is Json => v !== undefined) : [];
}

function pieces(text: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += PIECE) out.push(text.slice(i, i + PIECE));
  return out;
}

function tokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text, "utf8") / 4);
}

function withoutCacheControl(block: Json): Json {
  const { cache_control: _, ...rest } = block;
  return rest;
}

interface Answer {
  thinking?: string;
  text?: string;
  call?: { name: string; input: string };
}

/**
 * `port`: 0 (the default) takes any free one. `cacheTtlMs`: the simulated prompt cache's
 * lifetime, refreshed by each read (unset: it never expires).
 */
export async function startAnthropicStandIn(
  options: { port?: number; cacheTtlMs?: number } = {},
): Promise<AnthropicStandIn> {
  const requests: AnthropicRequest[] = [];
  const connections: Promise<void>[] = [];
  const scripted: ScriptedAnswer[] = [];
  /** Prefix digest → its token count and last use, for every prefix a breakpoint wrote. */
  const cache = new Map<string, { tokens: number; atMs: number }>();
  /** Signature → the thinking it signed. */
  const signed = new Map<string, string>();
  let counter = 0;

  function validate(req: AnthropicRequest): Json {
    if (!req.headers["x-api-key"]) {
      throw new Refusal(401, "authentication_error", "x-api-key header is required");
    }
    if (req.headers["anthropic-version"] !== "2023-06-01") {
      throw new Refusal(400, "invalid_request_error", "anthropic-version header is required");
    }
    const body = req.body;
    if (!body) throw new Refusal(400, "invalid_request_error", "the body is not a JSON object");
    if (typeof body.max_tokens !== "number") {
      throw new Refusal(400, "invalid_request_error", "max_tokens: Field required");
    }
    const thinking = asRecord(body.thinking);
    if (thinking?.type === "enabled") {
      const budget = Number(thinking.budget_tokens);
      if (!(budget >= 1024 && budget < body.max_tokens)) {
        throw new Refusal(
          400,
          "invalid_request_error",
          "`max_tokens` must be greater than `thinking.budget_tokens`",
        );
      }
    }
    const messages = records(body.messages);
    if (messages.length === 0) throw new Refusal(400, "invalid_request_error", "messages: empty");
    let breakpoints = records(body.tools).filter((t) => t.cache_control).length;
    breakpoints += records(body.system).filter((b) => b.cache_control).length;
    messages.forEach((message, m) => {
      const blocks = records(message.content);
      const previous = messages[m - 1];
      if (previous?.role === message.role) {
        // The API would merge them; Spindle is meant to send them merged already.
        throw new Refusal(
          400,
          "invalid_request_error",
          `messages.${m}: two ${message.role} turns in a row`,
        );
      }
      const calls = records(previous?.content)
        .filter((b) => b.type === "tool_use")
        .map((b) => String(b.id));
      const results = blocks
        .filter((b) => b.type === "tool_result")
        .map((b) => String(b.tool_use_id));
      const missing = calls.filter((id) => !results.includes(id));
      if (missing.length > 0) {
        throw new Refusal(
          400,
          "invalid_request_error",
          `messages.${m}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ")}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
        );
      }
      const unexpected = results.filter((id) => !calls.includes(id));
      if (unexpected.length > 0) {
        throw new Refusal(
          400,
          "invalid_request_error",
          `messages.${m}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${unexpected.join(", ")}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`,
        );
      }
      const firstOther = blocks.findIndex((b) => b.type !== "tool_result");
      if (firstOther !== -1 && blocks.slice(firstOther).some((b) => b.type === "tool_result")) {
        throw new Refusal(
          400,
          "invalid_request_error",
          `messages.${m}: tool_result blocks must come first`,
        );
      }
      blocks.forEach((block, b) => {
        if (block.cache_control) breakpoints++;
        if (block.type === "text" && !String(block.text ?? "").trim()) {
          throw new Refusal(
            400,
            "invalid_request_error",
            `messages.${m}.content.${b}.text: text content blocks must contain non-whitespace text`,
          );
        }
        if (block.type === "thinking" || block.type === "redacted_thinking") {
          if (block.cache_control) {
            throw new Refusal(
              400,
              "invalid_request_error",
              `messages.${m}.content.${b}: cache_control cannot be set for thinking blocks`,
            );
          }
          if (block.type === "thinking" && signed.get(String(block.signature)) !== block.thinking) {
            throw new Refusal(
              400,
              "invalid_request_error",
              `messages.${m}.content.${b}: Invalid \`signature\` in \`thinking\` block`,
            );
          }
        }
      });
    });
    if (breakpoints > 4) {
      throw new Refusal(
        400,
        "invalid_request_error",
        `A maximum of 4 blocks with cache_control may be provided. Found ${breakpoints}.`,
      );
    }
    return body;
  }

  /** The prompt's blocks in cache order, and which of them are breakpoints. */
  function cacheBlocks(body: Json): { text: string; breakpoint: boolean }[] {
    const out: { text: string; breakpoint: boolean }[] = [];
    const add = (block: Json, prefix = "") =>
      out.push({
        text: prefix + JSON.stringify(withoutCacheControl(block)),
        breakpoint: Boolean(block.cache_control),
      });
    for (const tool of records(body.tools)) add(tool);
    for (const block of records(body.system)) add(block);
    for (const message of records(body.messages)) {
      for (const block of records(message.content)) add(block, `${String(message.role)}:`);
    }
    return out;
  }

  function usageFor(body: Json): Json {
    const blocks = cacheBlocks(body);
    const digests: string[] = [];
    const counts: number[] = [];
    const hash = createHash("sha256");
    let total = 0;
    for (const block of blocks) {
      hash.update(block.text);
      digests.push(hash.copy().digest("hex"));
      total += tokens(block.text);
      counts.push(total);
    }
    const marks = blocks.flatMap((b, i) => (b.breakpoint ? [i] : []));
    let read = 0;
    for (const mark of marks) {
      for (let i = mark; i >= Math.max(0, mark - LOOKBACK_BLOCKS); i--) {
        const hit = cache.get(digests[i] as string);
        if (hit !== undefined && cacheAlive(hit.atMs, options.cacheTtlMs)) {
          read = Math.max(read, hit.tokens);
          hit.atMs = Date.now();
          break;
        }
      }
    }
    const cachedUpTo = marks.length > 0 ? (counts[marks.at(-1) as number] as number) : 0;
    for (const mark of marks) {
      cache.set(digests[mark] as string, { tokens: counts[mark] as number, atMs: Date.now() });
    }
    const creation = Math.max(0, cachedUpTo - read);
    return {
      input_tokens: total - read - creation,
      cache_creation_input_tokens: creation,
      cache_read_input_tokens: read,
    };
  }

  function decide(body: Json): Answer {
    const messages = records(body.messages);
    const last = messages.at(-1);
    const blocks = records(last?.content);
    const answer: Answer = {};
    if (asRecord(body.thinking)?.type === "enabled") answer.thinking = "Let me think about it.";
    const results = blocks.filter((b) => b.type === "tool_result");
    if (results.length > 0) {
      const names = new Map(
        records(messages.at(-2)?.content)
          .filter((b) => b.type === "tool_use")
          .map((b) => [String(b.id), String(b.name)]),
      );
      answer.text = results
        .map((r) => {
          const content =
            typeof r.content === "string"
              ? r.content
              : records(r.content)
                  .map((c) => (c.type === "text" ? String(c.text) : `[${String(c.type)}]`))
                  .join("");
          return `Tool ${names.get(String(r.tool_use_id)) ?? "?"} returned: ${content}`;
        })
        .join("\n");
      return answer;
    }
    const text = String(blocks.filter((b) => b.type === "text").at(-1)?.text ?? "");
    const asked = CALL_PATTERN.exec(text);
    const offered = new Set(records(body.tools).map((t) => String(t.name)));
    if (asked?.[1] && offered.has(asked[1])) {
      let input = "{}";
      try {
        input = JSON.stringify(JSON.parse(asked[2] ?? "{}"));
      } catch {
        // not JSON: no arguments
      }
      answer.call = { name: asked[1], input };
      return answer;
    }
    answer.text = `Echo: ${text || "(no user message)"}`;
    return answer;
  }

  function stream(body: Json, res: ServerResponse): void {
    const answer = decide(body);
    const usage = usageFor(body);
    const id = `msg_standin${String(++counter).padStart(4, "0")}`;
    const events: (Json & { type: string })[] = [];
    events.push({
      type: "message_start",
      message: {
        id,
        type: "message",
        role: "assistant",
        model: body.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usage, output_tokens: 1 },
      },
    });
    let index = 0;
    let output = 0;
    if (answer.thinking !== undefined) {
      const signature = `sig_${createHash("sha256").update(`${id}:${answer.thinking}`).digest("base64")}`;
      signed.set(signature, answer.thinking);
      events.push({
        type: "content_block_start",
        index,
        content_block: { type: "thinking", thinking: "", signature: "" },
      });
      for (const piece of pieces(answer.thinking)) {
        events.push({
          type: "content_block_delta",
          index,
          delta: { type: "thinking_delta", thinking: piece },
        });
      }
      events.push({
        type: "content_block_delta",
        index,
        delta: { type: "signature_delta", signature },
      });
      events.push({ type: "content_block_stop", index });
      output += tokens(answer.thinking);
      index++;
    }
    if (answer.text !== undefined) {
      events.push({
        type: "content_block_start",
        index,
        content_block: { type: "text", text: "" },
      });
      events.push({ type: "ping" });
      for (const piece of pieces(answer.text)) {
        events.push({
          type: "content_block_delta",
          index,
          delta: { type: "text_delta", text: piece },
        });
      }
      events.push({ type: "content_block_stop", index });
      output += tokens(answer.text);
      index++;
    }
    if (answer.call) {
      events.push({
        type: "content_block_start",
        index,
        content_block: {
          type: "tool_use",
          id: `toolu_standin${counter}`,
          name: answer.call.name,
          input: {},
        },
      });
      // An input of `{}` streams as one empty piece, as the API does for a call without arguments.
      const inputPieces = answer.call.input === "{}" ? [""] : pieces(answer.call.input);
      for (const piece of inputPieces) {
        events.push({
          type: "content_block_delta",
          index,
          delta: { type: "input_json_delta", partial_json: piece },
        });
      }
      events.push({ type: "content_block_stop", index });
      output += tokens(answer.call.name + answer.call.input);
    }
    events.push({
      type: "message_delta",
      delta: { stop_reason: answer.call ? "tool_use" : "end_turn", stop_sequence: null },
      usage: { ...usage, output_tokens: output },
    });
    events.push({ type: "message_stop" });
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
    });
    for (const event of events) res.write(sse(event));
    res.end();
  }

  function answer(req: AnthropicRequest, res: ServerResponse): void {
    const next = scripted.shift();
    if (next) {
      next(req, res);
      return;
    }
    try {
      if (!/\/messages\/?$/.test(req.path))
        throw new Refusal(404, "not_found_error", `no route ${req.path}`);
      stream(validate(req), res);
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      res.writeHead(error.status, { "content-type": "application/json" });
      res.end(errorBody(error.type, error.message));
    }
  }

  const server = await serveJson(({ path, headers, body }, res) => {
    const recorded: AnthropicRequest = { path, headers, body };
    requests.push(recorded);
    connections.push(new Promise((resolve) => res.on("close", () => resolve())));
    answer(recorded, res);
  }, options.port);

  return {
    url: `${server.origin}/v1`,
    requests,
    script: (...answers) => {
      scripted.push(...answers);
    },
    closed: (n) => connections[n] ?? Promise.reject(new Error(`no request ${n}`)),
    reset: () => {
      requests.length = 0;
      connections.length = 0;
      scripted.length = 0;
      cache.clear();
    },
    close: () => server.close(),
  };
}
