import type {
  AgentsMdConfig,
  CollaborationModeConfig,
  EnvironmentConfig,
  PermissionsConfig,
  SessionMeta,
  ThreadConfig,
  TurnApprovalPolicy,
  TurnContextItem,
  WorldStateSnapshot,
} from "../protocol/index.ts";
import {
  isPlainObject,
  ReasoningEffortSchema,
  ReasoningSummarySchema,
  sandboxModeOf,
  TurnContextItemSchema,
} from "../protocol/index.ts";
import { CODEX_AGENTS_MD_SHARD_IDS, pathOf, SECTION_IDS } from "../world-state/index.ts";
import { DEFAULT_ENVIRONMENT_ID } from "./configuration.ts";

/**
 * Codex's settings records, read as a Spindle configuration request: `turn_context` lines in
 * every shape Codex has written (docs/context-engine.md, "Importing Codex rollouts"), the
 * settings of a `thread_settings_applied` event, `world_state` snapshots and `session_meta`.
 * Each reader returns the fields it found and, in words, what it could not carry over; the
 * request is validated afterwards like the API's own input (`imported-config.ts`).
 */
export interface CodexSettings {
  update: ThreadConfig;
  /** What the record held that the configuration cannot express, one sentence each. */
  notes: string[];
}

function nonEmpty(value: unknown): string | undefined {
  return typeof value === "string" && value.trim() !== "" ? value : undefined;
}

const APPROVAL_POLICIES: ReadonlySet<string> = new Set([
  "never",
  "on-request",
  "on-failure",
  "untrusted",
]);

/**
 * Codex's approval policy as Spindle's. The object forms list approval categories: `granular`
 * (0.115+) says which may prompt, `reject` (0.105–0.114) which are refused without asking, the
 * inverse. Spindle has one policy for all of them: every category prompting is `on-request`,
 * none is `never`, and a mix follows `sandbox_approval` (the sandbox escalations), with a note.
 */
function approvalOf(
  policy: TurnApprovalPolicy,
  notes: string[],
): PermissionsConfig["approval_policy"] | undefined {
  if (typeof policy === "string") {
    if (APPROVAL_POLICIES.has(policy)) return policy as PermissionsConfig["approval_policy"];
    notes.push(`approval policy "${policy}" is unknown here`);
    return undefined;
  }
  const form = "granular" in policy ? "granular" : "reject";
  const raw = ("granular" in policy ? policy.granular : policy.reject) as Record<string, boolean>;
  const prompts = Object.entries(raw).map(([category, flag]) => ({
    category,
    prompts: form === "granular" ? flag : !flag,
  }));
  if (prompts.every((p) => p.prompts)) return "on-request";
  if (prompts.every((p) => !p.prompts)) return "never";
  const chosen = prompts.find((p) => p.category === "sandbox_approval")?.prompts ?? true;
  const others = prompts.filter((p) => p.prompts !== chosen).map((p) => p.category);
  const approval = chosen ? "on-request" : "never";
  notes.push(
    `the ${form} approval policy is read as ${approval}; ${others.join(", ")} ` +
      `${chosen ? "are refused without asking" : "may prompt"} in Codex, not here`,
  );
  return approval;
}

/** What a file-system permission set allows, in Spindle's terms. */
interface FileSystemAccess {
  sandbox: PermissionsConfig["sandbox"];
  writableRoots: string[];
}

/**
 * Permission entries (`{path, access}`, 0.122+) as a sandbox mode and writable roots. Project
 * roots and the cwd are the workspace; the temp dirs are writable in every workspace-write
 * sandbox; deny entries, globs and read restrictions have no equivalent here (noted).
 */
function entriesAccess(entries: unknown, cwd: string, notes: string[]): FileSystemAccess {
  const writable: string[] = [];
  let workspaceWrite = false;
  let readsRoot = false;
  const unsupported: string[] = [];
  for (const entry of Array.isArray(entries) ? entries : []) {
    if (!isPlainObject(entry) || !isPlainObject(entry.path)) continue;
    const { path, access } = entry;
    const kind = isPlainObject(path.value) ? path.value.kind : undefined;
    const where =
      path.type === "path" && typeof path.path === "string"
        ? pathOf(path.path)
        : path.type === "glob_pattern"
          ? `glob ${String(path.pattern)}`
          : `:${String(kind)}`;
    if (access === "read") {
      if (kind === "root") readsRoot = true;
      continue;
    }
    if (access !== "write") {
      unsupported.push(`${String(access)} ${where}`);
      continue;
    }
    if (kind === "root") return { sandbox: "danger-full-access", writableRoots: [] };
    const workspace = ["project_roots", "current_working_directory", "tmpdir", "slash_tmp"];
    if (workspace.includes(String(kind))) workspaceWrite = true;
    else if (path.type === "path" && typeof path.path === "string") {
      workspaceWrite = true;
      if (pathOf(path.path) !== cwd) writable.push(pathOf(path.path));
    } else unsupported.push(`write ${where}`);
  }
  if (!readsRoot) unsupported.push("reads limited to the listed paths");
  if (unsupported.length > 0) {
    notes.push(`permission entries with no equivalent here: ${unsupported.join(", ")}`);
  }
  return workspaceWrite
    ? { sandbox: "workspace-write", writableRoots: writable }
    : { sandbox: "read-only", writableRoots: [] };
}

/** A sandbox with its writable roots and whether the network is open. */
type Access = FileSystemAccess & { network: boolean };

/** No sandbox: the whole file system, and (as Codex has it) the network. */
const FULL_ACCESS: Access = Object.freeze({
  sandbox: "danger-full-access",
  writableRoots: [],
  network: true,
});

/** An external sandbox, read as no sandbox here; `networkOpen`: its network was open anyway. */
function externalSandbox(networkOpen: boolean, notes: string[]): Access {
  notes.push("an external sandbox is read as danger-full-access (no sandbox here)");
  if (!networkOpen) notes.push("the external sandbox's network restriction is not kept");
  return FULL_ACCESS;
}

/** `network` of a permission profile: `"enabled"`/`"restricted"` (0.125+) or `{enabled}` (0.124). */
function networkEnabled(network: unknown): boolean | undefined {
  if (network === "enabled") return true;
  if (network === "restricted") return false;
  if (isPlainObject(network) && typeof network.enabled === "boolean") return network.enabled;
  return undefined;
}

/**
 * A `permission_profile` (authoritative over `sandbox_policy` when present, as in Codex): the
 * tagged form `{type: "managed" | "disabled" | "external", …}` (0.125+) or the 0.124 struct
 * `{network, file_system}`. Undefined when the shape is not one of those.
 */
function profileAccess(profile: unknown, cwd: string, notes: string[]): Access | undefined {
  if (!isPlainObject(profile)) return undefined;
  const network = networkEnabled(profile.network);
  if (profile.type === "disabled") {
    return FULL_ACCESS;
  }
  if (profile.type === "external") return externalSandbox(network !== false, notes);
  const fileSystem = profile.file_system;
  if (profile.type === "managed" && isPlainObject(fileSystem)) {
    if (fileSystem.type === "unrestricted") {
      if (network === false) {
        notes.push("the network restriction of an unrestricted file system is not kept");
      }
      return FULL_ACCESS;
    }
    return { ...entriesAccess(fileSystem.entries, cwd, notes), network: network ?? false };
  }
  if (profile.type === undefined && (isPlainObject(fileSystem) || fileSystem === null)) {
    // The 0.124 struct: `{read?, write?}` lists, or the entries form.
    if (isPlainObject(fileSystem) && Array.isArray(fileSystem.entries)) {
      return { ...entriesAccess(fileSystem.entries, cwd, notes), network: network ?? false };
    }
    const write =
      isPlainObject(fileSystem) && Array.isArray(fileSystem.write) ? fileSystem.write : [];
    const roots = write.filter((p): p is string => typeof p === "string").map(pathOf);
    return {
      sandbox: roots.length > 0 ? "workspace-write" : "read-only",
      writableRoots: roots.filter((p) => p !== cwd),
      network: network ?? false,
    };
  }
  return undefined;
}

/** Sandbox, writable roots and network from the legacy `sandbox_policy`. */
function policyAccess(item: TurnContextItem, notes: string[]): Access | undefined {
  const policy = item.sandbox_policy;
  if (!policy) return undefined;
  const mode = sandboxModeOf(policy);
  for (const key of ["exclude_tmpdir_env_var", "exclude_slash_tmp"] as const) {
    if (policy[key] === true) notes.push(`${key} is not modelled here`);
  }
  const access = isPlainObject(policy.access) ? policy.access : policy.read_only_access;
  if (isPlainObject(access) && access.type === "restricted") {
    notes.push("read access limited to some roots has no equivalent here");
  }
  switch (mode) {
    case "danger-full-access":
      return FULL_ACCESS;
    case "read-only":
    case "workspace-write":
      return {
        sandbox: mode,
        writableRoots: (policy.writable_roots ?? []).map(pathOf),
        network: policy.network_access === true,
      };
    case "external-sandbox":
      return externalSandbox(policy.network_access === "enabled", notes);
    default:
      notes.push(`sandbox "${mode}" is unknown here`);
      return undefined;
  }
}

function permissionsOf(
  item: TurnContextItem,
  cwd: string,
  notes: string[],
): PermissionsConfig | undefined {
  const profileNotes: string[] = [];
  const fromProfile =
    profileAccess(item.permission_profile, cwd, profileNotes) ??
    fileSystemPolicyAccess(item, cwd, profileNotes);
  const policyNotes: string[] = [];
  const fromPolicy = policyAccess(item, policyNotes);
  const access = fromProfile ?? fromPolicy;
  notes.push(...(fromProfile ? profileNotes : policyNotes));
  if (item.permission_profile !== undefined && fromProfile === undefined) {
    notes.push("the permission profile could not be read; sandbox_policy is used instead");
  }
  const approval =
    item.approval_policy === undefined || item.approval_policy === null
      ? undefined
      : approvalOf(item.approval_policy, notes);
  if (access === undefined && approval === undefined) return undefined;
  // Codex's project roots (0.136+) are writable in a workspace-write sandbox.
  const roots = (access?.writableRoots ?? []).concat(
    access?.sandbox === "workspace-write"
      ? (item.workspace_roots ?? []).map(pathOf).filter((root) => root !== cwd)
      : [],
  );
  return {
    sandbox: access?.sandbox ?? "workspace-write",
    approval_policy: approval ?? "on-request",
    writable_roots: [...new Set(roots)],
    network_access: access?.network ?? false,
  };
}

/** `file_system_sandbox_policy` (0.122–0.123, before permission profiles): entries + the policy's network. */
function fileSystemPolicyAccess(
  item: TurnContextItem,
  cwd: string,
  notes: string[],
): Access | undefined {
  const policy = item.file_system_sandbox_policy;
  if (!isPlainObject(policy)) return undefined;
  const network = item.sandbox_policy?.network_access === true;
  if (policy.kind === "unrestricted") {
    return FULL_ACCESS;
  }
  if (policy.kind !== "restricted") return undefined;
  return { ...entriesAccess(policy.entries, cwd, notes), network };
}

/** Codex's collaboration mode names (0.90–0.94 had more) as Spindle's. */
const MODE_ALIASES: Readonly<Record<string, string>> = {
  code: "default",
  pair_programming: "default",
  pairprogramming: "default",
  execute: "default",
  custom: "default",
  collaborate: "default",
};

/**
 * `collaboration_mode` in its forms: the 0.89 flat `{mode, model, developer_instructions}`, the
 * 0.90+ `{mode, settings: {…, developer_instructions}}`, Spindle's `{mode, instructions}`, and a
 * bare mode name (world state). The default mode without instructions is no setting at all.
 */
export function collaborationModeOf(value: unknown): CollaborationModeConfig | undefined {
  const raw = isPlainObject(value) ? value.mode : value;
  if (typeof raw !== "string" || raw === "") return undefined;
  const mode = MODE_ALIASES[raw] ?? raw;
  const settings = isPlainObject(value) && isPlainObject(value.settings) ? value.settings : value;
  const instructions = isPlainObject(settings)
    ? (nonEmpty(settings.developer_instructions) ?? nonEmpty(settings.instructions))
    : undefined;
  if (mode === "default" && instructions === undefined) return undefined;
  return instructions === undefined ? { mode } : { mode, instructions };
}

/** A `turn_context` payload (any Codex version from 0.35, or Spindle's own) as a request. */
export function settingsFromTurnContext(item: TurnContextItem): CodexSettings {
  const notes: string[] = [];
  const cwd = pathOf(item.cwd);
  const update: ThreadConfig = { model: item.model };
  if (item.environments && item.environments.length > 0) {
    update.environments = item.environments.map((e) => ({
      id: e.environment_id,
      cwd: pathOf(e.cwd),
    }));
  } else {
    update.cwd = cwd;
  }
  if (item.timezone) update.timezone = item.timezone;
  const permissions = permissionsOf(item, cwd, notes);
  if (permissions) update.permissions = permissions;
  if (item.approvals_reviewer && item.approvals_reviewer !== "user") {
    notes.push(`approvals reviewed by "${item.approvals_reviewer}" have no equivalent here`);
  }
  if (item.network) {
    update.network = {
      allowed_domains: [...item.network.allowed_domains],
      denied_domains: [...item.network.denied_domains],
    };
  }
  if (item.personality && item.personality !== "none") update.personality = item.personality;
  const collaboration = collaborationModeOf(item.collaboration_mode);
  if (collaboration) update.collaboration_mode = collaboration;
  if (item.developer_instructions) update.developer_instructions = item.developer_instructions;
  const userInstructions = nonEmpty(item.user_instructions);
  if (userInstructions) update.agents_md = { directory: cwd, text: userInstructions };
  if (nonEmpty(item.base_instructions)) {
    notes.push("Codex's base instructions are not used; the model's own are");
  }
  const truncation = item.truncation_policy;
  if (truncation) {
    if (Number.isInteger(truncation.limit) && truncation.limit > 0) {
      update.truncation =
        truncation.mode === "bytes" ? { bytes: truncation.limit } : { tokens: truncation.limit };
    } else {
      notes.push(`truncation limit ${truncation.limit} is not a positive integer`);
    }
  }
  const reasoning = reasoningOf(item, notes);
  if (reasoning) update.reasoning = reasoning;
  if (item.realtime_active === true) notes.push("realtime conversation is not modelled here");
  return { update, notes };
}

/**
 * The turn's reasoning effort and summary as the thread's `reasoning` setting; a value outside
 * the Responses API's names is left out with a note.
 */
function reasoningOf(item: TurnContextItem, notes: string[]): ThreadConfig["reasoning"] {
  const reasoning: NonNullable<ThreadConfig["reasoning"]> = {};
  if (item.effort) {
    const effort = ReasoningEffortSchema.safeParse(item.effort);
    if (effort.success) reasoning.effort = effort.data;
    else notes.push(`reasoning effort "${item.effort}" is not one the model API takes`);
  }
  // `auto` is what Codex writes when nothing was chosen, and the catalog's default too.
  if (item.summary && item.summary !== "auto") {
    const summary = ReasoningSummarySchema.safeParse(item.summary);
    if (summary.success) reasoning.summary = summary.data;
    else notes.push(`reasoning summary "${item.summary}" is not one the model API takes`);
  }
  return Object.keys(reasoning).length > 0 ? reasoning : undefined;
}

/**
 * The `thread_settings` of an `event_msg thread_settings_applied` (Codex ≈0.14x+), read as a
 * `turn_context` (same fields, `reasoning_*` for `effort`/`summary`). Undefined when it is not
 * one.
 */
export function threadSettingsAsTurnContext(payload: unknown): TurnContextItem | undefined {
  const settings = isPlainObject(payload) ? payload.thread_settings : undefined;
  if (!isPlainObject(settings)) return undefined;
  const { reasoning_effort, reasoning_summary, ...rest } = settings;
  const parsed = TurnContextItemSchema.safeParse({
    ...rest,
    ...(typeof reasoning_effort === "string" ? { effort: reasoning_effort } : {}),
    ...(typeof reasoning_summary === "string" ? { summary: reasoning_summary } : {}),
  });
  return parsed.success ? parsed.data : undefined;
}

/**
 * Settings newer Codex (≈0.143+) keeps in `world_state` sections, from the replayed snapshot:
 * the environments (cwds, shells, the primary one), timezone, personality, collaboration mode
 * and AGENTS.md text (its shards joined). Spindle's own snapshots carry no AGENTS.md text.
 */
export function settingsFromWorldState(snapshot: WorldStateSnapshot): CodexSettings {
  const update: ThreadConfig = {};
  const notes: string[] = [];
  const environments = snapshot.environments;
  if (isPlainObject(environments)) {
    const listed = environmentsOf(environments.environments);
    if (listed.length > 0) update.environments = listed;
    if (nonEmpty(environments.timezone)) update.timezone = environments.timezone as string;
  }
  const personality = snapshot.personality;
  if (isPlainObject(personality) && nonEmpty(personality.personality)) {
    update.personality = personality.personality as string;
  }
  const collaboration = collaborationModeOf(snapshot.collaboration_mode);
  if (collaboration) update.collaboration_mode = { mode: collaboration.mode };
  const agentsMd = agentsMdOf(snapshot, update.environments?.[0]?.cwd);
  if (agentsMd) update.agents_md = agentsMd;
  const permissions = snapshot.permissions;
  const prefixes = isPlainObject(permissions)
    ? permissions.approved_command_prefixes
    : snapshot.approved_command_prefixes;
  if (Array.isArray(prefixes) && prefixes.length > 0) {
    notes.push(`${prefixes.length} approved command prefixes are not modelled here`);
  }
  return { update, notes };
}

function environmentsOf(value: unknown): EnvironmentConfig[] {
  if (!isPlainObject(value)) return [];
  const listed: { environment: EnvironmentConfig; primary: boolean }[] = [];
  for (const [id, entry] of Object.entries(value)) {
    if (!isPlainObject(entry) || typeof entry.cwd !== "string" || entry.cwd === "") continue;
    // A single legacy environment has the empty id, which Spindle's ids do not allow.
    const environment: EnvironmentConfig = {
      id: id === "" ? DEFAULT_ENVIRONMENT_ID : id,
      cwd: pathOf(entry.cwd),
    };
    if (nonEmpty(entry.shell)) environment.shell = entry.shell as string;
    if (entry.status === "starting") environment.status = "starting";
    listed.push({ environment, primary: entry.is_primary === true });
  }
  // The primary environment goes first; the others keep their order.
  return [...listed.filter((e) => e.primary), ...listed.filter((e) => !e.primary)].map(
    (e) => e.environment,
  );
}

const AGENTS_MD_SHARDS = [SECTION_IDS.agentsMd, ...CODEX_AGENTS_MD_SHARD_IDS] as const;

function agentsMdOf(
  snapshot: WorldStateSnapshot,
  cwd: string | undefined,
): AgentsMdConfig | undefined {
  const first = snapshot.agents_md;
  const text = AGENTS_MD_SHARDS.map((id) => {
    const shard = snapshot[id];
    return isPlainObject(shard) && typeof shard.text === "string" ? shard.text : "";
  }).join("");
  if (text.trim() === "") return undefined;
  const directory = (isPlainObject(first) ? nonEmpty(first.directory) : undefined) ?? cwd ?? "/";
  return { directory: pathOf(directory), text };
}

/**
 * What the first `session_meta` says about settings: its cwd, the user instructions it held
 * (0.32–0.87, as AGENTS.md), custom base instructions (0.148+ `provenance: custom`), and the
 * dynamic tools a client registered (not imported: a Spindle client declares its own tools).
 */
export function settingsFromSessionMeta(meta: SessionMeta): CodexSettings {
  const update: ThreadConfig = {};
  const notes: string[] = [];
  if (meta.cwd) update.cwd = pathOf(meta.cwd);
  const instructions = nonEmpty(meta.instructions);
  if (instructions) update.agents_md = { directory: update.cwd ?? "/", text: instructions };
  const base = meta.base_instructions;
  if (isPlainObject(base) && nonEmpty(base.text)) {
    const provenance = isPlainObject(base.provenance) ? base.provenance.type : undefined;
    if (provenance === "custom") update.base_instructions = base.text as string;
    else if (provenance === undefined) {
      notes.push("Codex's base instructions are not used; the model's own are");
    }
  }
  if (meta.dynamic_tools && meta.dynamic_tools.length > 0) {
    notes.push(`${meta.dynamic_tools.length} dynamic tools are not imported`);
  }
  return { update, notes };
}
