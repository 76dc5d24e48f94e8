/**
 * `GET …/turns/{turn}/requests` against what the provider really received: Spindle's `openai`
 * provider on the local Responses stand-in, which records every request body. Each rebuilt
 * request must be the body's `instructions` and `input` byte for byte, across tool rounds, a
 * compaction, a rollback, a cold start, an import of the export and a fork. The cache report each
 * `token_count` event carried live is the report the route rebuilds.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ResponsesStandIn, startResponsesStandIn } from "../helpers/responses-stand-in.ts";
import { readSse, type SseFrame } from "../helpers/sse.ts";
import { call, DEV_KEY, REQUEST_TIMEOUT_MS, text } from "./local-worker.ts";
import { persistedWorker } from "./persisted-worker.ts";

const MODEL = "gpt-standin";
const LOOKUP = {
  type: "function",
  name: "lookup",
  description: "find things",
  parameters: { type: "object", properties: {} },
};

let standIn: ResponsesStandIn;
beforeAll(async () => {
  standIn = await startResponsesStandIn();
});
afterAll(async () => {
  await standIn?.close();
});

const { base, restart } = persistedWorker("spindle-e2e-requests-", () => ({
  OPENAI_BASE_URL: standIn.url,
  OPENAI_API_KEY: "test",
  SPINDLE_OPENAI_MODELS: JSON.stringify([
    { slug: MODEL, context_window: 128_000, prompt_cache_ttl_s: 600 },
  ]),
}));

type Json = Record<string, unknown>;

async function as<T = Json>(method: string, path: string, body?: unknown, status = 200) {
  return JSON.parse(await text(await call(base(), method, path, body), status)) as T;
}

interface Request {
  kind: string;
  instructions: string;
  input: Json[];
  tools: Json[];
  parallel_tool_calls: boolean;
  usage: Json | null;
  cache: {
    break_reason: string | null;
    reused_prefix_items: number;
    provider_cached_tokens: number | null;
  };
}

/** Every request of the thread's turns, oldest turn first. */
async function requestsOf(thread: string): Promise<Request[][]> {
  const turns = await as<{ data: { id: string }[] }>(
    "GET",
    `/v1/threads/${thread}/turns?limit=100`,
  );
  const out: Request[][] = [];
  for (const turn of turns.data.reverse()) {
    const page = await as<{ data: Request[] }>(
      "GET",
      `/v1/threads/${thread}/turns/${turn.id}/requests`,
    );
    out.push(page.data);
  }
  return out;
}

/** The cache reports the thread's first `count` `token_count` events carried, oldest first. */
async function liveReports(thread: string, count: number): Promise<Request["cache"][]> {
  const res = await fetch(new URL(`/v1/threads/${thread}/events`, base()), {
    headers: { authorization: `Bearer ${DEV_KEY}`, "last-event-id": "0" },
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const counts = (frames: SseFrame[]) => frames.filter((f) => f.event === "token_count");
  const frames = await readSse(res, (seen) => counts(seen).length >= count);
  return counts(frames).map(
    (f) => (JSON.parse(f.data) as { data: { cache: Request["cache"] } }).data.cache,
  );
}

/** The provider request each rebuilt request must be, as the stand-in received it. */
function expectSent(rebuilt: readonly Request[], bodies: readonly Json[]) {
  expect(rebuilt).toHaveLength(bodies.length);
  rebuilt.forEach((request, i) => {
    const body = bodies[i] as Json;
    expect(JSON.stringify(request.input)).toBe(JSON.stringify(body.input));
    expect(request.instructions).toBe(body.instructions);
    expect(request.parallel_tool_calls).toBe(body.parallel_tool_calls);
    // The provider marks tools that set no `strict` as not strict; nothing else differs.
    expect(request.tools.map((t) => ({ strict: false, ...t }))).toEqual(body.tools);
  });
}

async function turn(thread: string, input: string) {
  return as<{ id: string; status: string; pending_calls: { call_id: string }[] }>(
    "POST",
    `/v1/threads/${thread}/turns`,
    { input },
  );
}

describe("a turn's requests are what the provider received", () => {
  it("byte for byte across tool rounds, compaction, rollback, a cold start, an import and a fork", async () => {
    await as("POST", "/v1/threads", { id: "seen", model: MODEL, tools: [LOOKUP] }, 201);
    expect((await turn("seen", "hello")).status).toBe("completed");
    const paused = await turn("seen", "call lookup");
    expect(paused.status).toBe("requires_action");
    const outputs = paused.pending_calls.map((c) => ({
      type: "function_call_output",
      call_id: c.call_id,
      output: "found it",
    }));
    await as("POST", `/v1/threads/seen/turns/${paused.id}/outputs`, { items: outputs });
    await as("POST", "/v1/threads/seen/compact", {});
    await turn("seen", "after the summary");
    await turn("seen", "to be rolled back");
    await as("POST", "/v1/threads/seen/rollback", { turns: 1 });
    await restart();
    await turn("seen", "after the restart");

    const sent = standIn.responseBodies();
    const perTurn = await requestsOf("seen");
    expect(perTurn.map((requests) => requests.length)).toEqual([1, 2, 1, 1, 1, 1]);
    const rebuilt = perTurn.flat();
    expectSent(rebuilt, sent);
    expect(rebuilt.map((r) => r.kind)).toEqual([
      "sampling",
      "sampling",
      "sampling",
      "compaction",
      "sampling",
      "sampling",
      "sampling",
    ]);
    expect(rebuilt.map((r) => r.cache.break_reason)).toEqual([
      "first_request",
      null,
      null,
      "tools_changed",
      "compaction",
      null,
      "rollback",
    ]);
    // The tool round resent the whole first request and added to it.
    expect(rebuilt[2]?.cache.reused_prefix_items).toBe(rebuilt[1]?.input.length);
    expect(rebuilt.every((r) => typeof r.cache.provider_cached_tokens === "number")).toBe(true);
    // Each request's report went out live with its usage, the restart's included.
    expect(await liveReports("seen", rebuilt.length)).toEqual(rebuilt.map((r) => r.cache));

    // An import of the export shows the same requests, and its next one is what it sends.
    const exported = await fetch(new URL("/v1/threads/seen/rollout", base()), {
      headers: { authorization: `Bearer ${DEV_KEY}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const imported = await fetch(new URL("/v1/threads/import?id=copied", base()), {
      method: "POST",
      headers: { authorization: `Bearer ${DEV_KEY}`, "content-type": "application/x-ndjson" },
      body: await text(exported),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    await text(imported, 201);
    expect(await requestsOf("copied")).toEqual(perTurn);
    await turn("copied", "in the copy");
    const copied = await requestsOf("copied");
    expectSent(copied.flat(), standIn.responseBodies());
    expect(copied.at(-1)?.[0]?.cache.break_reason).toBeNull();
    // The copy's first live report compares with the request its rollout rebuilds.
    expect(await liveReports("copied", 1)).toEqual([copied.at(-1)?.[0]?.cache]);

    // A fork before the last turn shows the turns it copied as the parent did.
    const turns = await as<{ data: { id: string }[] }>("GET", "/v1/threads/seen/turns?limit=100");
    const last = turns.data[0]?.id;
    await as("POST", "/v1/threads/seen/fork", { id: "branch", before_turn: last }, 201);
    expect(await requestsOf("branch")).toEqual(perTurn.slice(0, -1));
    await turn("branch", "on the branch");
    const branch = (await requestsOf("branch")).flat();
    expect(JSON.stringify(branch.at(-1)?.input)).toBe(
      JSON.stringify(standIn.responseBodies().at(-1)?.input),
    );
    // Its previous request is the rolled-back turn's, the rollback between them.
    expect(await liveReports("branch", 1)).toEqual([branch.at(-1)?.cache]);
    expect(branch.at(-1)?.cache.break_reason).toBe("rollback");
  });
});
