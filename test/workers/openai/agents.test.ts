/**
 * An agent written with `@openai/agents` runs against the OpenAI surface unchanged: its model
 * calls go to `/v1/responses` (the whole transcript each time, the SDK's default), its function
 * tool runs in the agent, and it reaches its final output.
 */
import { exports } from "cloudflare:workers";
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import * as zod from "zod";
import { parseResponseId } from "../../../shared/openai/index.ts";
import { api, BASE, DEV_KEY, json } from "../helpers/api.ts";

setTracingDisabled(true);

describe("@openai/agents against Spindle", () => {
  it("runs an agent with one function tool to its final output", async () => {
    const requests: string[] = [];
    const client = new OpenAI({
      apiKey: DEV_KEY,
      baseURL: `${BASE}/v1`,
      maxRetries: 0,
      fetch: (url, init) => {
        requests.push(String(url));
        return exports.default.fetch(url as string, init as RequestInit);
      },
    });
    const calls: string[] = [];
    const lookup = tool({
      name: "lookup",
      description: "Looks a word up in the glossary",
      parameters: zod.object({ word: zod.string() }),
      execute: async ({ word }) => {
        calls.push(word);
        return `${word}: a rod for twisting fibre into thread`;
      },
    });
    const agent = new Agent({
      name: "glossary",
      instructions: "Answer from the glossary.",
      model: "spindle-local",
      tools: [lookup],
    });
    const runner = new Runner({
      modelProvider: new OpenAIProvider({ openAIClient: client, useResponses: true }),
    });
    const result = await runner.run(agent, '/call lookup {"word":"spindle"}');

    expect(calls).toEqual(["spindle"]);
    expect(result.finalOutput).toContain("a rod for twisting fibre into thread");
    expect(requests.filter((u) => u.endsWith("/v1/responses"))).toHaveLength(2);
    // Each call replayed the transcript onto a thread of its own; the second one holds the
    // call and its output as the agent sent them.
    const last = result.rawResponses.at(-1)?.responseId ?? "";
    const ref = parseResponseId(last);
    const history = await json<{ data: { type: string }[] }>(
      await api("GET", `/v1/threads/${ref?.threadId}/history`),
    );
    const types = history.data.map((i) => i.type);
    expect(types).toContain("function_call");
    expect(types).toContain("function_call_output");
  });
});
