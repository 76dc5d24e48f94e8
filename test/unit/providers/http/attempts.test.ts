import { describe, expect, it } from "vitest";
import {
  type AnswerReader,
  attemptsOf,
  type FetchFn,
  streamWithRetries,
} from "../../../../shared/providers/http/attempts.ts";
import type { ModelEvent } from "../../../../shared/providers/index.ts";
import { ProviderError } from "../../../../shared/providers/index.ts";

/** A fetch that answers each attempt with the next response; no request leaves the process. */
function answering(...responses: (() => Response)[]) {
  let calls = 0;
  const fetch: FetchFn = async () => {
    calls++;
    const next = responses.shift();
    if (!next) throw new Error("no answer left");
    return next();
  };
  return { fetch, calls: () => calls };
}

/** Reads a successful answer as one completed event. */
const completes: AnswerReader = async function* () {
  yield { type: "completed" } satisfies ModelEvent;
};

const REQUEST = { url: "http://127.0.0.1:9/v1/x", headers: {}, body: "{}" };

async function run(fetch: FetchFn) {
  const attempts = attemptsOf("test", fetch, { sleep: async () => {}, random: () => 0 });
  const events: ModelEvent[] = [];
  for await (const event of streamWithRetries(attempts, REQUEST, completes)) events.push(event);
  return events;
}

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  () =>
    new Response(JSON.stringify(body), { status, headers });

describe("streamWithRetries", () => {
  it("obeys x-should-retry: false on a 5xx, and x-should-retry: true on a 409", async () => {
    const refused = answering(
      json(503, { error: { message: "busy" } }, { "x-should-retry": "false" }),
    );
    const error = await run(refused.fetch).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe("test: HTTP 503: busy");
    expect(refused.calls()).toBe(1);

    const conflict = answering(
      json(409, { error: { message: "conflict" } }, { "x-should-retry": "true" }),
      () => new Response("ok"),
    );
    expect(await run(conflict.fetch)).toEqual([{ type: "completed" }]);
    expect(conflict.calls()).toBe(2);
  });

  it("does not retry a 429 that says a spending limit was reached; retries another 429", async () => {
    const capped = answering(
      json(429, {
        type: "error",
        error: {
          type: "rate_limit_error",
          message: "monthly limit",
          details: { error_code: "enforced_spend_limit_reached" },
        },
      }),
    );
    const error = await run(capped.fetch).catch((e: unknown) => e);
    expect((error as ProviderError).status).toBe(429);
    expect(capped.calls()).toBe(1);

    const limited = answering(
      json(429, { error: { message: "slow down" } }),
      () => new Response("ok"),
    );
    expect(await run(limited.fetch)).toEqual([{ type: "completed" }]);
    expect(limited.calls()).toBe(2);
  });

  it("fails another 4xx at once with the API's message, or the raw text when it is not JSON", async () => {
    const bad = answering(() => new Response("no such route", { status: 404 }));
    const error = await run(bad.fetch).catch((e: unknown) => e);
    expect((error as Error).message).toBe("test: HTTP 404: no such route");
    expect(bad.calls()).toBe(1);
  });
});
