/**
 * The typed client (shared/client) against the running app, in workerd: what a user of the
 * client gets, with the local model's deterministic answers. The app is reached through the
 * worker's own `fetch` (`exports.default`, the successor of `SELF`), as the other edge tests do.
 */
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createSpindleClient, type ThreadEvent, type Turn } from "../../../shared/client/index.ts";
import { BASE, DEV_KEY, newThreadId } from "../helpers/api.ts";

const client = createSpindleClient({
  baseUrl: BASE,
  apiKey: DEV_KEY,
  fetch: (request) => exports.default.fetch(request),
});

async function newThread(): Promise<string> {
  const id = newThreadId();
  const { data, error, response } = await client.POST("/v1/threads", {
    body: { id, metadata: { suite: "client" } },
  });
  expect(error).toBeUndefined();
  expect(response.status).toBe(201);
  // Typed: `data` is a Thread.
  expect(data?.object).toBe("thread");
  expect(data?.id).toBe(id);
  return id;
}

describe("the typed client", () => {
  it("creates a thread, runs a turn as JSON and reads the thread back", async () => {
    const id = await newThread();
    // `on_busy` and `stream` have defaults: the body needs only `input`.
    const { data: turn, error } = await client.POST("/v1/threads/{id}/turns", {
      params: { path: { id } },
      body: { input: "hello" },
    });
    expect(error).toBeUndefined();
    const completed: Turn | undefined = turn;
    expect(completed?.object).toBe("turn");
    expect(completed?.status).toBe("completed");
    const answer = completed?.items.at(-1);
    expect(answer?.type).toBe("message");
    expect(JSON.stringify(answer)).toContain('Last user message: \\"hello\\"');

    const { data: thread } = await client.GET("/v1/threads/{id}", { params: { path: { id } } });
    expect(thread).toMatchObject({ object: "thread", id, status: "idle", turn_count: 1 });

    // A number in the query is a number for the client too.
    const { data: page } = await client.GET("/v1/threads/{id}/history", {
      params: { path: { id }, query: { limit: 2 } },
    });
    expect(page?.data).toHaveLength(2);
  });

  it("streams a turn as typed ThreadEvents, and replays them from the thread's events", async () => {
    const id = await newThread();
    const result = await client.streamTurn(id, { input: "stream me" });
    expect(result.error).toBeUndefined();
    expect(result.response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events: ThreadEvent[] = [];
    for await (const event of result.events ?? []) events.push(event);
    const types = events.map((e) => e.type);
    expect(types[0]).toBe("turn.started");
    expect(types).toContain("item.delta");
    expect(types).toContain("item.completed");
    expect(types.at(-1)).toBe("turn.completed");
    // `seq` is the SSE id: strictly increasing.
    const seqs = events.map((e) => e.seq);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
    expect(new Set(seqs).size).toBe(seqs.length);
    const last = events.at(-1);
    if (last?.type === "turn.completed") expect(last.data.status).toBe("completed");
    const text = events.flatMap((e) => (e.type === "item.delta" ? [e.data.delta] : [])).join("");
    expect(text).toContain('Last user message: "stream me"');

    // The thread's event stream replays the retained events after a seq (deltas are live only),
    // then tails: leave it at the turn's end.
    const first = seqs[0] ?? 0;
    const replay = await client.streamEvents(id, { after: first });
    expect(replay.error).toBeUndefined();
    const replayed: number[] = [];
    for await (const event of replay.events ?? []) {
      replayed.push(event.seq);
      if (event.type === "turn.completed") break;
    }
    expect(replayed).toEqual(
      events.filter((e) => e.seq > first && e.type !== "item.delta").map((e) => e.seq),
    );
  });

  it("a missing thread is a typed 404 problem, on JSON and stream routes alike", async () => {
    const missing = newThreadId();
    const { data, error, response } = await client.GET("/v1/threads/{id}", {
      params: { path: { id: missing } },
    });
    expect(data).toBeUndefined();
    expect(response.status).toBe(404);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    // Typed: `code` is one of the route's documented codes.
    const code: "not_found" | "invalid_request" | "unauthorized" | "forbidden" | "internal" =
      error?.code ?? "internal";
    expect(code).toBe("not_found");
    expect(error).toMatchObject({ status: 404, code: "not_found" });

    const streamed = await client.streamTurn(missing, { input: "x" });
    expect(streamed.events).toBeUndefined();
    expect(streamed.response.status).toBe(404);
    expect(streamed.error?.code).toBe("not_found");
  });

  it("a wrong key is a typed 401", async () => {
    const stranger = createSpindleClient({
      baseUrl: BASE,
      apiKey: "sk-wrong",
      fetch: (request) => exports.default.fetch(request),
    });
    const { error, response } = await stranger.GET("/v1/threads");
    expect(response.status).toBe(401);
    expect(error?.code).toBe("unauthorized");
  });
});
