import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AiRunner } from "../../../shared/providers/index.ts";
import { json, newThreadId, post } from "../helpers/api.ts";
import { createThread, type Turn, text, turn } from "../helpers/turns.ts";

// `wai-test` is the Workers AI model `@cf/qwen/qwen3.8-27b` (vitest.workers.config.ts); the
// binding has no local simulation, so each test puts a stand-in `AI` on env.

type Json = Record<string, unknown>;
const withAi = env as unknown as { AI?: AiRunner };

const sse = (...chunks: Json[]) =>
  new Blob([
    `${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("")}data: [DONE]\n\n`,
  ]).stream();

/** A stand-in binding answering the n-th call (1-based) with `answer(n, inputs)`. */
function binding(answer: (n: number, inputs: Json) => unknown) {
  const calls: { model: string; inputs: Json; options: Json }[] = [];
  withAi.AI = {
    run: async (model, inputs, options) => {
      calls.push({ model, inputs, options: (options ?? {}) as Json });
      return answer(calls.length, inputs);
    },
  };
  return calls;
}

beforeEach(() => {
  delete withAi.AI;
});
afterEach(() => {
  delete withAi.AI;
});

describe("the workers-ai provider", () => {
  it("runs a turn through the AI binding, with the thread as session affinity", async () => {
    const id = newThreadId();
    const calls = binding(() =>
      sse(
        { choices: [{ index: 0, delta: { role: "assistant", content: "From Workers AI" } }] },
        {
          choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
          usage: {
            prompt_tokens: 80,
            completion_tokens: 3,
            prompt_tokens_details: { cached_tokens: 64 },
          },
        },
      ),
    );
    await createThread(id, { model: "wai-test" });
    const done = await turn(id, "hi");
    expect(done.status).toBe("completed");
    expect(text(done.items.at(-1))).toBe("From Workers AI");
    expect(calls[0]?.model).toBe("@cf/qwen/qwen3.8-27b");
    expect(calls[0]?.options.extraHeaders).toEqual({ "x-session-affinity": id });
    expect(((calls[0]?.inputs.messages ?? []) as Json[]).at(-1)).toEqual({
      role: "user",
      content: "hi",
    });
  });

  it("a tool call the model streams pauses the turn; its output resumes it, and a reused call id is renamed", async () => {
    const id = newThreadId();
    const call = (callId: string) =>
      sse(
        {
          choices: [
            {
              index: 0,
              delta: {
                tool_calls: [
                  {
                    index: 0,
                    id: callId,
                    type: "function",
                    function: { name: "lookup", arguments: '{"q":' },
                  },
                ],
              },
            },
          ],
        },
        {
          choices: [
            { index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"x"}' } }] } },
          ],
        },
        { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] },
      );
    const answer = (t: string) =>
      sse({ choices: [{ index: 0, delta: { content: t }, finish_reason: "stop" }] });
    // Workers AI numbers calls per response: the second turn's call gets the first one's id again.
    const calls = binding((n) =>
      n === 1 || n === 3 ? call("chatcmpl-tool-0") : answer(`answer ${n}`),
    );
    await createThread(id, {
      model: "wai-test",
      tools: [{ name: "lookup", description: "find things", parameters: { type: "object" } }],
    });
    for (const expected of ["chatcmpl-tool-0", "chatcmpl-tool-0_2"]) {
      const paused = await turn(id, "look up x");
      expect(paused.status).toBe("requires_action");
      expect(paused.pending_calls.map((c) => c.call_id)).toEqual([expected]);
      const done = await json<Turn>(
        await post(`/v1/threads/${id}/turns/${paused.id}/outputs`, {
          items: [{ type: "function_call_output", call_id: expected, output: "42 results" }],
        }),
      );
      expect(done.status).toBe("completed");
    }
    // The last request holds both calls, each paired with its own output.
    const messages = (calls[3]?.inputs.messages ?? []) as Json[];
    const ids = messages.flatMap((m) => ((m.tool_calls ?? []) as Json[]).map((c) => c.id));
    const answered = messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id);
    expect(ids).toEqual(["chatcmpl-tool-0", "chatcmpl-tool-0_2"]);
    expect(answered).toEqual(ids);
  });

  it("is not served without the binding: choosing its model is 400", async () => {
    const res = await post("/v1/threads", { id: newThreadId(), model: "wai-test" });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: "invalid_request" });
  });
});
