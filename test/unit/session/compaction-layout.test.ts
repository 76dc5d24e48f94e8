import { describe, expect, it } from "vitest";
import { SPINDLE_LOCAL_LITE } from "../../../shared/models/index.ts";
import type {
  MessageItem,
  ResponseItem,
  RolloutItem,
  RolloutLine,
} from "../../../shared/protocol/index.ts";
import type { ModelClient, ModelPrompt } from "../../../shared/providers/index.ts";
import { LocalModelClient } from "../../../shared/providers/index.ts";
import {
  createCheckpoint,
  reconstructFromCheckpoint,
  reconstructRollout,
} from "../../../shared/rollout/index.ts";
import {
  SUMMARIZATION_REQUEST,
  summaryMessage,
  truncationPolicyOf,
  withContextBeforeLastRealUser,
} from "../../../shared/session/index.ts";
import {
  AUTO_COMPACTION_TASK_LINES,
  asLines,
  drain,
  type Harness,
  LOOKUP_TOOL,
  newSession,
  QUIET_TURN_LINES,
  replayed,
  resume,
  runTurn,
  StallingClient,
  shapeOf,
  text,
  textOfTokens,
} from "../helpers/engine.ts";

const textOfMessage = (m: MessageItem) =>
  m.content.map((p) => (p.type === "input_image" ? "" : p.text)).join("");

const user = (t: string): MessageItem => ({
  type: "message",
  role: "user",
  content: [{ type: "input_text", text: t }],
});

const CONFIG = {
  model: SPINDLE_LOCAL_LITE.slug,
  cwd: "/repo",
  agents_md: { directory: "/repo", text: "Be tidy." },
};

/** A kept user message as the compaction writes it: a fresh message with an id. */
const kept = (t: string) => ({ ...user(t), id: expect.stringMatching(/^msg_/) });

function linesOfType<T extends RolloutItem["type"]>(
  items: readonly RolloutItem[],
  type: T,
): Extract<RolloutItem, { type: T }>[] {
  return items.filter((i): i is Extract<RolloutItem, { type: T }> => i.type === type);
}

/** The first turn's context items (recorded before its user message). */
function firstContext(h: Harness): ResponseItem[] {
  const items = linesOfType(h.sink.items, "response_item").map((l) => l.payload);
  const userAt = items.findIndex((i) => i.type === "message" && i.role === "user" && i.id);
  return items.slice(0, userAt);
}

function stampedWith(turnId: string, items: readonly ResponseItem[]): ResponseItem[] {
  return items.map((item) =>
    item.type === "other"
      ? item
      : { ...item, internal_chat_message_metadata_passthrough: { turn_id: turnId } },
  );
}

function compactedPayload(items: readonly RolloutItem[]) {
  const [line] = linesOfType(items, "compacted");
  if (line === undefined) throw new Error("no compacted line");
  return line.payload;
}

/** Checkpoint at every split point plus the later lines equals the full replay (invariant 7). */
function expectCheckpointsEqualReplay(items: readonly RolloutItem[], h: Harness): void {
  const lines: RolloutLine[] = asLines(items);
  const truncation = truncationPolicyOf(h.session.state.config);
  const full = reconstructRollout(lines, { truncation });
  for (let k = 0; k <= lines.length; k++) {
    const checkpoint = createCheckpoint(lines.slice(0, k), { truncation });
    expect(reconstructFromCheckpoint(checkpoint, lines.slice(k), { truncation })).toEqual(full);
  }
}

/** The live state equals the replayed one, and both send the same next prompt byte for byte. */
async function expectReplayEqualsLive(h: Harness): Promise<void> {
  const cold = replayed(h);
  expect(cold.session.history.toState()).toEqual(h.session.history.toState());
  expect(JSON.stringify(cold.session.previewPrompt())).toBe(
    JSON.stringify(h.session.previewPrompt()),
  );
}

describe("withContextBeforeLastRealUser (Codex's placement for compactions that keep the summary last)", () => {
  const ctx = [user("<environment_context>\n  <cwd>/r</cwd>\n</environment_context>")];
  const summary = summaryMessage("S");

  it("puts the context right above the last real user message", () => {
    expect(withContextBeforeLastRealUser([user("a"), user("b"), summary], ctx)).toEqual([
      user("a"),
      ...ctx,
      user("b"),
      summary,
    ]);
  });

  it("above the summary when no user message was kept, at the end when there is nothing", () => {
    expect(withContextBeforeLastRealUser([summary], ctx)).toEqual([...ctx, summary]);
    expect(withContextBeforeLastRealUser([], ctx)).toEqual(ctx);
  });
});

describe("automatic compaction before a turn (the layout Codex 0.169 sends)", () => {
  async function compactBeforeThird() {
    const h = newSession(CONFIG);
    await runTurn(h, "first");
    await runTurn(h, "second");
    const mark = h.sink.items.length;
    // A tiny limit, so the third turn compacts first.
    const run = await drain(h.session.runTurn(text("third"), { auto_compact_fraction: 0.01 }));
    return { h, mark, ...run };
  }

  it("re-injects the turn's context above the last real user message; the turn then sends only its input", async () => {
    const { h, mark, events, outcome } = await compactBeforeThird();
    const compactionId = events.find((e) => e.type === "compaction.completed")?.turn_id ?? "";
    const lines = h.sink.items.slice(mark);
    expect(shapeOf(lines)).toEqual([...AUTO_COMPACTION_TASK_LINES, ...QUIET_TURN_LINES]);
    const { message: summary, replacement_history: replacement } = compactedPayload(lines);
    // Older users, the context (as the first turn sent it, under the compaction's turn id), the
    // last real user message, the summary.
    expect(replacement).toEqual([
      kept("first"),
      ...stampedWith(compactionId, firstContext(h)),
      kept("second"),
      { ...summaryMessage(summary), id: expect.stringMatching(/^msg_/) },
    ]);
    const [firstWorldState] = linesOfType(h.sink.items, "world_state");
    const [firstTurnContext] = linesOfType(h.sink.items, "turn_context");
    expect(lines[3]).toEqual(firstWorldState);
    expect(lines[4]).toEqual({
      type: "turn_context",
      payload: { ...firstTurnContext?.payload, turn_id: compactionId },
    });
    // The user turn's request: the replacement, then its input. Nothing re-sent after the summary.
    const third = lines[9]?.type === "response_item" ? lines[9].payload : undefined;
    expect(h.client.prompts.at(-1)?.input).toEqual([...(replacement ?? []), third]);
    expect(outcome.status).toBe("completed");
    expect(h.session.history.referenceContextItem?.turn_id).toBe(outcome.turn_id);
  });

  it("replays to the live state, from the whole rollout or a checkpoint; a cold start sends the same prompt", async () => {
    const { h } = await compactBeforeThird();
    await expectReplayEqualsLive(h);
    expectCheckpointsEqualReplay(h.sink.items, h);
    const cold = replayed(h);
    await runTurn(h, "fourth");
    await runTurn(cold, "fourth");
    expect(cold.client.prompts.at(-1)).toEqual(h.client.prompts.at(-1));
  });

  it("a thread rebuilt right after the compaction (before the turn started) is as it was, and sends no context either", async () => {
    const h = newSession(CONFIG);
    await runTurn(h, "first");
    await runTurn(h, "second");
    const mark = h.sink.items.length;
    const gen = h.session.runTurn(text("third"), { auto_compact_fraction: 0.01 });
    let next = await gen.next();
    while (!next.done && next.value.type !== "compaction.completed") next = await gen.next();
    // The instance is lost here: the compaction task is complete, the user turn not started.
    const prefix = [...h.sink.items];
    const live = h.session.history.toState();
    await drain(gen);
    const lost = replayed(newSession(CONFIG), prefix);
    expect(lost.session.history.toState()).toEqual(live);
    expect(live.referenceContextItem).toEqual(linesOfType(prefix, "turn_context").at(-1)?.payload);
    lost.sink.items.push(...prefix);
    const from = lost.sink.items.length;
    await runTurn(lost, "third");
    expect(shapeOf(lost.sink.items.slice(from)).slice(0, 3)).toEqual([
      "event_msg/task_started",
      "turn_context",
      "response_item/user",
    ]);
    const replacement = compactedPayload(h.sink.items.slice(mark)).replacement_history ?? [];
    expect(lost.client.prompts.at(-1)?.input.slice(0, -1)).toEqual(replacement);
  });
});

describe("manual compaction", () => {
  it("keeps no context: the next turn re-injects it after the summary", async () => {
    const h = newSession(CONFIG);
    await runTurn(h, "first");
    const context = firstContext(h);
    const { outcome } = await drain(h.session.compact("manual"));
    if (outcome.status !== "completed") throw new Error("expected completion");
    expect(outcome.replacement_history).toEqual([
      kept("first"),
      { ...summaryMessage(outcome.summary), id: expect.stringMatching(/^msg_/) },
    ]);
    const { turn_id } = await runTurn(h, "second");
    const sent = h.client.prompts.at(-1)?.input ?? [];
    expect(sent.slice(0, 2)).toEqual(outcome.replacement_history);
    expect(sent.slice(2, 4)).toEqual(stampedWith(turn_id, context));
    expect(sent.slice(4).map((i) => i.type === "message" && i.content)).toEqual([
      [{ type: "input_text", text: "second" }],
    ]);
  });
});

describe("compaction within a turn (between sampling steps)", () => {
  const MID = { ...CONFIG, tools: [LOOKUP_TOOL], auto_compact_fraction: 0.3 };

  /** A turn that calls a tool, then a tool output big enough to pass 0.3 of the 16k window. */
  async function compactAfterToolOutput(model?: ModelClient) {
    const h = newSession(MID, 1000, model === undefined ? {} : { model });
    await runTurn(h, "first");
    const paused = await runTurn(h, '/call lookup {"q":1}');
    if (paused.status !== "requires_action") throw new Error("expected a pause");
    const mark = h.sink.items.length;
    return { h, mark, paused };
  }

  it("re-injects the turn's context above the last real user message and keeps the summary last in the next request", async () => {
    const { h, mark, paused } = await compactAfterToolOutput();
    const output = textOfTokens(6000);
    const done = await resume(h, paused, (calls) =>
      calls.map((c) => ({ call_id: c.call_id, output })),
    );
    expect(done.status).toBe("completed");
    const lines = h.sink.items.slice(mark);
    expect(shapeOf(lines)).toEqual([
      "response_item/function_call_output",
      "spindle_request",
      "compacted",
      "world_state",
      "turn_context",
      "event_msg/token_count",
      "spindle_request",
      "response_item/assistant",
      "event_msg/token_count",
      "event_msg/task_complete",
    ]);
    const { message: summary, replacement_history: replacement } = compactedPayload(lines);
    expect(replacement).toEqual([
      kept("first"),
      ...stampedWith(paused.turn_id, firstContext(h)),
      kept('/call lookup {"q":1}'),
      { ...summaryMessage(summary), id: expect.stringMatching(/^msg_/) },
    ]);
    // The summarizer read the tool output; the next request is the replacement, summary last.
    const [summarized, next] = h.client.prompts.slice(-2);
    expect(summarized?.input.at(-1)).toEqual(user(SUMMARIZATION_REQUEST));
    expect(JSON.stringify(summarized?.input)).toContain(output);
    expect(next?.input).toEqual(replacement);
    // The turn's own turn_context again, and the same snapshot as its context describes.
    const turnContexts = linesOfType(h.sink.items, "turn_context");
    expect(lines[4]).toEqual(turnContexts.find((l) => l.payload.turn_id === paused.turn_id));
    expect(lines[3]).toEqual(linesOfType(h.sink.items, "world_state")[0]);
  });

  it("replays to the live state (checkpoints too) and the next turn sends only its input", async () => {
    const { h, paused } = await compactAfterToolOutput();
    const output = textOfTokens(6000);
    await resume(h, paused, (calls) => calls.map((c) => ({ call_id: c.call_id, output })));
    await expectReplayEqualsLive(h);
    expectCheckpointsEqualReplay(h.sink.items, h);
    const mark = h.sink.items.length;
    await runTurn(h, "after");
    expect(shapeOf(h.sink.items.slice(mark))).toEqual(QUIET_TURN_LINES);
  });

  it("an interrupt during it ends the turn interrupted with history as it was", async () => {
    // Answers normally; the summarization request stalls, and the user interrupts meanwhile.
    const controller = new AbortController();
    const local = new LocalModelClient();
    const stalling = new StallingClient();
    const model: ModelClient = {
      stream(prompt: ModelPrompt, signal?: AbortSignal) {
        const last = prompt.input.toArray().at(-1);
        if (last?.type === "message" && textOfMessage(last) === SUMMARIZATION_REQUEST) {
          setTimeout(() => controller.abort(), 1);
          return stalling.stream(prompt, signal);
        }
        return local.stream(prompt);
      },
    };
    const { h, mark, paused } = await compactAfterToolOutput(model);
    if (paused.status !== "requires_action") return;
    const before = h.session.history.items.length;
    const { outcome } = await drain(
      h.session.resumeTurn(
        paused.turn_id,
        paused.pending_calls,
        paused.pending_calls.map((c) => ({ call_id: c.call_id, output: textOfTokens(6000) })),
        controller.signal,
      ),
    );
    expect(stalling.started).toBe(1);
    expect(outcome).toEqual({ status: "interrupted", turn_id: paused.turn_id });
    expect(shapeOf(h.sink.items.slice(mark))).toEqual([
      "response_item/function_call_output",
      "spindle_request",
      "response_item/user",
      "event_msg/turn_aborted",
    ]);
    expect(linesOfType(h.sink.items, "compacted")).toEqual([]);
    // The output and the <turn_aborted> fragment joined; nothing was replaced.
    expect(h.session.history.items).toHaveLength(before + 2);
  });
});
