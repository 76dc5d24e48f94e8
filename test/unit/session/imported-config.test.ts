import { describe, expect, it } from "vitest";
import { turnRowsFromRollout } from "../../../durable-objects/thread/rollouts/turn-index.ts";
import { DEFAULT_MODEL_CATALOG, DEFAULT_MODEL_SLUG } from "../../../shared/models/index.ts";
import type { RolloutLine, SessionConfiguration } from "../../../shared/protocol/index.ts";
import {
  decodeRolloutJsonl,
  reconstructRollout,
  unreadLineWarnings,
} from "../../../shared/rollout/index.ts";
import { configOfRollout, resolveValidated } from "../../../shared/session/index.ts";
import { CODEX_FIXTURES, DEFAULT_CONFIG, jsonl } from "../../fixtures/codex-rollouts.ts";

const POLICY = { mode: "tokens", limit: 10_000 } as const;

function numbered(text: string) {
  return decodeRolloutJsonl(text).lines.map((line, i) => ({ seq: i + 1, line }));
}

const configOf = (lines: readonly { seq: number; line: RolloutLine }[]) =>
  configOfRollout(DEFAULT_MODEL_CATALOG, DEFAULT_MODEL_SLUG, lines);

describe("Codex rollouts of every shape, read", () => {
  for (const fixture of CODEX_FIXTURES) {
    it(`${fixture.name} (${fixture.versions}): configuration, warnings, turns, previous model`, () => {
      const lines = numbered(jsonl(fixture.lines));
      const { config, warnings } = configOf(lines);
      const previous = reconstructRollout(
        lines.map((l) => l.line),
        { truncation: POLICY },
      ).previousTurnSettings?.model;
      const turns = turnRowsFromRollout(lines).filter((t) => t.kind !== "compaction");
      const byCode = (code: string) =>
        fixture.expected.warnings.filter((w) => w.code === code).map((w) => w.message);
      expect({
        config,
        settingWarnings: warnings,
        unreadWarnings: unreadLineWarnings(lines),
        turnCount: turns.length,
        switchedFrom: previous === undefined || previous === config.model ? null : previous,
      }).toEqual({
        config: { ...DEFAULT_CONFIG, ...fixture.expected.config },
        settingWarnings: byCode("rollout_setting_unsupported"),
        unreadWarnings: byCode("rollout_line_unread"),
        turnCount: fixture.expected.turnCount,
        switchedFrom: fixture.expected.switchedFrom,
      });
    });
  }
});

const at = "2026-03-01T10:00:00.000Z";
const meta = (payload: object) =>
  ({ timestamp: at, type: "session_meta", payload: { id: "s", ...payload } }) as RolloutLine;
const turnContext = (payload: object) =>
  ({
    timestamp: at,
    type: "turn_context",
    payload: { cwd: "/r", model: "spindle-local", ...payload },
  }) as RolloutLine;
const spindleConfig = (payload: SessionConfiguration) =>
  ({ timestamp: at, type: "spindle_config", payload }) as RolloutLine;
const withSeqs = (lines: RolloutLine[]) => lines.map((line, i) => ({ seq: i + 1, line }));

describe("configOfRollout: a rollout's configuration", () => {
  it("takes the newest spindle_config line as it is, whatever turn_context follows it", () => {
    const older = { ...DEFAULT_CONFIG, environments: [{ id: "local", cwd: "/old" }] };
    const newer = { ...DEFAULT_CONFIG, model: "spindle-local-lite", timezone: "Europe/Paris" };
    const lines = withSeqs([
      meta({ cwd: "/meta" }),
      spindleConfig(older),
      spindleConfig(newer),
      turnContext({ cwd: "/context", timezone: "Asia/Tokyo" }),
    ]);
    expect(configOf(lines)).toEqual({ config: newer, warnings: [], stored: true });
  });

  it("repairs a spindle_config line that the API would refuse, and says it no longer holds the configuration", () => {
    const poisoned = {
      ...DEFAULT_CONFIG,
      model: "nope",
      environments: [{ id: "", cwd: "/w" }],
      timezone: "Not/AZone",
    };
    expect(configOf(withSeqs([meta({}), spindleConfig(poisoned)]))).toEqual({
      config: DEFAULT_CONFIG,
      warnings: [
        "rollout line 2 (spindle_config): environments cannot be used here (Too small: expected string to have >=1 characters at environments.0.id); the default is used instead",
        'rollout line 2 (spindle_config): model cannot be used here (Unknown model "nope".); the thread runs on spindle-local',
        "rollout line 2 (spindle_config): timezone cannot be used here (unknown IANA timezone: Not/AZone); the default is used instead",
      ],
      stored: false,
    });
  });

  it("reads the settings a newer thread_settings_applied event applies over the turn_context before it", () => {
    const applied = {
      timestamp: at,
      type: "event_msg",
      payload: {
        type: "other",
        original_type: "thread_settings_applied",
        thread_settings: {
          model: "spindle-local-lite",
          approval_policy: "never",
          cwd: "/r",
          reasoning_effort: "high",
        },
      },
    } as RolloutLine;
    const lines = withSeqs([
      meta({ cwd: "/r" }),
      turnContext({ timezone: "Europe/Paris", approval_policy: "untrusted" }),
      applied,
    ]);
    expect(configOf(lines)).toEqual({
      config: {
        ...DEFAULT_CONFIG,
        model: "spindle-local-lite",
        environments: [{ id: "local", cwd: "/r" }],
        timezone: "Europe/Paris",
        permissions: { ...DEFAULT_CONFIG.permissions, approval_policy: "never" },
        reasoning: { effort: "high" },
      },
      warnings: [],
      stored: false,
    });
  });

  it("carries a turn's reasoning effort and summary over as the thread's reasoning setting; a value the API does not take is left out with a warning", () => {
    const taken = configOf(
      withSeqs([meta({ cwd: "/r" }), turnContext({ effort: "xhigh", summary: "concise" })]),
    );
    expect({ reasoning: taken.config.reasoning, warnings: taken.warnings }).toEqual({
      reasoning: { effort: "xhigh", summary: "concise" },
      warnings: [],
    });
    const refused = configOf(withSeqs([meta({ cwd: "/r" }), turnContext({ effort: "turbo" })]));
    expect({ reasoning: refused.config.reasoning, warnings: refused.warnings }).toEqual({
      reasoning: undefined,
      warnings: [
        'rollout line 2 (turn_context): reasoning effort "turbo" is not one the model API takes',
      ],
    });
  });

  it("without any settings line, is the defaults at the session's cwd, or with no environment at all", () => {
    expect(configOf(withSeqs([meta({ cwd: "/meta" })])).config).toEqual({
      ...DEFAULT_CONFIG,
      environments: [{ id: "local", cwd: "/meta" }],
    });
    expect(configOf(withSeqs([meta({})])).config).toEqual(DEFAULT_CONFIG);
  });
});

describe("resolveValidated: a configuration request checked like the API's input", () => {
  it("keeps every field that passes, and the defaults apply as for a create", () => {
    expect(
      resolveValidated(
        { model: "spindle-local-lite", cwd: "/w", personality: "friendly" },
        DEFAULT_MODEL_CATALOG,
        DEFAULT_MODEL_SLUG,
      ),
    ).toEqual({
      config: {
        ...DEFAULT_CONFIG,
        model: "spindle-local-lite",
        environments: [{ id: "local", cwd: "/w" }],
        personality: "friendly",
      },
      dropped: [],
    });
  });

  it("drops what the schema refuses, keys it does not know, and a model with its provider", () => {
    const request = {
      model: "gpt-9",
      provider: "openai",
      tools: [{ name: "bad name!", description: "" }],
      surprise: true,
      timezone: "Europe/Paris",
    };
    expect(
      resolveValidated(
        request as unknown as Parameters<typeof resolveValidated>[0],
        DEFAULT_MODEL_CATALOG,
        DEFAULT_MODEL_SLUG,
      ),
    ).toEqual({
      config: { ...DEFAULT_CONFIG, timezone: "Europe/Paris" },
      dropped: [
        { field: "tools", reason: "tool names are 1-64 chars of [A-Za-z0-9_-] at tools.0.name" },
        { field: "surprise", reason: 'Unrecognized key: "surprise"' },
        { field: "model", reason: 'Unknown model "gpt-9".' },
      ],
    });
  });
});
