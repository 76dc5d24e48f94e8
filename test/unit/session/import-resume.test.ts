/**
 * Resuming an imported Codex 0.169 session as Codex resumes it: its world state is the baseline,
 * so an unchanged session sends nothing, a change sends only its diff, and the sections Codex
 * keeps that Spindle does not model stay in the world state as they were.
 */
import { describe, expect, it } from "vitest";
import { ContextManager } from "../../../shared/context-manager/index.ts";
import { DEFAULT_MODEL_CATALOG, DEFAULT_MODEL_SLUG } from "../../../shared/models/index.ts";
import { sequentialIds } from "../../../shared/ports/index.ts";
import type {
  RolloutItem,
  RolloutLine,
  WorldStateSnapshot,
} from "../../../shared/protocol/index.ts";
import { reconstructRollout } from "../../../shared/rollout/index.ts";
import {
  configOfRollout,
  importedBaseline,
  MemoryRolloutSink,
  ThreadSession,
  truncationPolicyOf,
} from "../../../shared/session/index.ts";
import { applyMergePatch } from "../../../shared/world-state/index.ts";
import { resumable169 } from "../../fixtures/codex-rollouts.ts";
import {
  ManualClock,
  QUIET_TURN_LINES,
  RecordingClient,
  runTurn,
  shapeOf,
} from "../helpers/engine.ts";

/** 2026-11-24 10:00 in Europe/Berlin, the day the session's world state was last told. */
const SAME_DAY = Date.UTC(2026, 10, 24, 9, 0, 0);

/** What importing the fixture gives the engine: the configuration, the rebuilt state, the line. */
function imported(nowMs = SAME_DAY) {
  const upload = resumable169().lines as unknown as RolloutLine[];
  const numbered = upload.map((line, i) => ({ seq: i + 1, line }));
  const { config } = configOfRollout(DEFAULT_MODEL_CATALOG, DEFAULT_MODEL_SLUG, numbered);
  const state = reconstructRollout(upload, { truncation: truncationPolicyOf(config) });
  const codex = state.history.worldStateBaseline;
  const baseline = importedBaseline(DEFAULT_MODEL_CATALOG, config, upload, state);
  if (baseline === undefined || codex === undefined) throw new Error("expected a baseline");
  state.history.worldStateBaseline = baseline;
  const sink = new MemoryRolloutSink();
  const client = new RecordingClient();
  const clock = new ManualClock(nowMs);
  const session = new ThreadSession(
    {
      config,
      history: new ContextManager(state.history),
      ...(state.previousTurnSettings ? { previousTurnSettings: state.previousTurnSettings } : {}),
    },
    {
      clock,
      ids: sequentialIds("u"),
      catalog: DEFAULT_MODEL_CATALOG,
      defaultModel: DEFAULT_MODEL_SLUG,
      modelClient: () => client,
      sink,
    },
  );
  return { h: { session, sink, client, deps: undefined as never }, upload, codex, baseline, clock };
}

function worldStateLines(items: readonly RolloutItem[]) {
  return items.flatMap((i) => (i.type === "world_state" ? [i.payload] : []));
}

const CODEX_ONLY = ["apps_instructions", "host_skills", "model_catalog", "realtime", "skills"];

describe("resuming an imported Codex 0.169 session", () => {
  it("takes Codex's world state as the baseline: Spindle's sections in its terms, Codex's own kept, the cwd a plain path with its shell and status", () => {
    const { codex, baseline } = imported();
    for (const id of CODEX_ONLY) expect(baseline[id]).toEqual(codex[id]);
    expect(baseline.environments).toMatchObject({
      current_date: "2026-11-24",
      environments: { local: { cwd: "/work/app", status: "available", shell: "zsh" } },
      timezone: "Europe/Berlin",
    });
    expect(baseline.model).toEqual({ slug: "spindle-local" });
  });

  it("an unchanged session resumes with no new context item and no world_state line", async () => {
    const { h } = imported();
    await runTurn(h, "and the release notes?");
    expect(shapeOf(h.sink.items)).toEqual(QUIET_TURN_LINES);
    // The request is the imported history and the new input, nothing restated.
    const prompt = h.client.prompts[0];
    expect(prompt?.input.length).toBe(h.session.history.items.length - 1);
  });

  it("a change renders only its diff, and the patch never removes Codex's own sections", async () => {
    const { h, baseline, clock } = imported();
    clock.ms = SAME_DAY + 86_400_000;
    await runTurn(h, "next day", { cwd: "/work/app/docs" });
    const [patch, ...rest] = worldStateLines(h.sink.items);
    expect(rest).toEqual([]);
    expect(patch?.full).toBe(false);
    const state = patch?.state as WorldStateSnapshot;
    expect(Object.keys(state)).toEqual(["environments"]);
    const after = applyMergePatch(baseline, state);
    for (const id of CODEX_ONLY) expect(after[id]).toEqual(baseline[id]);
    const context = h.session.history.items.filter(
      (i) => i.type === "message" && i.role !== "assistant",
    );
    expect(context.at(-2)).toMatchObject({
      role: "user",
      content: [
        { text: expect.stringMatching(/^<environment_context>\n {2}<cwd>\/work\/app\/docs/) },
      ],
    });
  });

  it("the import's world_state line, replayed, is the same baseline (a restore or cold start resumes alike)", () => {
    const { upload, baseline } = imported();
    const lines = [
      ...upload,
      {
        timestamp: "2026-11-25T00:00:00.000Z",
        type: "world_state",
        payload: { full: true, state: baseline },
      } as RolloutLine,
    ];
    const truncation = { mode: "tokens", limit: 10_000 } as const;
    expect(reconstructRollout(lines, { truncation }).history.worldStateBaseline).toEqual(baseline);
    // A Spindle rollout (one with a spindle_config line) is resumed from its own world state.
    const own = [...lines, { timestamp: "x", type: "spindle_config", payload: {} } as RolloutLine];
    const state = reconstructRollout(own, { truncation });
    expect(
      importedBaseline(DEFAULT_MODEL_CATALOG, imported().h.session.state.config, own, state),
    ).toBeUndefined();
  });
});
