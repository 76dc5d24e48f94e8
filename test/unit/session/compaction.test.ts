import { describe, expect, it } from "vitest";
import {
  isContextualUserMessageContent,
  isUserTurnBoundary,
} from "../../../shared/context/index.ts";
import { PromptInput } from "../../../shared/context-manager/index.ts";
import {
  effectiveContextWindow,
  SPINDLE_LOCAL,
  SPINDLE_LOCAL_LITE,
} from "../../../shared/models/index.ts";
import type { MessageItem, Prompt, ResponseItem } from "../../../shared/protocol/index.ts";
import type { ModelClient, ModelEvent } from "../../../shared/providers/index.ts";
import {
  buildCompactedHistory,
  COMPACT_USER_MESSAGES_MAX_TOKENS,
  CompactionFailedError,
  collectUserMessages,
  compactUserMessagesBudgetTokens,
  DEFAULT_AUTO_COMPACT_FRACTION,
  modelVisiblePrompt,
  SessionBusyError,
  SUMMARIZATION_REQUEST,
  SUMMARY_PREFIX,
  summaryMessage,
  type TurnEvent,
  TurnNotSteerableError,
} from "../../../shared/session/index.ts";
import {
  AUTO_COMPACTION_TASK_LINES,
  drain,
  type Harness,
  isBytePrefix,
  LOOKUP_TOOL,
  newSession,
  resume,
  runTurn,
  StallingClient,
  shapeOf,
  textOfTokens,
} from "../helpers/engine.ts";

const user = (t: string): MessageItem => ({
  type: "message",
  role: "user",
  content: [{ type: "input_text", text: t }],
});

function textOf(item: ResponseItem | undefined): string {
  return item?.type === "message"
    ? item.content.map((p) => (p.type === "input_image" ? "" : p.text)).join("")
    : "";
}

async function compact(h: Harness) {
  return drain(h.session.compact("manual"));
}

describe("manual compaction (reference §5.6)", () => {
  it("is a task of its own: task_started, compacted with the replacement history, token_count, task_complete", async () => {
    const h = newSession({ cwd: "/repo" });
    await runTurn(h, "first");
    await runTurn(h, "second");
    const mark = h.sink.items.length;
    const version = h.session.history.historyVersion;
    const { events, outcome } = await compact(h);
    if (outcome.status !== "completed") throw new Error("expected completion");

    const lines = h.sink.items.slice(mark);
    expect(shapeOf(lines)).toEqual([
      "event_msg/task_started",
      "spindle_request",
      "compacted",
      "event_msg/token_count",
      "event_msg/task_complete",
    ]);
    for (const line of [lines[0], lines[4]]) {
      expect(line?.type === "event_msg" && "turn_id" in line.payload && line.payload.turn_id).toBe(
        outcome.turn_id,
      );
    }
    // The local model summarizes what it was sent: every history item, then the request.
    const prompt = h.client.prompts.at(-1);
    const summarized = (prompt?.input.length ?? 0) - 1;
    const summary = `Summary of ${summarized} earlier items; last user request: "second"`;
    expect(outcome.summary).toBe(summary);
    expect(lines[2]).toEqual({
      type: "compacted",
      payload: { message: summary, replacement_history: outcome.replacement_history },
    });
    expect(outcome.replacement_history.map(textOf)).toEqual([
      "first",
      "second",
      textOf(summaryMessage(summary)),
    ]);
    expect(h.session.history.items).toEqual(outcome.replacement_history);
    expect(h.session.history.historyVersion).toBe(version + 1);
    expect(h.session.history.referenceContextItem).toBeUndefined();
    expect(h.session.history.worldStateBaseline).toBeUndefined();
    expect(events.map((e) => e.type)).toEqual([
      "turn.started",
      "token_count",
      "compaction.completed",
    ]);
    expect(events[0]).toEqual({
      type: "turn.started",
      turn_id: outcome.turn_id,
      kind: "compaction",
      trigger: "manual",
    });
    // The trigger is Spindle's own field of Codex's `task_started`.
    expect(lines[0]?.type === "event_msg" && lines[0].payload).toMatchObject({
      type: "task_started",
      spindle_compaction_trigger: "manual",
    });
    // Usage: the request's tokens count in the totals; the last usage is the new history's estimate.
    const info = h.session.history.tokenInfo;
    expect(info?.last_token_usage.total_tokens).toBe(
      h.session.history.estimateTokenCount(SPINDLE_LOCAL.instructions),
    );
    expect(lines[3]).toEqual({
      type: "event_msg",
      payload: { type: "token_count", info, rate_limits: null },
    });
  });

  it("sends base instructions, the prompt view of history and the summarization request, which is never recorded", async () => {
    const h = newSession({ cwd: "/repo" });
    await runTurn(h, "first");
    const before = h.session.previewPrompt();
    await compact(h);
    const prompt = h.client.prompts.at(-1) as Prompt;
    expect(prompt.instructions).toBe(SPINDLE_LOCAL.instructions);
    expect(prompt.tools).toEqual([]);
    const sent = modelVisiblePrompt({ ...prompt, input: PromptInput.of(prompt.input) });
    expect(sent.input.slice(0, -1)).toEqual(before.input);
    expect(prompt.input.at(-1)).toEqual(user(SUMMARIZATION_REQUEST));
    const recorded = JSON.stringify([h.sink.items, h.session.history.items]);
    expect(recorded).not.toContain(SUMMARIZATION_REQUEST.slice(0, 40));
  });

  it("the next turn re-injects the full context after the summary, and later prompts are byte-prefix-stable again", async () => {
    const h = newSession({ cwd: "/repo", agents_md: { directory: "/repo", text: "Be tidy." } });
    await runTurn(h, "first");
    const { outcome } = await compact(h);
    if (outcome.status !== "completed") throw new Error("expected completion");
    const mark = h.sink.items.length;
    await runTurn(h, "third");
    expect(shapeOf(h.sink.items.slice(mark))).toEqual([
      "event_msg/task_started",
      "response_item/developer",
      "response_item/user",
      "turn_context",
      "world_state",
      "response_item/user",
      "event_msg/user_message",
      "spindle_request",
      "response_item/assistant",
      "event_msg/token_count",
      "event_msg/task_complete",
    ]);
    const items = h.session.history.items;
    const n = outcome.replacement_history.length;
    expect(items.slice(0, n)).toEqual(outcome.replacement_history);
    const [developer, contextual, input] = items.slice(n);
    expect(developer?.type === "message" && developer.role).toBe("developer");
    expect(textOf(developer)).toContain("<permissions instructions>");
    expect(
      contextual?.type === "message" && isContextualUserMessageContent(contextual.content),
    ).toBe(true);
    expect(textOf(contextual)).toContain("Be tidy.");
    expect(textOf(contextual)).toContain("<environment_context>");
    expect(textOf(input)).toBe("third");

    await runTurn(h, "fourth");
    const [p3, p4] = h.client.prompts.slice(-2);
    if (!p3 || !p4) throw new Error("prompts");
    expect(isBytePrefix(p3, p4)).toBe(true);
    // Before compaction vs after it, the prefix is (rightly) not stable.
    const p1 = h.client.prompts[0];
    if (!p1) throw new Error("prompt");
    expect(isBytePrefix(p1, p3)).toBe(false);
  });

  it("the replacement never contains tool items, so no call is split from its output", async () => {
    const h = newSession({ tools: [LOOKUP_TOOL] });
    const paused = await runTurn(h, '/call lookup {"q":1}');
    await resume(h, paused, (calls) => calls.map((c) => ({ call_id: c.call_id, output: "r" })));
    await runTurn(h, "/call lookup {}"); // left unanswered
    const { outcome } = await compact(h);
    if (outcome.status !== "completed") throw new Error("expected completion");
    for (const item of outcome.replacement_history) {
      expect(item.type === "message" && item.role).toBe("user");
    }
    expect(outcome.replacement_history.map(textOf).slice(0, -1)).toEqual([
      '/call lookup {"q":1}',
      "/call lookup {}",
    ]);
    // Nothing to pair: the prompt view equals history.
    const view = h.session.history.forPrompt(["text", "image"]);
    expect(view).toEqual(h.session.history.items);
  });

  it("does not carry an earlier summary into the kept user messages", async () => {
    const h = newSession();
    await runTurn(h, "first");
    await compact(h);
    await runTurn(h, "second");
    const { outcome } = await compact(h);
    if (outcome.status !== "completed") throw new Error("expected completion");
    const texts = outcome.replacement_history.map(textOf);
    expect(texts.slice(0, -1)).toEqual(["first", "second"]);
    expect(texts.filter((t) => t.startsWith(SUMMARY_PREFIX))).toHaveLength(1);
  });

  it("an interrupted compaction leaves history untouched and writes turn_aborted", async () => {
    const stalling = newSession({}, 1000, { model: new StallingClient() });
    stalling.session.inject([user("first")]);
    const before = stalling.session.history.toState();
    const controller = new AbortController();
    const gen = stalling.session.compact("manual", controller.signal);
    const events: TurnEvent[] = [];
    for (let next = await gen.next(); ; next = await gen.next()) {
      if (next.done) {
        expect(next.value.status).toBe("interrupted");
        break;
      }
      events.push(next.value);
      if (next.value.type === "turn.started") controller.abort();
    }
    expect(stalling.session.history.toState()).toEqual(before);
    expect(shapeOf(stalling.sink.items).slice(-2)).toEqual([
      "event_msg/task_started",
      "event_msg/turn_aborted",
    ]);
    expect(events.at(-1)).toMatchObject({ type: "turn.interrupted", kind: "compaction" });
  });

  it("throws CompactionFailedError when the model gives no summary, leaving history as it was", async () => {
    const silent: ModelClient = {
      async *stream(): AsyncIterable<ModelEvent> {
        yield { type: "completed" };
      },
    };
    const h = newSession({}, 1000, { model: silent });
    h.session.inject([user("first")]);
    const before = h.session.history.toState();
    await expect(compact(h)).rejects.toBeInstanceOf(CompactionFailedError);
    expect(h.session.history.toState()).toEqual(before);
    expect(h.session.runningTurnId).toBeUndefined();
  });

  it("a compaction cannot be steered and blocks other tasks while it runs", async () => {
    const h = newSession();
    await runTurn(h, "first");
    const gen = h.session.compact("manual");
    const first = await gen.next();
    expect(first.value).toMatchObject({ type: "turn.started", kind: "compaction" });
    expect(h.session.runningTurnId).toBe(
      first.value && "turn_id" in first.value ? first.value.turn_id : "",
    );
    expect(() => h.session.steer([{ type: "input_text", text: "x" }])).toThrow(
      TurnNotSteerableError,
    );
    expect(() => h.session.inject([user("x")])).toThrow(SessionBusyError);
    await expect(drain(h.session.runTurn({ content: [] }))).rejects.toBeInstanceOf(
      SessionBusyError,
    );
    await drain(gen);
    expect(h.session.runningTurnId).toBeUndefined();
  });
});

describe("auto-compaction before a turn", () => {
  const LITE = { model: SPINDLE_LOCAL_LITE.slug };

  /** The engine's measure: the last reported usage plus what came after, once usage exists. */
  function estimate(h: Harness): number {
    const history = h.session.history;
    return history.tokenInfo
      ? history.getTotalTokenUsage(true)
      : history.estimateTokenCount(SPINDLE_LOCAL_LITE.instructions);
  }

  it("measures the context by the provider's last reported usage, not by re-estimating all history", async () => {
    const h = newSession(LITE);
    await runTurn(h, "short");
    const info = h.session.history.tokenInfo;
    if (!info) throw new Error("no usage recorded");
    // The provider says the last request was nearly the whole window, though history is tiny.
    h.session.history.tokenInfo = {
      ...info,
      last_token_usage: {
        ...info.last_token_usage,
        total_tokens: SPINDLE_LOCAL_LITE.contextWindowTokens,
      },
    };
    expect(h.session.history.estimateTokenCount(SPINDLE_LOCAL_LITE.instructions)).toBeLessThan(
      1_000,
    );
    await runTurn(h, "next");
    expect(compactedLines(h)).toHaveLength(1);
  });

  function compactedLines(h: Harness) {
    return h.sink.items.filter((i) => i.type === "compacted");
  }

  it("triggers on the lite model when the estimate passes the fraction, and not when it is below", async () => {
    const h = newSession(LITE);
    await runTurn(h, textOfTokens(2000));
    const window = SPINDLE_LOCAL_LITE.contextWindowTokens;

    const below = (estimate(h) + 1) / window;
    await runTurn(h, "small", { auto_compact_fraction: below });
    expect(compactedLines(h)).toEqual([]);

    const above = (estimate(h) - 1) / window;
    const mark = h.sink.items.length;
    const gen = h.session.runTurn(
      { content: [{ type: "input_text", text: "next" }] },
      {
        auto_compact_fraction: above,
      },
    );
    const { events, outcome } = await drain(gen);
    expect(outcome.status).toBe("completed");
    expect(compactedLines(h)).toHaveLength(1);
    const shape = shapeOf(h.sink.items.slice(mark));
    expect(shape.slice(0, 8)).toEqual([...AUTO_COMPACTION_TASK_LINES, "event_msg/task_started"]);
    expect(events.filter((e) => e.type === "turn.started").map((e) => e.kind)).toEqual([
      "compaction",
      "turn",
    ]);
    const compaction = events.find((e) => e.type === "compaction.completed");
    expect(compaction).toMatchObject({ trigger: "auto" });
    expect(compaction?.turn_id).not.toBe(outcome.turn_id);
    // The compaction re-injected the context, so the user turn sends no context of its own.
    expect(shape.slice(8, 10)).toEqual(["turn_context", "response_item/user"]);
    expect(h.session.history.items.some((i) => textOf(i).startsWith(SUMMARY_PREFIX))).toBe(true);
  });

  it("runs exactly before the turns whose estimate exceeds 0.9 of the 16k window (default fraction)", async () => {
    expect(DEFAULT_AUTO_COMPACT_FRACTION).toBe(0.9);
    const h = newSession(LITE);
    const limit = DEFAULT_AUTO_COMPACT_FRACTION * SPINDLE_LOCAL_LITE.contextWindowTokens;
    const decisions: [boolean, boolean][] = [];
    for (let i = 0; i < 5; i++) {
      const expected = estimate(h) > limit;
      const before = compactedLines(h).length;
      await runTurn(h, textOfTokens(2500, `turn ${i} `));
      decisions.push([expected, compactedLines(h).length > before]);
    }
    for (const [expected, happened] of decisions) expect(happened).toBe(expected);
    expect(decisions.some(([expected]) => expected)).toBe(true);
    expect(decisions.some(([expected]) => !expected)).toBe(true);
  });

  it("after a switch to a smaller window, the previous (larger) model writes the summary", async () => {
    const h = newSession();
    await runTurn(h, textOfTokens(4000));
    await runTurn(h, textOfTokens(4000, "more "));
    const { events } = await drain(
      h.session.runTurn({ content: [{ type: "input_text", text: "go" }] }, LITE),
    );
    const compactionId = events.find((e) => e.type === "compaction.completed")?.turn_id;
    const started = h.sink.items.find(
      (i) =>
        i.type === "event_msg" &&
        i.payload.type === "task_started" &&
        i.payload.turn_id === compactionId,
    );
    expect(started?.type === "event_msg" && started.payload).toMatchObject({
      model_context_window: effectiveContextWindow(SPINDLE_LOCAL),
    });
    const summaryPrompt = h.client.prompts.find(
      (p) => textOf(p.input.at(-1)) === SUMMARIZATION_REQUEST,
    );
    expect(summaryPrompt?.instructions).toBe(SPINDLE_LOCAL.instructions);
    // The kept user messages fit the lite window's budget (a quarter of 16k), not 20k.
    const replacement = events.find((e) => e.type === "compaction.completed");
    const kept =
      replacement?.type === "compaction.completed"
        ? replacement.replacement_history.slice(0, -1).filter(isUserTurnBoundary).map(textOf)
        : [];
    expect(kept.length).toBeGreaterThan(0);
    const keptBytes = kept.reduce((n, t) => n + t.length, 0);
    expect(keptBytes).toBeLessThanOrEqual(4_000 * 4 + 40);
    expect(keptBytes).toBeGreaterThan(3_900 * 4);
    // The re-injected context announces the switch to the lite model; the turn then sends
    // no context of its own, so the switch is announced once.
    const switches = JSON.stringify(h.session.history.items).split("<model_switch>");
    expect(switches).toHaveLength(2);
    const context =
      replacement?.type === "compaction.completed"
        ? replacement.replacement_history.filter((i) => !isUserTurnBoundary(i))
        : [];
    expect(textOf(context[0]).startsWith("<model_switch>")).toBe(true);
    expect(h.client.prompts.at(-1)?.input.at(-1)).toMatchObject({
      content: [{ type: "input_text", text: "go" }],
    });
  });
});

describe("buildCompactedHistory / collectUserMessages", () => {
  it("keeps the newest user messages within the budget, truncating the first that does not fit, in chronological order, then the summary", () => {
    const messages = [user("a".repeat(400)), user("b".repeat(400)), user("c".repeat(40))];
    // c costs 10 tokens, b 100: a budget of 60 keeps c whole and 50 tokens of b.
    const out = buildCompactedHistory(messages, "S", 60);
    expect(out).toHaveLength(3);
    expect(textOf(out[0])).toMatch(/^b+…\d+ tokens truncated…b+$/);
    expect(textOf(out[0]).replace(/….*…/, "")).toHaveLength(200);
    expect(out[1]).toEqual(messages[2]);
    expect(out[2]).toEqual(summaryMessage("S"));
  });

  it("keeps every message when they fit and only the summary for a zero budget", () => {
    const messages = [user("one"), user("two")];
    expect(buildCompactedHistory(messages, "S", 100)).toEqual([...messages, summaryMessage("S")]);
    expect(buildCompactedHistory(messages, "S", 0)).toEqual([summaryMessage("S")]);
  });

  it("collects real user messages only, text parts only", () => {
    const items: ResponseItem[] = [
      user("<environment_context>\n  <cwd>/r</cwd>\n</environment_context>"),
      {
        type: "message",
        role: "user",
        id: "msg_1",
        content: [
          { type: "input_text", text: "look" },
          { type: "input_image", image_url: "data:image/png;base64,AA" },
        ],
      },
      { type: "message", role: "user", content: [{ type: "input_image", image_url: "x" }] },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "ok" }] },
      { type: "function_call", name: "f", arguments: "{}", call_id: "c" },
      summaryMessage("old"),
      user("last"),
    ];
    expect(collectUserMessages(items)).toEqual([user("look"), user("last")]);
  });

  it("budgets 20,000 tokens, but never more than a quarter of the window", () => {
    expect(COMPACT_USER_MESSAGES_MAX_TOKENS).toBe(20_000);
    expect(compactUserMessagesBudgetTokens(SPINDLE_LOCAL.contextWindowTokens)).toBe(20_000);
    expect(compactUserMessagesBudgetTokens(SPINDLE_LOCAL_LITE.contextWindowTokens)).toBe(4_000);
  });
});
