import { describe, expect, it } from "vitest";
import { SseParser } from "../../../../shared/providers/http/sse.ts";
import {
  type AiRunner,
  bindingFetch,
} from "../../../../shared/providers/workers-ai/binding-fetch.ts";

/** A stand-in for `env.AI`: records each call and answers with `answer`. */
function fakeAi(answer: (inputs: Record<string, unknown>) => unknown) {
  const calls: { model: string; inputs: Record<string, unknown>; options: unknown }[] = [];
  const ai: AiRunner = {
    run: async (model, inputs, options) => {
      calls.push({ model, inputs, options });
      return answer(inputs);
    },
  };
  return { ai, calls };
}

const sse = (text: string) => new Blob([text]).stream();

async function frames(response: Response): Promise<string[]> {
  const parser = new SseParser();
  const bytes = new Uint8Array(await response.arrayBuffer());
  return [...parser.push(bytes), ...parser.end()].map((f) => f.data);
}

const BODY = JSON.stringify({
  model: "ignored",
  messages: [{ role: "user", content: "hi" }],
  stream: true,
});

describe("bindingFetch", () => {
  it("runs the binding's model with the body as inputs (without model), and streams its SSE back", async () => {
    const { ai, calls } = fakeAi(() => sse('data: {"choices":[]}\n\ndata: [DONE]\n\n'));
    const fetch = bindingFetch(ai, { model: "@cf/qwen/qwen3.8-27b", sessionAffinity: "thr_1" });
    const response = await fetch("workers-ai:", {
      method: "POST",
      body: new TextEncoder().encode(BODY),
    });
    expect(response.status).toBe(200);
    expect(await frames(response)).toEqual(['{"choices":[]}', "[DONE]"]);
    expect(calls[0]?.model).toBe("@cf/qwen/qwen3.8-27b");
    expect(calls[0]?.inputs).toEqual({ messages: [{ role: "user", content: "hi" }], stream: true });
    expect(calls[0]?.options).toEqual({ extraHeaders: { "x-session-affinity": "thr_1" } });
  });

  it("passes a Chat-shaped event whose data spans lines as the one event it is", async () => {
    const { ai } = fakeAi(() =>
      sse('data: {"choices":\ndata: []}\n\ndata: {"choices":[]}\n\ndata: [DONE]\n\n'),
    );
    const response = await bindingFetch(ai, { model: "m" })("workers-ai:", {
      method: "POST",
      body: BODY,
    });
    expect(await frames(response)).toEqual(['{"choices":\n[]}', '{"choices":[]}', "[DONE]"]);
  });

  it("routes through a gateway with its response cache skipped, and passes the abort signal", async () => {
    const { ai, calls } = fakeAi(() => sse("data: [DONE]\n\n"));
    const controller = new AbortController();
    await bindingFetch(ai, { model: "m", gatewayId: "gw" })("workers-ai:", {
      method: "POST",
      body: BODY,
      signal: controller.signal,
    });
    expect(calls[0]?.options).toEqual({
      signal: controller.signal,
      gateway: { id: "gw", skipCache: true },
    });
  });

  it("streams a whole completion, answered although a stream was asked, as one chunk", async () => {
    const { ai } = fakeAi(() => ({
      choices: [
        {
          message: {
            content: "Hello",
            tool_calls: [{ id: "call_1", function: { name: "lookup", arguments: { q: "x" } } }],
          },
          finish_reason: "tool_calls",
        },
      ],
      usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
    }));
    const response = await bindingFetch(ai, { model: "m" })("workers-ai:", {
      method: "POST",
      body: BODY,
    });
    const [chunk, done] = await frames(response);
    expect(done).toBe("[DONE]");
    expect(JSON.parse(chunk ?? "")).toEqual({
      choices: [
        {
          index: 0,
          delta: {
            role: "assistant",
            content: "Hello",
            tool_calls: [
              {
                index: 0,
                id: "call_1",
                type: "function",
                function: { name: "lookup", arguments: '{"q":"x"}' },
              },
            ],
          },
          finish_reason: "tool_calls",
        },
      ],
      usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
    });
  });

  it("answers the binding's coded errors with their statuses and messages; unknown ones as 500", async () => {
    const cases: [string, number][] = [
      ["3040: Capacity temporarily exceeded, please try again.", 429],
      ["3036: You have used up your daily free allocation", 429],
      ["5007: No such model", 400],
      ["3006: Request is too large", 413],
      ["something broke", 500],
    ];
    for (const [message, status] of cases) {
      const ai: AiRunner = { run: async () => Promise.reject(new Error(message)) };
      const response = await bindingFetch(ai, { model: "m" })("workers-ai:", {
        method: "POST",
        body: BODY,
      });
      expect(response.status).toBe(status);
      expect(await response.json()).toEqual({ error: { message } });
    }
  });

  it("lets the caller's abort through as it came", async () => {
    const controller = new AbortController();
    const reason = new DOMException("stop", "AbortError");
    const ai: AiRunner = {
      run: async () => {
        controller.abort(reason);
        throw reason;
      },
    };
    const fetch = bindingFetch(ai, { model: "m" });
    await expect(
      fetch("workers-ai:", { method: "POST", body: BODY, signal: controller.signal }),
    ).rejects.toBe(reason);
  });
});
