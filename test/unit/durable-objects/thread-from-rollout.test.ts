import { describe, expect, it } from "vitest";
import { configOfRollout, newestTimestamp } from "../../../durable-objects/thread-from-rollout.ts";
import { DEFAULT_MODEL_CATALOG } from "../../../shared/models/index.ts";
import type {
  RolloutLine,
  SessionConfiguration,
  TurnContextItem,
} from "../../../shared/protocol/index.ts";

const AT = "2026-03-01T10:00:00.000Z";

const sessionMeta = (cwd: string, timestamp = AT) =>
  ({ timestamp, type: "session_meta", payload: { id: "src", cwd } }) as RolloutLine;
const turnContext = (payload: Partial<TurnContextItem>, timestamp = AT) =>
  ({
    timestamp,
    type: "turn_context",
    payload: { cwd: "/", model: "spindle-local", ...payload },
  }) as RolloutLine;
const spindleConfig = (config: SessionConfiguration, timestamp = AT) =>
  ({ timestamp, type: "spindle_config", payload: config }) as RolloutLine;
const userMessage = (text: string, timestamp = AT) =>
  ({
    timestamp,
    type: "response_item",
    payload: { type: "message", role: "user", content: [{ type: "input_text", text }] },
  }) as RolloutLine;

/** The configuration a new thread gets from the catalog's defaults, at `cwd`. */
const defaults = (overrides: Partial<SessionConfiguration> = {}): SessionConfiguration => ({
  model: "spindle-local",
  provider: "local",
  permissions: {
    sandbox: "workspace-write",
    approval_policy: "on-request",
    writable_roots: [],
    network_access: false,
  },
  environments: [],
  timezone: "UTC",
  context_sections: {},
  tools: [],
  truncation: { tokens: 10_000 },
  ...overrides,
});

describe("configOfRollout: the configuration a rollout implies", () => {
  it("takes the newest spindle_config line as it is, whatever turn_context follows it", () => {
    const older = defaults({ environments: [{ id: "local", cwd: "/old" }] });
    const newer = defaults({
      model: "spindle-local-lite",
      environments: [{ id: "local", cwd: "/new" }],
      timezone: "Europe/Paris",
    });
    const lines = [
      sessionMeta("/meta"),
      spindleConfig(older),
      userMessage("hi"),
      spindleConfig(newer),
      turnContext({ cwd: "/context", model: "spindle-local", timezone: "Asia/Tokyo" }),
    ];
    expect(configOfRollout(DEFAULT_MODEL_CATALOG, lines, "/meta")).toEqual({
      ok: true,
      value: { config: newer, warnings: [] },
    });
  });

  it("without spindle_config, resolves the newest turn_context over the catalog defaults", () => {
    const lines = [
      sessionMeta("/meta"),
      turnContext({ cwd: "/first", model: "spindle-local", timezone: "Asia/Tokyo" }),
      userMessage("hi"),
      turnContext({
        cwd: "/second",
        model: "spindle-local-lite",
        timezone: "Europe/Paris",
        approval_policy: "never",
        sandbox_policy: { mode: "read-only", network_access: true },
        truncation_policy: { mode: "bytes", limit: 4_096 },
      }),
    ];
    expect(configOfRollout(DEFAULT_MODEL_CATALOG, lines, "/meta")).toEqual({
      ok: true,
      value: {
        config: defaults({
          model: "spindle-local-lite",
          environments: [{ id: "local", cwd: "/second" }],
          timezone: "Europe/Paris",
          permissions: {
            sandbox: "read-only",
            approval_policy: "never",
            writable_roots: [],
            network_access: true,
          },
          truncation: { bytes: 4_096 },
        }),
        warnings: [],
      },
    });
  });

  it("keeps the default for what the catalog does not know, and says so in a warning", () => {
    const lines = [
      sessionMeta("/meta"),
      turnContext({
        cwd: "/work",
        model: "gpt-5-codex",
        approval_policy: "sometimes",
        sandbox_policy: { mode: "workspace-write" },
      }),
    ];
    expect(configOfRollout(DEFAULT_MODEL_CATALOG, lines, "/meta")).toEqual({
      ok: true,
      value: {
        config: defaults({ environments: [{ id: "local", cwd: "/work" }] }),
        warnings: [
          "imported model gpt-5-codex is not supported here; the default is used",
          "imported permissions workspace-write/sometimes is not supported here; the default is used",
        ],
      },
    });
  });

  it("without either, is the defaults at the session's cwd, or with no environment at all", () => {
    const lines = [sessionMeta("/meta"), userMessage("hi")];
    expect(configOfRollout(DEFAULT_MODEL_CATALOG, lines, "/meta")).toEqual({
      ok: true,
      value: { config: defaults({ environments: [{ id: "local", cwd: "/meta" }] }), warnings: [] },
    });
    expect(configOfRollout(DEFAULT_MODEL_CATALOG, lines, undefined)).toEqual({
      ok: true,
      value: { config: defaults(), warnings: [] },
    });
  });

  it("refuses a setting the engine cannot use as invalid_request at /line/1", () => {
    const lines = [
      sessionMeta("/meta"),
      turnContext({ cwd: "/work", model: "spindle-local", timezone: "Mars/Olympus_Mons" }),
    ];
    expect(configOfRollout(DEFAULT_MODEL_CATALOG, lines, "/meta")).toEqual({
      ok: false,
      error: {
        code: "invalid_request",
        detail: "The rollout's settings cannot be used: unknown IANA timezone: Mars/Olympus_Mons",
        errors: [{ path: "/line/1", message: "unknown IANA timezone: Mars/Olympus_Mons" }],
      },
    });
  });
});

describe("newestTimestamp: a rebuilt thread's updated_at", () => {
  it("is the latest time among the lines, not the last line's", () => {
    const lines = [
      sessionMeta("/", "2026-03-05T12:00:00.000Z"),
      userMessage("copied", "2026-01-01T00:00:00.000Z"),
      userMessage("copied later", "2026-02-01T00:00:00.000Z"),
    ];
    expect(newestTimestamp(lines)).toBe("2026-03-05T12:00:00.000Z");
  });

  it("compares instants, not strings, and of equal instants takes the later line's text", () => {
    const lines = [
      userMessage("a", "2026-03-05T13:00:00+01:00"),
      userMessage("b", "2026-03-05T11:30:00.000Z"),
      userMessage("c", "2026-03-05T12:00:00Z"),
    ];
    expect(newestTimestamp(lines)).toBe("2026-03-05T12:00:00Z");
  });

  it("skips times that do not parse, and is undefined without any line", () => {
    const lines = [userMessage("a", "2026-03-05T12:00:00.000Z"), userMessage("b", "not a time")];
    expect(newestTimestamp(lines)).toBe("2026-03-05T12:00:00.000Z");
    expect(newestTimestamp([])).toBeUndefined();
    expect(newestTimestamp([userMessage("b", "not a time")])).toBeUndefined();
  });
});
