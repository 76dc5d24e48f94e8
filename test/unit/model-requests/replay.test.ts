import { describe, expect, it } from "vitest";
import type { ModelRequestResource } from "../../../shared/api/index.ts";
import { modelVisibleItem, type Prompt, type RolloutItem } from "../../../shared/protocol/index.ts";
import { LOOKUP_TOOL, newSession, replayed, runTurn } from "../helpers/engine.ts";
import { allRequests, EVERY_BREAK, linesOf, runEveryBreak } from "../helpers/model-requests.ts";

const TOOLS = { tools: [LOOKUP_TOOL] };

/** What the provider was sent, without Spindle's bookkeeping, as `GET …/requests` shows it. */
function sent(prompt: Prompt) {
  return { ...prompt, input: prompt.input.map(modelVisibleItem) };
}

function asPrompt(r: ModelRequestResource): Prompt {
  const { instructions, input, tools, parallel_tool_calls, reasoning, text } = r;
  return {
    instructions,
    input,
    tools,
    parallel_tool_calls,
    ...(reasoning === undefined ? {} : { reasoning }),
    ...(text === undefined ? {} : { text }),
  };
}

describe("a thread's provider requests, rebuilt from its rollout", () => {
  it("rebuilds every request byte for byte: turns, tool rounds, a compaction, a rollback, a model switch", async () => {
    // The Durable Object rebuilds from the rollout after a rollback, as after a cold start.
    const h = await runEveryBreak(newSession({ cwd: "/repo", ...TOOLS }), replayed);
    const requests = allRequests(h);
    expect(requests.map(asPrompt)).toEqual(h.client.prompts.map(sent));
    expect(requests.map((r) => JSON.stringify(asPrompt(r)))).toEqual(
      h.client.prompts.map((p) => JSON.stringify(sent(p))),
    );
    expect(requests.map((r) => r.kind)).toEqual([
      "sampling",
      "sampling",
      "sampling",
      "compaction",
      "sampling",
      "sampling",
      "sampling",
      "sampling",
      "sampling",
      "sampling",
    ]);
    expect(requests.map((r) => r.cache.break_reason)).toEqual(EVERY_BREAK);
    expect(requests.map((r) => r.step)).toEqual([1, 1, 2, 1, 1, 1, 1, 1, 1, 1]);
    // A turn's overrides stay the thread's: the last three run on the lite model.
    expect(requests.map((r) => r.model)).toEqual([
      ...Array(7).fill("spindle-local"),
      ...Array(3).fill("spindle-local-lite"),
    ]);
  });

  it("a request that extends its predecessor reports it reused all of it, and only the rest as new", async () => {
    const h = newSession({ cwd: "/repo" });
    await runTurn(h, "first");
    await runTurn(h, "second");
    const [one, two] = allRequests(h);
    const bytes = (p: Prompt) =>
      [
        JSON.stringify(p.instructions),
        JSON.stringify(p.tools),
        ...p.input.map((i) => JSON.stringify(i)),
      ]
        .map((s) => new TextEncoder().encode(s).length)
        .reduce((a, b) => a + b, 0);
    if (one === undefined || two === undefined) throw new Error("expected two requests");
    expect(one.cache).toMatchObject({
      reused_prefix_items: 0,
      reused_prefix_bytes: 0,
      new_bytes: bytes(asPrompt(one)),
      break_reason: "first_request",
    });
    expect(two.cache).toMatchObject({
      reused_prefix_items: one.input.length,
      reused_prefix_bytes: bytes(asPrompt(one)),
      new_bytes: bytes(asPrompt(two)) - bytes(asPrompt(one)),
      break_reason: null,
    });
    expect(two.input.slice(0, one.input.length)).toEqual(one.input);
  });

  it("says expired when the prefix held but the model's cache lifetime passed between them", async () => {
    const h = newSession({ cwd: "/repo" });
    await runTurn(h, "first");
    const firstTurnLines = h.sink.items.length;
    await runTurn(h, "much later");
    const late = linesOf(h.sink.items, firstTurnLines - 1, 301_000);
    expect(allRequests(h, late, 300).map((r) => r.cache.break_reason)).toEqual([
      "first_request",
      "expired",
    ]);
    expect(allRequests(h, linesOf(h.sink.items), 300)[1]?.cache.break_reason).toBeNull();
    expect(allRequests(h, late, null)[1]?.cache.break_reason).toBeNull();
  });

  it("takes each request's usage from the token_count that answers it, and none for a request without one", async () => {
    const h = newSession({ cwd: "/repo" });
    await runTurn(h, "first");
    await runTurn(h, "second");
    const lines = linesOf(h.sink.items);
    const [one, two] = allRequests(h, lines);
    const totals = lines.flatMap((l) =>
      l.line.type === "event_msg" && l.line.payload.type === "token_count" && l.line.payload.info
        ? [l.line.payload.info.total_token_usage]
        : [],
    );
    expect(one?.usage).toEqual(totals[0]);
    expect(two?.usage?.input_tokens).toBe(
      (totals[1]?.input_tokens ?? 0) - (totals[0]?.input_tokens ?? 0),
    );
    expect(one?.cache.provider_cached_tokens).toBe(one?.usage?.cached_input_tokens);
    // Cut the rollout right after the second request: it has no answer yet.
    const cut = lines.slice(0, lines.findLastIndex((l) => l.line.type === "spindle_request") + 1);
    expect(allRequests(h, cut).at(-1)?.usage).toBeNull();
    expect(allRequests(h, cut).at(-1)?.cache.provider_cached_tokens).toBeNull();
  });

  it("a rollout without request lines (a Codex rollout) has no requests to show", () => {
    const h = newSession({ cwd: "/repo" });
    const lines = linesOf([
      { type: "event_msg", payload: { type: "task_started", turn_id: "t1" } },
    ] as RolloutItem[]);
    expect(allRequests(h, lines)).toEqual([]);
  });
});
