import type { ModelCatalog } from "../models/index.ts";
import {
  type RolloutLine,
  type SessionConfiguration,
  type ThreadConfig,
  ThreadConfigSchema,
  type TurnContextItem,
} from "../protocol/index.ts";
import { worldStateOf } from "../rollout/index.ts";
import {
  type CodexSettings,
  settingsFromSessionMeta,
  settingsFromTurnContext,
  settingsFromWorldState,
  threadSettingsAsTurnContext,
} from "./codex-settings.ts";
import { resolveSessionConfiguration } from "./configuration.ts";
import { InvalidConfigurationError, UnknownModelError } from "./errors.ts";

/** A rollout line with its 1-based number in the stored rollout. */
export interface NumberedLine {
  seq: number;
  line: RolloutLine;
}

/** The configuration a rollout gives a thread, and what of its settings did not carry over. */
export interface RolloutConfiguration {
  config: SessionConfiguration;
  /** One sentence per setting not carried over, naming its line. */
  warnings: string[];
  /**
   * The rollout's newest `spindle_config` line holds exactly `config`. Otherwise an import
   * writes `config` as a `spindle_config` line of its own, so a restore reads it back as is.
   */
  stored: boolean;
}

/** A setting request and the line each of its fields came from. */
interface Sourced {
  update: ThreadConfig;
  lineOf: Map<string, string>;
  warnings: string[];
}

const where = (seq: number, type: string) => `rollout line ${seq} (${type})`;

function addSource(into: Sourced, label: string, settings: CodexSettings): void {
  for (const [key, value] of Object.entries(settings.update)) {
    (into.update as Record<string, unknown>)[key] = value;
    into.lineOf.set(key, label);
  }
  into.warnings.push(...settings.notes.map((note) => `${label}: ${note}`));
}

/**
 * A rollout's configuration, validated like the API's own input (`resolveValidated`): its newest
 * readable `spindle_config` line; else, for a Codex rollout, the settings of its first
 * `session_meta`, then those its replayed world state holds (Codex ≈0.143+), then
 * those of its newest `turn_context` or `thread_settings_applied`, each overriding the one before
 * (Codex writes a `turn_context` only when a setting changed: the newest one is in force);
 * else the defaults at the session's cwd. Nothing in a rollout fails the configuration: what
 * cannot be used is replaced by the default, with a warning.
 */
export function configOfRollout(
  catalog: ModelCatalog,
  defaultModel: string,
  lines: readonly NumberedLine[],
): RolloutConfiguration {
  const own = lines.findLast((l) => l.line.type === "spindle_config");
  if (own?.line.type === "spindle_config") {
    const label = where(own.seq, "spindle_config");
    const resolved = resolveWithWarnings(
      catalog,
      defaultModel,
      { update: { ...own.line.payload }, lineOf: new Map(), warnings: [] },
      label,
    );
    const stored = resolved.warnings.length === 0 && sameJson(resolved.config, own.line.payload);
    return { ...resolved, stored };
  }
  const sourced: Sourced = { update: {}, lineOf: new Map(), warnings: [] };
  const meta = lines.find((l) => l.line.type === "session_meta");
  if (meta?.line.type === "session_meta") {
    addSource(sourced, where(meta.seq, "session_meta"), settingsFromSessionMeta(meta.line.payload));
  }
  const newestWorldState = lines.findLast((l) => l.line.type === "world_state");
  const worldState = newestWorldState && worldStateOf(lines.map((l) => l.line));
  if (worldState !== undefined && newestWorldState !== undefined) {
    const fromWorld = settingsFromWorldState(worldState);
    // The session's starting cwd does not move the environments the world state lists.
    if (fromWorld.update.environments) delete sourced.update.cwd;
    addSource(sourced, where(newestWorldState.seq, "world_state"), fromWorld);
  }
  for (const settings of newestTurnSettings(lines)) {
    addSource(sourced, where(settings.seq, settings.type), settingsFromTurnContext(settings.item));
  }
  return { ...resolveWithWarnings(catalog, defaultModel, sourced, undefined), stored: false };
}

/**
 * The newest `turn_context`, then a newer `thread_settings_applied` if there is one: it carries
 * no timezone, so the `turn_context` before it still gives that.
 */
function newestTurnSettings(lines: readonly NumberedLine[]) {
  const found: { seq: number; type: string; item: TurnContextItem }[] = [];
  for (let i = lines.length - 1; i >= 0; i--) {
    const numbered = lines[i];
    const line = numbered?.line;
    if (numbered === undefined || line === undefined) continue;
    if (line.type === "turn_context") {
      found.unshift({ seq: numbered.seq, type: "turn_context", item: line.payload });
      break;
    }
    const applied =
      line.type === "event_msg" &&
      line.payload.type === "other" &&
      line.payload.original_type === "thread_settings_applied" &&
      found.length === 0
        ? threadSettingsAsTurnContext(line.payload)
        : undefined;
    if (applied) found.push({ seq: numbered.seq, type: "thread_settings_applied", item: applied });
  }
  return found;
}

function resolveWithWarnings(
  catalog: ModelCatalog,
  defaultModel: string,
  sourced: Sourced,
  label: string | undefined,
): { config: SessionConfiguration; warnings: string[] } {
  const { config, dropped } = resolveValidated(sourced.update, catalog, defaultModel);
  const warnings = [...sourced.warnings];
  for (const { field, reason } of dropped) {
    const from = label ?? sourced.lineOf.get(field) ?? "rollout";
    const instead =
      field === "model" ? `the thread runs on ${config.model}` : "the default is used instead";
    warnings.push(`${from}: ${field} cannot be used here (${reason}); ${instead}`);
  }
  return { config, warnings };
}

/** A field of a configuration request refused, and why. */
export interface DroppedSetting {
  field: string;
  reason: string;
}

/**
 * `update` resolved over the defaults exactly as a create request would be: checked against the
 * API's schema (`ThreadConfigSchema`), then resolved (catalog, timezone, …). A field either check
 * refuses is left out, so it takes its default, and is listed in `dropped`; a refused model takes
 * its provider with it (the default model brings its own).
 */
export function resolveValidated(
  update: ThreadConfig,
  catalog: ModelCatalog,
  defaultModel: string,
): { config: SessionConfiguration; dropped: DroppedSetting[] } {
  const request: Record<string, unknown> = { ...update };
  const dropped: DroppedSetting[] = [];
  const drop = (field: string, reason: string) => {
    if (!Object.hasOwn(request, field)) return false;
    delete request[field];
    dropped.push({ field, reason });
    if (field === "model") delete request.provider;
    return true;
  };
  // Each round drops at least one field, so this ends.
  for (;;) {
    const parsed = ThreadConfigSchema.safeParse(request);
    if (!parsed.success) {
      let progressed = false;
      for (const issue of parsed.error.issues) {
        const fields =
          issue.code === "unrecognized_keys" ? issue.keys : [String(issue.path[0] ?? "")];
        const at = issue.path.length > 1 ? ` at ${issue.path.join(".")}` : "";
        for (const field of fields) progressed = drop(field, `${issue.message}${at}`) || progressed;
      }
      if (!progressed) throw new Error(`[config] cannot repair: ${parsed.error.message}`);
      continue;
    }
    try {
      const config = resolveSessionConfiguration(undefined, parsed.data, catalog, defaultModel);
      return { config, dropped };
    } catch (error) {
      const field =
        error instanceof UnknownModelError
          ? "model"
          : error instanceof InvalidConfigurationError
            ? error.path.split("/")[0]
            : undefined;
      if (field === undefined || !drop(field, (error as Error).message)) throw error;
    }
  }
}

/** Deep equality of JSON values, key order aside. */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const aKeys = Object.keys(a).filter((k) => (a as Json)[k] !== undefined);
  const bKeys = Object.keys(b).filter((k) => (b as Json)[k] !== undefined);
  if (aKeys.length !== bKeys.length) return false;
  return aKeys.every((k) => Object.hasOwn(b, k) && sameJson((a as Json)[k], (b as Json)[k]));
}

type Json = Record<string, unknown>;
