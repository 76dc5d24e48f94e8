/**
 * The stand-ins' simulated prompt cache expires as a provider's does: a request within
 * `cacheTtlMs` of the previous one reads the shared prefix from the cache, one after it pays for
 * all of it. The benchmark of idle compaction (`bench/cache.ts`) relies on this.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startAnthropicStandIn } from "../../../helpers/anthropic-stand-in.ts";
import { startChatStandIn } from "../../../helpers/chat-stand-in.ts";
import { startResponsesStandIn } from "../../../helpers/responses-stand-in.ts";

const TTL_MS = 60_000;
const LONG = "the stable prefix of every request ".repeat(200);

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(Date.UTC(2026, 11, 3, 12));
});
afterEach(() => {
  vi.useRealTimers();
});

/** The first number after `"field":` in a body (JSON or SSE). */
function numberAfter(text: string, field: string): number {
  const match = new RegExp(`"${field}":(\\d+)`).exec(text);
  if (!match) throw new Error(`no ${field} in ${text.slice(0, 200)}`);
  return Number(match[1]);
}

/**
 * Three requests and their cached tokens: none for the first, most of the prompt for one within
 * the TTL, none for one after it expired.
 */
async function expectCachedOnlyWithinTtl(send: () => Promise<number>): Promise<void> {
  expect(await send()).toBe(0);
  vi.setSystemTime(Date.now() + TTL_MS / 2);
  expect(await send()).toBeGreaterThan(LONG.length / 5);
  vi.setSystemTime(Date.now() + TTL_MS + 1);
  expect(await send()).toBe(0);
}

const post = async (url: string, body: unknown, headers: Record<string, string> = {}) => {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer k", ...headers },
    body: JSON.stringify(body),
  });
  return res.text();
};

describe("the stand-ins' prompt cache", () => {
  it("Responses: cached_tokens within the TTL, none after it", async () => {
    const standIn = await startResponsesStandIn({ cacheTtlMs: TTL_MS });
    try {
      const send = async () =>
        numberAfter(
          await post(`${standIn.url}/responses`, {
            model: "m",
            instructions: LONG,
            input: [{ type: "message", role: "user", content: "hi" }],
            prompt_cache_key: "thread-1",
          }),
          "cached_tokens",
        );
      await expectCachedOnlyWithinTtl(send);
    } finally {
      await standIn.close();
    }
  });

  it("Chat Completions: cached_tokens within the TTL, none after it", async () => {
    const standIn = await startChatStandIn({ cacheTtlMs: TTL_MS });
    try {
      const send = async () =>
        numberAfter(
          await post(`${standIn.url}/chat/completions`, {
            model: "m",
            stream: true,
            stream_options: { include_usage: true },
            messages: [
              { role: "system", content: LONG },
              { role: "user", content: "hi" },
            ],
          }),
          "cached_tokens",
        );
      await expectCachedOnlyWithinTtl(send);
    } finally {
      await standIn.close();
    }
  });

  it("Messages API: a read within the TTL up to the breakpoint, a new write after it", async () => {
    const standIn = await startAnthropicStandIn({ cacheTtlMs: TTL_MS });
    try {
      let created = 0;
      const send = async () => {
        const body = await post(
          `${standIn.url}/messages`,
          {
            model: "m",
            max_tokens: 100,
            stream: true,
            system: [{ type: "text", text: LONG, cache_control: { type: "ephemeral" } }],
            messages: [{ role: "user", content: "hi" }],
          },
          { "x-api-key": "k", "anthropic-version": "2023-06-01" },
        );
        created = numberAfter(body, "cache_creation_input_tokens");
        return numberAfter(body, "cache_read_input_tokens");
      };
      const first = await send();
      expect([first, created > 0]).toEqual([0, true]);
      vi.setSystemTime(Date.now() + TTL_MS / 2);
      const warm = await send();
      expect([warm > LONG.length / 5, created]).toEqual([true, 0]);
      // The read refreshed the entry: the lifetime counts from it.
      vi.setSystemTime(Date.now() + TTL_MS - 1);
      expect(await send()).toBe(warm);
      vi.setSystemTime(Date.now() + TTL_MS + 1);
      const cold = await send();
      expect([cold, created > 0]).toEqual([0, true]);
    } finally {
      await standIn.close();
    }
  });
});
