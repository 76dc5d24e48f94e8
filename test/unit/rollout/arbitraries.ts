import fc from "fast-check";
import type {
  JsonObject,
  ResponseItem,
  RolloutLine,
  TurnContextItem,
} from "../../../shared/protocol/index.ts";
import {
  assistant,
  compacted,
  ctx,
  developer,
  ENV_CONTEXT,
  interAgentLine,
  item,
  rollback,
  taskComplete,
  taskStarted,
  tokenCount,
  turnAborted,
  turnContext,
  unreadableWorldState,
  usage,
  user,
  userMessageEvent,
  worldStateFull,
  worldStatePatch,
} from "./builders.ts";

/**
 * Random well-formed rollouts, as a thread writes them: turns (task_started, context items,
 * turn_context before or after the user message, world_state full/patch, the user message and
 * its event, model items and tool calls, token counts, task_complete / turn_aborted / nothing),
 * messages injected between turns, inter-agent messages, rollbacks, compaction tasks (with
 * replacement history, occasionally legacy ones without; some re-inject context and write a full
 * world_state and a turn_context after it, as an automatic compaction before a turn does),
 * mid-turn compactions and standalone tasks without a user message.
 */

const PERMISSIONS = "<permissions instructions>\nsandbox text\n</permissions instructions>";

type Body =
  | { kind: "assistant"; text: string }
  | { kind: "reasoning" }
  | { kind: "call"; output: string }
  | { kind: "custom"; output: string };

interface TurnAction {
  kind: "turn";
  model: string;
  compHash: string | undefined;
  contextAfterUserMessage: boolean;
  contextWithoutTurnId: boolean;
  devContext: boolean;
  envContext: boolean;
  worldState:
    | { kind: "none" }
    | { kind: "full"; state: JsonObject }
    | { kind: "patch"; patch: JsonObject }
    | { kind: "unreadable" };
  midCompaction: { windowNumber: number | undefined } | undefined;
  body: Body[];
  tokens: number | undefined;
  end: "complete" | "aborted" | "none";
}

type Action =
  | TurnAction
  | { kind: "inject"; text: string }
  | { kind: "interAgent" }
  | { kind: "rollback"; numTurns: number }
  | {
      kind: "compaction";
      legacy: boolean;
      windowNumber: number | undefined;
      /** With replacement history: the context, a full world_state and a turn_context. */
      injected: { state: JsonObject } | undefined;
    }
  | { kind: "standalone"; withContext: boolean };

const cwd = fc.constantFrom("/a", "/b", "/c");

const fullState: fc.Arbitrary<JsonObject> = fc.record({
  env: fc.record({ cwd }),
  perm: fc.record({ on: fc.boolean() }),
});

const patch: fc.Arbitrary<JsonObject> = fc.oneof(
  fc.record({ env: fc.record({ cwd }) }),
  fc.constant<JsonObject>({ perm: null }),
  fc.record({ extra: fc.record({ v: fc.integer({ min: 0, max: 3 }) }) }),
  fc.record({ perm: fc.record({ on: fc.boolean() }), env: fc.constant(null) }),
);

const body: fc.Arbitrary<Body> = fc.oneof(
  fc.record({
    kind: fc.constant("assistant" as const),
    text: fc.constantFrom("ok", "done", "hmm"),
  }),
  fc.constant({ kind: "reasoning" as const }),
  fc.record({
    kind: fc.constant("call" as const),
    output: fc.integer({ min: 1, max: 60 }).map((n) => "out ".repeat(n)),
  }),
  fc.record({
    kind: fc.constant("custom" as const),
    output: fc.integer({ min: 1, max: 60 }).map((n) => "patched ".repeat(n)),
  }),
);

const turnAction: fc.Arbitrary<TurnAction> = fc.record({
  kind: fc.constant("turn" as const),
  model: fc.constantFrom("m1", "m2", "m3"),
  compHash: fc.option(fc.constantFrom("h1", "h2"), { nil: undefined }),
  contextAfterUserMessage: fc.boolean(),
  contextWithoutTurnId: fc.constantFrom(false, false, false, false, true),
  devContext: fc.boolean(),
  envContext: fc.boolean(),
  worldState: fc.oneof(
    { weight: 2, arbitrary: fc.constant({ kind: "none" as const }) },
    { weight: 2, arbitrary: fullState.map((state) => ({ kind: "full" as const, state })) },
    { weight: 4, arbitrary: patch.map((p) => ({ kind: "patch" as const, patch: p })) },
    { weight: 1, arbitrary: fc.constant({ kind: "unreadable" as const }) },
  ),
  midCompaction: fc.option(
    fc.record({ windowNumber: fc.option(fc.integer({ min: 1, max: 9 }), { nil: undefined }) }),
    { nil: undefined, freq: 6 },
  ),
  body: fc.array(body, { maxLength: 3 }),
  tokens: fc.option(fc.integer({ min: 1, max: 500 }), { nil: undefined }),
  end: fc.constantFrom("complete", "complete", "complete", "aborted", "none"),
});

const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 10, arbitrary: turnAction },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("inject" as const),
      text: fc.constantFrom("fyi", "note"),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "interAgent" as const }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("rollback" as const),
      numTurns: fc.integer({ min: 0, max: 4 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("compaction" as const),
      legacy: fc.boolean().chain((b) => (b ? fc.boolean() : fc.constant(false))),
      windowNumber: fc.option(fc.integer({ min: 1, max: 9 }), { nil: undefined }),
      injected: fc.option(
        fullState.map((state) => ({ state })),
        { nil: undefined },
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("standalone" as const), withContext: fc.boolean() }),
  },
);

function bodyLines(items: Body[], turnId: string): RolloutLine[] {
  return items.flatMap((b, i) => bodyItemLines(b, `${turnId}-call-${i}`));
}

function bodyItemLines(b: Body, callId: string): RolloutLine[] {
  switch (b.kind) {
    case "assistant":
      return [item(assistant(b.text))];
    case "reasoning":
      return [
        item({
          type: "reasoning",
          summary: [{ type: "summary_text", text: "thinking" }],
          content: null,
          encrypted_content: "gAAAA",
        }),
      ];
    case "call":
      return [
        item({ type: "function_call", name: "exec", arguments: "{}", call_id: callId }),
        item({ type: "function_call_output", call_id: callId, output: b.output }),
      ];
    case "custom":
      return [
        item({ type: "custom_tool_call", call_id: callId, name: "apply_patch", input: "x" }),
        item({ type: "custom_tool_call_output", call_id: callId, output: b.output }),
      ];
  }
}

function worldStateLine(ws: TurnAction["worldState"]): RolloutLine[] {
  switch (ws.kind) {
    case "none":
      return [];
    case "full":
      return [worldStateFull(ws.state)];
    case "patch":
      return [worldStatePatch(ws.patch)];
    case "unreadable":
      return [unreadableWorldState()];
  }
}

/** The rollout lines of `actions`, turn ids numbered in order. */
export function linesOf(actions: readonly Action[]): RolloutLine[] {
  const lines: RolloutLine[] = [];
  let n = 0;
  for (const a of actions) {
    n += 1;
    const id = `t${n}`;
    switch (a.kind) {
      case "turn": {
        const extra: Partial<TurnContextItem> = a.contextWithoutTurnId ? {} : { turn_id: id };
        if (a.compHash !== undefined) extra.comp_hash = a.compHash;
        const context = [turnContext(ctx(a.model, extra)), ...worldStateLine(a.worldState)];
        const input = `input ${n}`;
        lines.push(taskStarted(id));
        if (a.devContext) lines.push(item(developer(PERMISSIONS)));
        if (a.envContext) lines.push(item(user(ENV_CONTEXT)));
        if (!a.contextAfterUserMessage) lines.push(...context);
        lines.push(item(user(input)), userMessageEvent(input));
        if (a.contextAfterUserMessage) lines.push(...context);
        if (a.midCompaction !== undefined) {
          const replacement: ResponseItem[] = [user(input), user(`summary ${n}`)];
          lines.push(compacted(`summary ${n}`, replacement, a.midCompaction.windowNumber));
          lines.push(turnContext(ctx(a.model, { ...extra, effort: "high" })));
        }
        lines.push(...bodyLines(a.body, id));
        if (a.tokens !== undefined) lines.push(tokenCount(usage(a.tokens)));
        if (a.end === "complete") lines.push(taskComplete(id));
        if (a.end === "aborted") {
          lines.push(item(user("<turn_aborted>\ninterrupted\n</turn_aborted>")), turnAborted(id));
        }
        break;
      }
      case "inject":
        lines.push(item(user(`${a.text} ${n}`)));
        break;
      case "interAgent":
        lines.push(interAgentLine(`message ${n}`));
        break;
      case "rollback":
        lines.push(rollback(a.numTurns));
        break;
      case "compaction":
        lines.push(taskStarted(id));
        if (a.legacy) {
          lines.push(compacted(`legacy ${n}`));
        } else if (a.injected === undefined) {
          lines.push(compacted(`summary ${n}`, [user(`summary ${n}`)], a.windowNumber));
        } else {
          const replacement = [developer(PERMISSIONS), user(ENV_CONTEXT), user(`summary ${n}`)];
          lines.push(
            compacted(`summary ${n}`, replacement, a.windowNumber),
            worldStateFull(a.injected.state),
            turnContext(ctx("m1", { turn_id: id })),
          );
        }
        lines.push(taskComplete(id));
        break;
      case "standalone":
        lines.push(taskStarted(id));
        if (a.withContext) lines.push(turnContext(ctx("shell", { turn_id: id })));
        lines.push(item(assistant(`shell ${n}`)), tokenCount(null), taskComplete(id));
        break;
    }
  }
  return lines;
}

export const rollout: fc.Arbitrary<RolloutLine[]> = fc
  .array(action, { minLength: 1, maxLength: 14 })
  .map(linesOf);

/** Total turns asked for by the rollback lines among `lines`. */
export function rolledBackTurns(lines: readonly RolloutLine[]): number {
  let total = 0;
  for (const line of lines) {
    if (line.type === "event_msg" && line.payload.type === "thread_rolled_back") {
      total += line.payload.num_turns;
    }
  }
  return total;
}
