import type { ModelCatalog, ModelInfo } from "../models/index.ts";
import type {
  EnvironmentConfig,
  PermissionsConfig,
  SessionConfiguration,
  ThreadConfig,
  TruncationConfig,
  TurnContextItem,
} from "../protocol/index.ts";
import { InvalidConfigurationError, UnknownModelError } from "./errors.ts";

export const DEFAULT_PERMISSIONS: PermissionsConfig = {
  sandbox: "workspace-write",
  approval_policy: "on-request",
  writable_roots: [],
  network_access: false,
};
export const DEFAULT_TIMEZONE = "UTC";
/** Codex's default tool-output budget. */
export const DEFAULT_TRUNCATION: TruncationConfig = { tokens: 10_000 };
export const DEFAULT_ENVIRONMENT_ID = "local";

/**
 * Applies a create/override request to the current configuration (or to the defaults for a new
 * thread). Fields the request sets replace the current ones and become the new defaults; `null`
 * clears a clearable field; `context_sections` merges per id (null removes that id); `cwd` moves the
 * primary environment (or creates `local`).
 */
export function resolveSessionConfiguration(
  current: SessionConfiguration | undefined,
  update: ThreadConfig,
  catalog: ModelCatalog,
  defaultModel: string,
): SessionConfiguration {
  const modelSlug = update.model ?? current?.model ?? defaultModel;
  const model = catalog.get(modelSlug);
  if (model === undefined) throw new UnknownModelError(modelSlug);

  const next: SessionConfiguration = {
    model: model.slug,
    provider: update.provider ?? providerFor(current, update, model),
    permissions: update.permissions ?? current?.permissions ?? DEFAULT_PERMISSIONS,
    environments: resolveEnvironments(current?.environments ?? [], update),
    timezone: checkTimezone(update.timezone ?? current?.timezone ?? DEFAULT_TIMEZONE),
    context_sections: resolveSections(current?.context_sections ?? {}, update.context_sections),
    tools: update.tools ?? current?.tools ?? [],
    truncation: update.truncation ?? current?.truncation ?? DEFAULT_TRUNCATION,
  };
  setOptional(next, "base_instructions", update.base_instructions, current?.base_instructions);
  setOptional(
    next,
    "developer_instructions",
    update.developer_instructions,
    current?.developer_instructions,
  );
  setOptional(next, "personality", update.personality, current?.personality);
  setOptional(next, "collaboration_mode", update.collaboration_mode, current?.collaboration_mode);
  setOptional(next, "network", update.network, current?.network);
  setOptional(next, "agents_md", update.agents_md, current?.agents_md);
  setOptional(
    next,
    "auto_compact_fraction",
    update.auto_compact_fraction,
    current?.auto_compact_fraction,
  );
  setOptional(next, "reasoning", update.reasoning, current?.reasoning);
  return next;
}

/** A model switch without an explicit provider moves to the new model's own provider. */
function providerFor(
  current: SessionConfiguration | undefined,
  update: ThreadConfig,
  model: ModelInfo,
): string {
  if (current === undefined || update.model !== undefined) return model.provider;
  return current.provider;
}

function setOptional<K extends keyof SessionConfiguration>(
  target: SessionConfiguration,
  key: K,
  update: SessionConfiguration[K] | null | undefined,
  current: SessionConfiguration[K] | undefined,
): void {
  const value = update === undefined ? current : update;
  if (value !== null && value !== undefined) target[key] = value;
}

function resolveEnvironments(
  current: EnvironmentConfig[],
  update: ThreadConfig,
): EnvironmentConfig[] {
  const envs = update.environments ?? current;
  if (update.cwd === undefined) return envs.map((e) => ({ ...e }));
  const [primary, ...rest] = envs;
  const moved = primary
    ? { ...primary, cwd: update.cwd }
    : { id: DEFAULT_ENVIRONMENT_ID, cwd: update.cwd };
  return [moved, ...rest.map((e) => ({ ...e }))];
}

function resolveSections(
  current: SessionConfiguration["context_sections"],
  update: ThreadConfig["context_sections"],
): SessionConfiguration["context_sections"] {
  const next = { ...current };
  for (const [id, section] of Object.entries(update ?? {})) {
    if (section === null) delete next[id];
    else next[id] = { ...section };
  }
  return next;
}

/** The instructions a turn sends: the thread's override, else the model's own. */
export function effectiveBaseInstructions(config: SessionConfiguration, model: ModelInfo): string {
  return config.base_instructions ?? model.instructions;
}

/**
 * Names of the zones that are UTC all year (IANA names match without case). They need no `Intl`
 * to check or to date (`calendarDate`): its first use in an isolate costs about 10 ms (loading the
 * zone data), most of the first turn after a restart on a thread in the default timezone.
 */
const UTC_ZONES = new Set(["utc", "etc/utc", "gmt", "etc/gmt"]);

export function isUtcZone(timezone: string): boolean {
  return UTC_ZONES.has(timezone.toLowerCase());
}

function checkTimezone(timezone: string): string {
  if (isUtcZone(timezone)) return timezone;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
  } catch {
    throw new InvalidConfigurationError("timezone", `unknown IANA timezone: ${timezone}`);
  }
  return timezone;
}

const SANDBOX_MODES = new Set(["read-only", "workspace-write", "danger-full-access"]);
const APPROVAL_POLICIES = new Set(["never", "on-request", "on-failure", "untrusted"]);

/**
 * The thread configuration a Codex `turn_context` implies, for a rollout imported without
 * Spindle's own `spindle_config` line. What the item does not carry (tools, custom sections,
 * AGENTS.md text) keeps its default; values Spindle does not know (a sandbox mode, a model
 * missing from `knownModels`) are left out and listed in `dropped`.
 */
export function threadConfigFromTurnContext(
  item: TurnContextItem,
  knownModels: ReadonlySet<string>,
): { config: ThreadConfig; dropped: string[] } {
  const config: ThreadConfig = {};
  const dropped: string[] = [];
  if (knownModels.has(item.model)) config.model = item.model;
  else dropped.push(`model ${item.model}`);
  if (item.environments && item.environments.length > 0) {
    config.environments = item.environments.map((e) => ({ id: e.environment_id, cwd: e.cwd }));
  } else {
    config.cwd = item.cwd;
  }
  if (item.timezone) config.timezone = item.timezone;
  const mode = item.sandbox_policy?.mode;
  const approval = item.approval_policy;
  if (mode && SANDBOX_MODES.has(mode) && approval && APPROVAL_POLICIES.has(approval)) {
    config.permissions = {
      sandbox: mode as PermissionsConfig["sandbox"],
      approval_policy: approval as PermissionsConfig["approval_policy"],
      writable_roots: item.sandbox_policy?.writable_roots ?? [],
      network_access: item.sandbox_policy?.network_access ?? false,
    };
  } else if (mode || approval) {
    dropped.push(`permissions ${mode ?? "?"}/${approval ?? "?"}`);
  }
  if (item.developer_instructions) config.developer_instructions = item.developer_instructions;
  if (item.personality) config.personality = item.personality;
  const truncation = item.truncation_policy;
  if (truncation && Number.isInteger(truncation.limit) && truncation.limit > 0) {
    config.truncation =
      truncation.mode === "bytes" ? { bytes: truncation.limit } : { tokens: truncation.limit };
  }
  return { config, dropped };
}
