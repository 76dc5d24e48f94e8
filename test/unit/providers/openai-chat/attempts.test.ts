import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ProviderError } from "../../../../shared/providers/index.ts";
import {
  type ChatStandIn,
  chunk,
  DONE,
  sse,
  startChatStandIn,
} from "../../../helpers/chat-stand-in.ts";
import { deltasOf, drain, harness, itemsOf, LOOKUP, prompt, user } from "./harness.ts";

let standIn: ChatStandIn;
beforeAll(async () => {
  standIn = await startChatStandIn();
});
afterAll(() => standIn.close());
beforeEach(() => standIn.reset());

const apiError = (message: string, type = "invalid_request_error") => ({
  error: { message, type, param: null, code: null },
});
const echo = [{ type: "output_text" as const, text: "Echo: hi" }];

describe("openai-chat retries", () => {
  it("waits the Retry-After seconds after a 429, then succeeds", async () => {
    standIn.script({
      status: 429,
      body: apiError("Rate limit reached for requests", "requests"),
      headers: { "retry-after": "3" },
    });
    const h = harness(standIn.url);
    const { events, error } = await drain(h.client);
    expect(error).toBeUndefined();
    expect(h.sleeps).toEqual([3000]);
    expect(standIn.requests).toHaveLength(2);
    expect(itemsOf(events)).toEqual([{ type: "message", role: "assistant", content: echo }]);
  });

  it("retries an overloaded host (503) with jittered backoff, then succeeds", async () => {
    standIn.script(
      { status: 503, body: apiError("The server is overloaded", "server_error") },
      { status: 500, body: apiError("internal error", "server_error") },
    );
    const h = harness(standIn.url);
    const { events, error } = await drain(h.client);
    expect(error).toBeUndefined();
    // Full jitter at random() = 0.5: half of 500 ms, then half of 1000 ms.
    expect(h.sleeps).toEqual([250, 500]);
    expect(standIn.requests).toHaveLength(3);
    expect(events.at(-1)?.type).toBe("completed");
  });

  it("fails a 400 at once with its status and the host's message", async () => {
    standIn.script({
      status: 400,
      body: apiError(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'.",
      ),
    });
    const h = harness(standIn.url);
    const { events, error } = await drain(h.client);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).status).toBe(400);
    expect((error as Error).message).toBe(
      "openai-chat: HTTP 400: An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'.",
    );
    expect(events).toEqual([]);
    expect(h.sleeps).toEqual([]);
    expect(standIn.requests).toHaveLength(1);
  });

  it("retries a stream cut mid tool call before anything was yielded, yielding only the whole call", async () => {
    standIn.script({
      sse: [
        sse(chunk({ role: "assistant", content: null })),
        sse(
          chunk({
            tool_calls: [{ index: 0, id: "cut", function: { name: "lookup", arguments: '{"q' } }],
          }),
        ),
      ],
      ending: "reset",
    });
    const h = harness(standIn.url);
    const { events, error } = await drain(
      h.client,
      prompt([user("call lookup {}")], { tools: [LOOKUP] }),
    );
    expect(error).toBeUndefined();
    expect(standIn.requests).toHaveLength(2);
    expect(itemsOf(events)).toEqual([
      { type: "function_call", name: "lookup", arguments: "{}", call_id: "call_standin0001" },
    ]);
  });

  it("fails a stream cut mid-item after text was shown: no half item, no retry", async () => {
    standIn.script({
      sse: [
        sse(chunk({ content: "Looking" })),
        sse(
          chunk({
            tool_calls: [{ index: 0, id: "cut", function: { name: "lookup", arguments: '{"q' } }],
          }),
        ),
      ],
      ending: "reset",
    });
    const { events, error } = await drain(harness(standIn.url).client);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("stream ended before the response completed");
    expect(events).toEqual([{ type: "output_text_delta", delta: "Looking" }]);
    expect(standIn.requests).toHaveLength(1);
  });

  it("gives up after maxAttempts with the last status and message", async () => {
    standIn.script(
      { status: 502, body: apiError("bad gateway 1", "server_error") },
      { status: 502, body: apiError("bad gateway 2", "server_error") },
    );
    const { error } = await drain(harness(standIn.url, { maxAttempts: 2 }).client);
    expect((error as Error).message).toBe("openai-chat: HTTP 502: bad gateway 2");
  });
});

describe("openai-chat abort", () => {
  it("stops promptly mid-stream when the caller aborts, with an abort error, closing the connection", async () => {
    standIn.script({ sse: [sse(chunk({ content: "Hel" }))], ending: "hang" });
    const controller = new AbortController();
    const started = performance.now();
    const { events, error } = await drain(
      harness(standIn.url).client,
      prompt(),
      controller.signal,
      () => controller.abort(),
    );
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(deltasOf(events)).toEqual(["Hel"]);
    expect(error).not.toBeInstanceOf(ProviderError);
    expect((error as Error).name).toBe("AbortError");
    await standIn.closed(0);
    expect(standIn.requests).toHaveLength(1);
  });

  it("rejects at once when the signal is already aborted, sending nothing", async () => {
    const { error } = await drain(harness(standIn.url).client, prompt(), AbortSignal.abort());
    expect((error as Error).name).toBe("AbortError");
    expect(standIn.requests).toHaveLength(0);
  });

  it("fails with a timeout ProviderError when the host holds the stream past timeoutMs", async () => {
    standIn.script({ sse: [sse(chunk({ content: "Hel" }))], ending: "hang" });
    const { error } = await drain(harness(standIn.url, { timeoutMs: 200 }).client);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("timed out after 200 ms");
  });
});

describe("openai-chat end of stream", () => {
  it("ignores what follows data: [DONE]", async () => {
    standIn.script({
      sse: [sse(chunk({ content: "One" })), sse(chunk({}, "stop")), DONE, "data: {not json\n\n"],
    });
    const { events, error } = await drain(harness(standIn.url).client);
    expect(error).toBeUndefined();
    expect(deltasOf(events)).toEqual(["One"]);
  });
});
