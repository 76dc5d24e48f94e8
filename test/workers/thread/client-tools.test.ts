import { afterEach, describe, expect, it, vi } from "vitest";
import { api, json, newThreadId, post } from "../helpers/api.ts";
import { createThread, type Item, prompt, type Turn, text, turn } from "../helpers/turns.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("client-executed tools", () => {
  it("requires_action → outputs → the same turn completes with the output", async () => {
    const id = newThreadId();
    await createThread(id, { tools: [{ name: "lookup", description: "find things" }] });
    const paused = await turn(id, '/call lookup {"q":"x"}');
    expect(paused.status).toBe("requires_action");
    const [call] = paused.pending_calls;
    expect(call).toMatchObject({ type: "function_call", name: "lookup", arguments: '{"q":"x"}' });
    const thread = await json<{ status: string }>(await api("GET", `/v1/threads/${id}`));
    expect(thread.status).toBe("requires_action");

    const unknown = await post(`/v1/threads/${id}/turns/${paused.id}/outputs`, {
      items: [{ type: "function_call_output", call_id: "call_nope", output: "x" }],
    });
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ code: "unknown_call_id" });

    const done = await json<Turn>(
      await post(`/v1/threads/${id}/turns/${paused.id}/outputs`, {
        items: [{ type: "function_call_output", call_id: call?.call_id, output: "42 results" }],
      }),
    );
    expect(done.id).toBe(paused.id);
    expect(done.status).toBe("completed");
    expect(text(done.items.at(-1))).toContain("42 results");

    const again = await post(`/v1/threads/${id}/turns/${paused.id}/outputs`, {
      items: [{ type: "function_call_output", call_id: call?.call_id, output: "x" }],
    });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ code: "no_pending_calls" });
  });

  it("a new turn instead of outputs leaves the call unanswered in history and pairs it with aborted in the prompt", async () => {
    const id = newThreadId();
    await createThread(id, { tools: [{ name: "lookup" }] });
    const paused = await turn(id, "/call lookup {}");
    const callId = paused.pending_calls[0]?.call_id;
    await turn(id, "never mind");
    const history = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${id}/history?limit=1000`),
    );
    expect(history.data.filter((i) => i.type === "function_call_output")).toEqual([]);
    const p = await prompt(id);
    const at = p.input.findIndex((i) => i.type === "function_call" && i.call_id === callId);
    expect(p.input[at + 1]).toMatchObject({
      type: "function_call_output",
      call_id: callId,
      output: "aborted",
    });
    const old = await json<Turn>(await api("GET", `/v1/threads/${id}/turns/${paused.id}`));
    expect(old.status).not.toBe("requires_action");
  });
});
