import { describe, expect, it } from "vitest";
import { ContextManager } from "../../../shared/context-manager/index.ts";
import { DEFAULT_MODEL_CATALOG, DEFAULT_MODEL_SLUG } from "../../../shared/models/index.ts";
import type {
  MessageItem,
  PermissionsConfig,
  ThreadConfig,
} from "../../../shared/protocol/index.ts";
import {
  buildTurnContext,
  captureStepContext,
  MemoryRolloutSink,
  recordContextUpdates,
  resolveSessionConfiguration,
  toTurnContextItem,
} from "../../../shared/session/index.ts";
import { T0 } from "../helpers/engine.ts";

function turnOf(config: ThreadConfig, turnId = "t1", nowMs = T0) {
  const resolved = resolveSessionConfiguration(
    undefined,
    config,
    DEFAULT_MODEL_CATALOG,
    DEFAULT_MODEL_SLUG,
  );
  const model = DEFAULT_MODEL_CATALOG.get(resolved.model);
  if (!model) throw new Error("model");
  return buildTurnContext(turnId, resolved, model, nowMs);
}

function update(
  history: ContextManager,
  config: ThreadConfig,
  opts: { previousModel?: string; turnId?: string } = {},
) {
  const turn = turnOf(config, opts.turnId);
  const sink = new MemoryRolloutSink();
  const result = recordContextUpdates(
    history,
    turn,
    captureStepContext(turn, T0, opts.previousModel),
    sink,
  );
  return { turn, sink, result };
}

function partTexts(item: MessageItem | undefined): string[] {
  return item?.content.map((p) => (p.type === "input_image" ? "" : p.text)) ?? [];
}

const CONFIG: ThreadConfig = {
  cwd: "/repo",
  developer_instructions: "Always answer in English.",
  agents_md: { directory: "/repo", text: "Run the tests." },
  personality: "pragmatic",
  collaboration_mode: { mode: "plan", instructions: "Plan before acting." },
  context_sections: {
    ticket: { role: "user", text: "Ticket 42" },
    policy: { role: "developer", text: "No deploys on Friday" },
  },
};

describe("build_initial_context (reference §5.3)", () => {
  it("merges developer sections into one message (permissions, developer instructions, then the rest) and user sections into one message", () => {
    const history = new ContextManager();
    const { result } = update(history, CONFIG);
    expect(result.full).toBe(true);
    expect(result.items.map((i) => i.role)).toEqual(["developer", "user"]);
    const dev = partTexts(result.items[0]);
    expect(dev[0]).toMatch(/^<permissions instructions>/);
    expect(dev[1]).toBe("Always answer in English.");
    expect(dev[2]).toMatch(/^<collaboration_mode>/);
    expect(dev[3]).toMatch(/^<personality_spec>/);
    expect(dev[4]).toMatch(/^<extension_context id="policy">/);
    expect(dev).toHaveLength(5);
    const user = partTexts(result.items[1]);
    expect(user[0]).toMatch(/^# AGENTS\.md instructions for \/repo/);
    expect(user[1]).toMatch(/^<environment_context>/);
    expect(user[2]).toMatch(/^<extension_context id="ticket">/);
    expect(user).toHaveLength(3);
  });

  it("takes a personality named like an Object member (`__proto__`, `constructor`) as its text", () => {
    for (const personality of ["__proto__", "constructor", "toString"]) {
      const { result } = update(new ContextManager(), { personality });
      const spec = partTexts(result.items[0]).find((t) => t.startsWith("<personality_spec>"));
      expect(spec, personality).toContain(`\n\n${personality}\n</personality_spec>`);
    }
  });

  it("build_initial_context prepends the model switch when the previous turn ran another model", () => {
    const { result } = update(
      new ContextManager(),
      { model: "spindle-local-lite" },
      { previousModel: "spindle-local" },
    );
    expect(partTexts(result.items[0])[0]).toMatch(/^<model_switch>/);
  });

  it("the model switch is a developer message of its own (Codex's standalone placement), before the merged bundle", () => {
    const { result } = update(
      new ContextManager(),
      { ...CONFIG, model: "spindle-local-lite" },
      { previousModel: "spindle-local" },
    );
    expect(result.items.map((i) => [i.role, partTexts(i).length])).toEqual([
      ["developer", 1],
      ["developer", 5],
      ["user", 3],
    ]);
    expect(partTexts(result.items[0])[0]).toMatch(/^<model_switch>/);
    expect(partTexts(result.items[1])[0]).toMatch(/^<permissions instructions>/);
  });

  it("stamps the turn id on every initial context item", () => {
    const { result } = update(new ContextManager(), CONFIG, { turnId: "turn-9" });
    for (const item of result.items) {
      expect(item.internal_chat_message_metadata_passthrough).toEqual({ turn_id: "turn-9" });
    }
  });
});

describe("record_context_updates (reference §5.2)", () => {
  it("writes full context, then turn_context, then a full world_state, and sets the reference and baseline", () => {
    const history = new ContextManager();
    const { sink, result, turn } = update(history, CONFIG);
    expect(sink.items.map((i) => i.type)).toEqual([
      "response_item",
      "response_item",
      "turn_context",
      "world_state",
    ]);
    const ws = sink.items[3];
    expect(ws?.type === "world_state" && ws.payload.full).toBe(true);
    expect(history.referenceContextItem).toEqual(toTurnContextItem(turn));
    expect(history.worldStateBaseline).toEqual(
      ws?.type === "world_state" ? ws.payload.state : undefined,
    );
    expect(history.items).toHaveLength(result.items.length);
  });

  it("writes only turn_context when nothing changed, and still advances the reference", () => {
    const history = new ContextManager();
    update(history, CONFIG, { turnId: "t1" });
    const before = history.items.length;
    const { sink, result, turn } = update(history, CONFIG, { turnId: "t2" });
    expect(result.full).toBe(false);
    expect(sink.items.map((i) => i.type)).toEqual(["turn_context"]);
    expect(history.items).toHaveLength(before);
    expect(history.referenceContextItem?.turn_id).toBe(turn.turnId);
  });

  it("writes the changed section's diff before a merge-patch world_state", () => {
    const history = new ContextManager();
    update(history, CONFIG);
    const { sink } = update(history, { ...CONFIG, cwd: "/other" }, { turnId: "t2" });
    expect(sink.items.map((i) => i.type)).toEqual(["response_item", "turn_context", "world_state"]);
    const [diff, , ws] = sink.items;
    expect(
      diff?.type === "response_item" && diff.payload.type === "message" && diff.payload.role,
    ).toBe("user");
    expect(ws?.type === "world_state" && ws.payload.full).toBe(false);
  });

  it("a diff with a model switch and a permissions change sends the switch alone, then the permissions, never bundled", () => {
    const history = new ContextManager();
    update(history, CONFIG);
    const { result } = update(
      history,
      {
        ...CONFIG,
        model: "spindle-local-lite",
        permissions: {
          sandbox: "read-only",
          approval_policy: "never",
          writable_roots: [],
          network_access: false,
        },
      },
      { turnId: "t2" },
    );
    expect(result.items.map((i) => [i.role, partTexts(i).map((t) => t.split(/[>\s]/)[0])])).toEqual(
      [
        ["developer", ["<model_switch"]],
        ["developer", ["<permissions"]],
        // The sandbox changed the environment's filesystem line.
        ["user", ["<environment_context"]],
      ],
    );
  });

  it("re-injects the full context after the reference is cleared (catalog 61)", () => {
    const history = new ContextManager();
    update(history, CONFIG);
    const summary: MessageItem = {
      type: "message",
      role: "user",
      content: [{ type: "input_text", text: "summary" }],
    };
    history.replace([summary]);
    history.referenceContextItem = undefined;
    const { result } = update(history, CONFIG, { turnId: "t2" });
    expect(result.full).toBe(true);
    expect(history.items[0]).toEqual(summary);
    expect(history.items.slice(1)).toEqual(result.items);
  });

  it("persists the current turn's turn_context on full reinjection after a model change (catalog 63)", () => {
    const history = new ContextManager();
    const { sink, turn } = update(
      history,
      { model: "spindle-local-lite" },
      { previousModel: "spindle-local" },
    );
    const tc = sink.items.find((i) => i.type === "turn_context");
    expect(tc?.payload).toEqual(toTurnContextItem(turn));
  });

  it("re-renders a section whose text is no longer in history even though its snapshot is unchanged", () => {
    const history = new ContextManager();
    update(history, CONFIG);
    const baseline = history.worldStateBaseline;
    const reference = history.referenceContextItem;
    history.replace([]);
    history.worldStateBaseline = baseline;
    history.referenceContextItem = reference;
    const { result, sink } = update(history, CONFIG, { turnId: "t2" });
    expect(result.full).toBe(false);
    expect(partTexts(result.items[0])[0]).toMatch(/^<permissions instructions>/);
    expect(sink.items.map((i) => i.type)).toEqual([
      "response_item",
      "response_item",
      "turn_context",
    ]);
  });
});

describe("toTurnContextItem", () => {
  it("serializes the turn's settings in Codex's field order with absent settings omitted", () => {
    const turn = turnOf(
      { cwd: "/repo", timezone: "Asia/Tokyo" },
      "t1",
      Date.UTC(2026, 2, 1, 16, 0, 0),
    );
    expect(JSON.stringify(toTurnContextItem(turn))).toBe(
      JSON.stringify({
        turn_id: "t1",
        cwd: "/repo",
        current_date: "2026-03-02",
        timezone: "Asia/Tokyo",
        approval_policy: "on-request",
        sandbox_policy: { type: "workspace-write", network_access: false },
        model: "spindle-local",
        summary: "auto",
        truncation_policy: { mode: "tokens", limit: 10000 },
      }),
    );
  });

  it("records network access for danger-full-access, which has no network sandbox, whatever the flag says", () => {
    const permissions: PermissionsConfig = {
      sandbox: "danger-full-access",
      approval_policy: "never",
      writable_roots: [],
      network_access: false,
    };
    expect(toTurnContextItem(turnOf({ cwd: "/repo", permissions })).sandbox_policy).toEqual({
      type: "danger-full-access",
      network_access: true,
    });
  });
});
