import type { TruncationPolicy } from "../context-manager/index.ts";
import type { ServerTool } from "../mcp/index.ts";
import type { ModelInfo } from "../models/index.ts";
import type {
  FunctionTool,
  Prompt,
  ReasoningEffort,
  ReasoningSummary,
  SessionConfiguration,
  TurnContextItem,
} from "../protocol/index.ts";
import { hasNetworkAccess, type WorldStateInput } from "../world-state/index.ts";
import { boundedAdditionalContext } from "./additional-context.ts";
import { effectiveBaseInstructions, isUtcZone } from "./configuration.ts";

/** The frozen settings of one turn (design §3). Built once when the turn starts; never changed. */
export interface TurnContext {
  readonly turnId: string;
  readonly config: Readonly<SessionConfiguration>;
  readonly model: ModelInfo;
  readonly baseInstructions: string;
  readonly truncationPolicy: TruncationPolicy;
  /** The calendar date in the thread's timezone when the turn started (YYYY-MM-DD). */
  readonly currentDate: string;
  /** The thread's reasoning settings: its override, else the model's defaults. */
  readonly effort?: ReasoningEffort;
  readonly summary: ReasoningSummary;
  /** What the turn's requests carry besides history and tools (`reasoning`, `text`). */
  readonly request: Pick<Prompt, "reasoning" | "text">;
  /**
   * The turn's additional context, bounded (`boundedAdditionalContext`); undefined for a turn
   * rebuilt to resume after an eviction, whose request is gone.
   */
  readonly additionalContext?: Readonly<Record<string, string>>;
}

/**
 * What one sampling step sees (design §3): environments, AGENTS.md, custom sections and tools,
 * captured once so the prompt text and the tools channel come from the same capture.
 */
export interface StepContext {
  readonly worldState: WorldStateInput;
  /** Every tool of the step's prompt: the client's, then the servers' (`serverTools`' specs). */
  readonly tools: readonly FunctionTool[];
  /** The tools of `tools` that an MCP server runs (empty until `withServerTools` joins them). */
  readonly serverTools: readonly ServerTool[];
}

export function truncationPolicyOf(config: SessionConfiguration): TruncationPolicy {
  return "tokens" in config.truncation
    ? { mode: "tokens", limit: config.truncation.tokens }
    : { mode: "bytes", limit: config.truncation.bytes };
}

/**
 * Formatters by timezone. Building an `Intl.DateTimeFormat` costs far more than formatting with
 * one, and every turn needs a date; a thread uses one or two timezones.
 */
const dateFormats = new Map<string, Intl.DateTimeFormat>();
const MAX_CACHED_FORMATS = 64;

const twoDigits = (n: number) => (n < 10 ? `0${n}` : String(n));

/** YYYY-MM-DD of an instant in an IANA timezone. */
export function calendarDate(epochMs: number, timezone: string): string {
  if (isUtcZone(timezone)) {
    // As `Intl` writes it for en-CA: the year unpadded, month and day in two digits.
    const date = new Date(epochMs);
    return `${date.getUTCFullYear()}-${twoDigits(date.getUTCMonth() + 1)}-${twoDigits(date.getUTCDate())}`;
  }
  let format = dateFormats.get(timezone);
  if (format === undefined) {
    // en-CA formats dates as YYYY-MM-DD.
    format = new Intl.DateTimeFormat("en-CA", {
      timeZone: timezone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
    });
    if (dateFormats.size >= MAX_CACHED_FORMATS) dateFormats.clear();
    dateFormats.set(timezone, format);
  }
  return format.format(new Date(epochMs));
}

export function buildTurnContext(
  turnId: string,
  config: SessionConfiguration,
  model: ModelInfo,
  nowMs: number,
  additionalContext?: Readonly<Record<string, string>>,
): TurnContext {
  const frozen = structuredClone(config);
  const effort = frozen.reasoning?.effort ?? model.reasoning?.effort;
  const summary = frozen.reasoning?.summary ?? model.reasoning?.summary ?? "auto";
  return Object.freeze({
    turnId,
    config: frozen,
    model,
    baseInstructions: effectiveBaseInstructions(frozen, model),
    truncationPolicy: truncationPolicyOf(frozen),
    currentDate: calendarDate(nowMs, frozen.timezone),
    ...(effort === undefined ? {} : { effort }),
    summary,
    request: requestSettings(model, effort, summary),
    ...(additionalContext === undefined
      ? {}
      : { additionalContext: Object.freeze(boundedAdditionalContext(additionalContext)) }),
  });
}

/**
 * As Codex's request builder: a reasoning model gets `reasoning {effort, summary}`, the summary
 * left out when it is `none`; a model with a verbosity gets `text {verbosity}`.
 */
function requestSettings(
  model: ModelInfo,
  effort: ReasoningEffort | undefined,
  summary: ReasoningSummary,
): TurnContext["request"] {
  const request: TurnContext["request"] = {};
  if (model.reasoning !== undefined) {
    request.reasoning = {
      ...(effort === undefined ? {} : { effort }),
      ...(summary === "none" ? {} : { summary }),
    };
  }
  if (model.verbosity !== undefined) request.text = { verbosity: model.verbosity };
  return request;
}

/**
 * Captures the step's world-state input. `previousModel` comes from the previous turn's settings and
 * lets the model section announce a switch even when the world-state baseline is gone.
 */
export function captureStepContext(
  turn: TurnContext,
  nowMs: number,
  previousModel: string | undefined,
): StepContext {
  const c = turn.config;
  const input: WorldStateInput = {
    model: { slug: turn.model.slug, instructions: turn.baseInstructions },
    permissions: c.permissions,
    environments: c.environments,
    currentDate: calendarDate(nowMs, c.timezone),
    timezone: c.timezone,
    contextSections: c.context_sections,
  };
  if (previousModel !== undefined) input.previousModel = previousModel;
  if (c.include_environment_context === false) input.includeEnvironmentContext = false;
  if (turn.additionalContext !== undefined) input.additionalContext = turn.additionalContext;
  if (c.collaboration_mode) input.collaborationMode = c.collaboration_mode;
  if (c.agents_md) input.agentsMd = c.agents_md;
  if (c.network) input.network = c.network;
  if (c.personality !== undefined) {
    // A name the catalog does not know is taken as the personality text itself (own names only:
    // `constructor` or `__proto__` is text, not the prototype's member).
    const known = turn.model.personalities;
    const name = c.personality;
    const message = Object.hasOwn(known, name) ? (known[name] ?? name) : name;
    input.personality = { name, message };
  }
  return Object.freeze({ worldState: Object.freeze(input), tools: c.tools, serverTools: [] });
}

/** The rollout `turn_context` payload of a turn (reference §1.5). Absent settings are omitted. */
export function toTurnContextItem(turn: TurnContext): TurnContextItem {
  const c = turn.config;
  const p = c.permissions;
  // Keys in Codex's serialization order.
  return {
    turn_id: turn.turnId,
    cwd: c.environments[0]?.cwd ?? "/",
    ...(c.environments.length > 1
      ? { environments: c.environments.map((e) => ({ environment_id: e.id, cwd: e.cwd })) }
      : {}),
    current_date: turn.currentDate,
    timezone: c.timezone,
    approval_policy: p.approval_policy,
    // Tagged `type`, as Codex writes it since 0.59 (it reads no `mode` tag any more).
    sandbox_policy: {
      type: p.sandbox,
      network_access: hasNetworkAccess(p),
      ...(p.writable_roots.length > 0 ? { writable_roots: [...p.writable_roots] } : {}),
    },
    ...(c.network
      ? {
          network: {
            allowed_domains: [...c.network.allowed_domains],
            denied_domains: [...c.network.denied_domains],
          },
        }
      : {}),
    model: turn.model.slug,
    ...(turn.model.compHash === undefined ? {} : { comp_hash: turn.model.compHash }),
    ...(c.personality !== undefined ? { personality: c.personality } : {}),
    ...(c.collaboration_mode ? { collaboration_mode: { ...c.collaboration_mode } } : {}),
    ...(turn.effort === undefined ? {} : { effort: turn.effort }),
    summary: turn.summary,
    ...(c.developer_instructions !== undefined
      ? { developer_instructions: c.developer_instructions }
      : {}),
    truncation_policy: { ...turn.truncationPolicy },
  };
}
