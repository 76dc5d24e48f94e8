import { turnBodyMaxBytes } from "../api/index.ts";
import { utf8ByteLength } from "../context-manager/index.ts";
import type { ModelCatalog, ModelInfo } from "../models/index.ts";
import type {
  EnvironmentConfig,
  FunctionTool,
  McpServerRef,
  PermissionsConfig,
  SessionConfiguration,
  ThreadConfig,
  TruncationConfig,
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
/** The largest resolved configuration, as JSON: what one turn body may carry. */
export const MAX_CONFIGURATION_BYTES = turnBodyMaxBytes;

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

  const provider = update.provider ?? providerFor(current, update, model);
  // Checked when the request chooses it (a create chooses everything): a provider that can
  // serve no turn here is refused up front instead of failing every turn.
  const chosen =
    current === undefined || update.provider !== undefined || update.model !== undefined;
  if (chosen && !catalog.serves(provider)) throw unservedProvider(provider, model, update, catalog);

  const next: SessionConfiguration = {
    model: model.slug,
    provider,
    permissions: update.permissions ?? current?.permissions ?? DEFAULT_PERMISSIONS,
    environments: resolveEnvironments(current?.environments ?? [], update),
    timezone: checkTimezone(update.timezone ?? current?.timezone ?? DEFAULT_TIMEZONE),
    context_sections: resolveSections(current?.context_sections ?? {}, update.context_sections),
    tools: functionTools(update.tools) ?? current?.tools ?? [],
    truncation: update.truncation ?? current?.truncation ?? DEFAULT_TRUNCATION,
  };
  setOptional(next, "mcp_servers", resolveMcpServers(update), current?.mcp_servers);
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
  setOptional(
    next,
    "include_environment_context",
    update.include_environment_context,
    current?.include_environment_context,
  );
  setOptional(
    next,
    "current_time_reminder",
    update.current_time_reminder,
    current?.current_time_reminder,
  );
  // Kept when null: a thread's null turns idle compaction off even under a tenant default.
  const idle =
    update.idle_compaction === undefined ? current?.idle_compaction : update.idle_compaction;
  if (idle !== undefined) next.idle_compaction = idle;
  checkConfigurationSize(next);
  return next;
}

/**
 * Overrides accumulate (custom sections merge per id), so a configuration could outgrow any one
 * request; it is written whole as a `spindle_config` line, which must stay importable. Refused
 * past the size of the largest request body.
 */
function checkConfigurationSize(config: SessionConfiguration): void {
  const bytes = utf8ByteLength(JSON.stringify(config));
  if (bytes > MAX_CONFIGURATION_BYTES) {
    throw new InvalidConfigurationError(
      "",
      `the configuration would be ${bytes} bytes of JSON; at most ${MAX_CONFIGURATION_BYTES}`,
    );
  }
}

function unservedProvider(
  provider: string,
  model: ModelInfo,
  update: ThreadConfig,
  catalog: ModelCatalog,
): InvalidConfigurationError {
  const available = `available here: ${catalog.providers().join(", ")}`;
  return update.provider !== undefined
    ? new InvalidConfigurationError(
        "provider",
        `provider "${provider}" is not configured; ${available}`,
      )
    : new InvalidConfigurationError(
        "model",
        `model "${model.slug}" is served by provider "${provider}", which is not configured; ${available}`,
      );
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

function functionTools(tools: ThreadConfig["tools"]): FunctionTool[] | undefined {
  return tools?.filter((t): t is FunctionTool => t.type === "function");
}

/**
 * The request's MCP servers: `mcp_servers` (labels become references) followed by the inline
 * `{type: "mcp"}` entries of `tools`. undefined: the request names none and keeps the current
 * list; null: it clears the list. A label named twice is refused.
 */
function resolveMcpServers(update: ThreadConfig): McpServerRef[] | null | undefined {
  const inline: McpServerRef[] = [];
  for (const tool of update.tools ?? []) {
    if (tool.type !== "mcp") continue;
    const { type: _mcp, server_label, server_url, ...narrowing } = tool;
    inline.push({
      label: server_label,
      ...(server_url === undefined ? {} : { url: server_url }),
      ...narrowing,
    });
  }
  if (update.mcp_servers === undefined && inline.length === 0) return undefined;
  if (update.mcp_servers === null && inline.length === 0) return null;
  const refs = [
    ...(update.mcp_servers ?? []).map((s) => (typeof s === "string" ? { label: s } : { ...s })),
    ...inline,
  ];
  const seen = new Set<string>();
  for (const ref of refs) {
    if (seen.has(ref.label)) {
      throw new InvalidConfigurationError(
        "mcp_servers",
        `MCP server "${ref.label}" is named twice (in mcp_servers or as a {type: "mcp"} tool)`,
      );
    }
    seen.add(ref.label);
  }
  return refs.length === 0 ? null : refs;
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
  // Built from entries, which define own members: no id can reach the object's prototype.
  const next = new Map(Object.entries(current));
  for (const [id, section] of Object.entries(update ?? {})) {
    if (section === null) next.delete(id);
    else next.set(id, { ...section });
  }
  return Object.fromEntries(next);
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
