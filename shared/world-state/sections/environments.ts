import { type Fragment, fragment, MARKERS } from "../../context/index.ts";
import type {
  EnvironmentConfig,
  JsonObject,
  JsonValue,
  NetworkConfig,
  PermissionsConfig,
} from "../../protocol/index.ts";
import { compareCodePoints, getMember, isJsonObject, setMember } from "../internal/json.ts";
import { escapeXml } from "../internal/text.ts";
import { SECTION_IDS } from "../section-ids.ts";
import type { PreviousSectionState, WorldStateSection } from "../world-state.ts";
import { renderFilesystem } from "./filesystem.ts";

/**
 * The environments snapshot, as Codex 0.169 writes it (reference §3.6):
 * `{"environments": {"<id>": {"cwd": "/path", "status": "available" | "starting", "shell"?,
 * "is_primary"?: true}}, "current_date", "timezone", "network"?: {"domains": {"<host>": "allow" |
 * "deny"}}, "filesystem"?: "<filesystem>…"}`. The cwd is the plain path; `is_primary` is set on
 * the primary environment only when there are several; `filesystem` is the rendered line, as
 * Codex stores it. A stored cwd may also be a `file://` URI (Codex's earlier form, and Spindle's
 * before it followed 0.169): the two forms of one path compare equal.
 */
export type EnvironmentsSnapshot = JsonObject;

export interface EnvironmentsSectionInput {
  /** The first one is the primary environment; may be empty. */
  environments: readonly EnvironmentConfig[];
  /** `YYYY-MM-DD` from the injected clock. */
  currentDate: string;
  timezone: string;
  network?: NetworkConfig;
  /** The permissions the `<filesystem>` line describes; undefined: no such line. */
  permissions?: PermissionsConfig;
}

type DomainRule = "allow" | "deny";

interface LiveEnvironment {
  id: string;
  cwd: string;
  /** The cwd as compared with a stored one (`cwdKey`). */
  key: string;
  shell?: string;
  starting: boolean;
}

interface StoredEnvironments {
  /** By id: the stored cwd's comparison key (`cwdKey`). */
  environments: Map<string, { key: string }>;
  primaryId?: string;
  currentDate?: string;
  timezone?: string;
  domains?: Map<string, DomainRule>;
  filesystem?: string;
}

/** One `<environments>` entry: a live environment (listed with its values) or a removed id. */
type Listing =
  | { id: string; environment: LiveEnvironment; primary?: "true" | "false" }
  | { id: string; environment?: undefined };

/**
 * `<environment_context>` (user; reference §2.4, §3.6). One available environment renders flat
 * `<cwd>`/`<shell>` lines; otherwise an `<environments>` block lists them by sorted id
 * (`primary="true"` on the primary, `status="starting"` while starting). Then `<current_date>`,
 * `<timezone>`, with a network configuration a one-line `<network>` element, and with
 * permissions the one-line `<filesystem>` (`renderFilesystem`).
 *
 * Against a Known snapshot a diff renders when something changed: environments that are new,
 * whose cwd changed or whose primary flag moved; removed ones as `status="unavailable"`; the
 * date, timezone, network or filesystem. It lists only the environments that changed, and, as
 * Codex's diff does, states every turn value as it is now: the date, the timezone, the network
 * line (or `<network enabled="false" />` when the configuration was just removed) and the
 * filesystem line. A shell or status change alone renders nothing. While there is a single
 * available environment and there was at most one, no removals are listed and an unchanged cwd
 * (whatever the id) renders no cwd line.
 */
export function environmentsSection(
  input: EnvironmentsSectionInput,
): WorldStateSection<EnvironmentsSnapshot> {
  const live = liveEnvironments(input.environments);
  const primaryId = input.environments[0]?.id;
  const domains = input.network === undefined ? undefined : domainRules(input.network);
  const networkLine = input.network === undefined ? undefined : renderNetwork(input.network);
  const filesystemLine =
    input.permissions === undefined
      ? undefined
      : renderFilesystem(input.permissions, input.environments[0]?.cwd);

  return {
    id: SECTION_IDS.environments,
    snapshot() {
      const environments: JsonObject = {};
      for (const environment of live) {
        const entry: JsonObject = {
          cwd: environment.cwd,
          status: environment.starting ? "starting" : "available",
        };
        if (environment.shell !== undefined) entry.shell = environment.shell;
        if (live.length > 1 && environment.id === primaryId) entry.is_primary = true;
        setMember(environments, environment.id, entry);
      }
      const snapshot: JsonObject = {
        environments,
        current_date: input.currentDate,
        timezone: input.timezone,
      };
      if (domains !== undefined) snapshot.network = { domains: domainsToJson(domains) };
      if (filesystemLine !== undefined) snapshot.filesystem = filesystemLine;
      return snapshot;
    },
    readSnapshot: (stored) =>
      readStored(stored) === undefined ? undefined : (stored as JsonObject),
    render(previous: PreviousSectionState<EnvironmentsSnapshot>): Fragment[] {
      const stored = previous.kind === "known" ? readStored(previous.snapshot) : undefined;
      if (stored === undefined) {
        const topLines = [
          element("current_date", input.currentDate),
          element("timezone", input.timezone),
        ];
        if (networkLine !== undefined) topLines.push(networkLine);
        if (filesystemLine !== undefined) topLines.push(filesystemLine);
        const only = soleAvailable(live);
        if (only !== undefined) return [environmentContext([...flatLines(only), ...topLines])];
        const listings: Listing[] = live.map((environment) => ({
          id: environment.id,
          environment,
          ...(live.length > 1 && environment.id === primaryId ? { primary: "true" as const } : {}),
        }));
        const envLines = listings.length > 0 ? blockLines(listings) : [];
        return [environmentContext([...envLines, ...topLines])];
      }

      const networkChanged = !sameDomains(stored.domains, domains);
      // A baseline from before the line (no `filesystem`) gets it once.
      const topChanged =
        stored.currentDate !== input.currentDate ||
        stored.timezone !== input.timezone ||
        networkChanged ||
        (filesystemLine !== undefined && stored.filesystem !== filesystemLine);
      // As Codex: a diff states every turn value as it is now, whichever of them changed.
      const topLines = [
        element("current_date", input.currentDate),
        element("timezone", input.timezone),
      ];
      if (networkLine !== undefined) topLines.push(networkLine);
      else if (networkChanged) topLines.push('<network enabled="false" />');
      if (filesystemLine !== undefined) topLines.push(filesystemLine);

      const environment = soleAvailable(live);
      if (environment !== undefined && stored.environments.size <= 1) {
        const before = [...stored.environments.values()][0];
        if (before?.key === environment.key && !topChanged) return [];
        const changed = stored.environments.get(environment.id)?.key !== environment.key;
        return [environmentContext([...(changed ? flatLines(environment) : []), ...topLines])];
      }

      const listings: Listing[] = [];
      const livePrimary = live.length > 0 ? primaryId : undefined;
      for (const environment of live) {
        const before = stored.environments.get(environment.id);
        const isPrimary = environment.id === livePrimary;
        const wasPrimary = before !== undefined && environment.id === stored.primaryId;
        const primaryMoved = before !== undefined && isPrimary !== wasPrimary;
        if (before !== undefined && before.key === environment.key && !primaryMoved) continue;
        let primary: "true" | "false" | undefined;
        if (isPrimary && (live.length > 1 || primaryMoved)) primary = "true";
        else if (primaryMoved) primary = "false";
        listings.push({ id: environment.id, environment, ...(primary ? { primary } : {}) });
      }
      const liveIds = new Set(live.map((environment) => environment.id));
      for (const id of stored.environments.keys()) {
        if (!liveIds.has(id)) listings.push({ id });
      }
      listings.sort((a, b) => compareCodePoints(a.id, b.id));
      if (listings.length === 0 && !topChanged) return [];
      return [
        environmentContext([...(listings.length > 0 ? blockLines(listings) : []), ...topLines]),
      ];
    },
  };
}

/** The environment when there is exactly one and it is available (the flat form). */
function soleAvailable(live: readonly LiveEnvironment[]): LiveEnvironment | undefined {
  const [only, ...others] = live;
  return only !== undefined && others.length === 0 && !only.starting ? only : undefined;
}

/** Deduplicated by id (the first wins, so the primary stays first), sorted by id. */
function liveEnvironments(configs: readonly EnvironmentConfig[]): LiveEnvironment[] {
  const byId = new Map<string, LiveEnvironment>();
  for (const config of configs) {
    if (byId.has(config.id)) continue;
    byId.set(config.id, {
      id: config.id,
      cwd: config.cwd,
      key: cwdKey(config.cwd),
      ...(config.shell === undefined ? {} : { shell: config.shell }),
      starting: config.status === "starting",
    });
  }
  return [...byId.values()].sort((a, b) => compareCodePoints(a.id, b.id));
}

function environmentContext(lines: readonly string[]): Fragment {
  const body = `\n${lines.map((line) => `  ${line}\n`).join("")}`;
  return fragment("user", MARKERS.environmentContext.start, MARKERS.environmentContext.end, body);
}

function element(name: string, value: string): string {
  return `<${name}>${escapeXml(value)}</${name}>`;
}

function flatLines(environment: LiveEnvironment): string[] {
  const lines = [element("cwd", environment.cwd)];
  if (environment.shell !== undefined) lines.push(element("shell", environment.shell));
  return lines;
}

/** Lines relative to the two-space indent of `<environment_context>`'s children. */
function blockLines(listings: readonly Listing[]): string[] {
  const lines = ["<environments>"];
  for (const listing of listings) {
    const id = escapeXml(listing.id);
    if (listing.environment === undefined) {
      lines.push(`  <environment id="${id}" status="unavailable" />`);
      continue;
    }
    let attributes = `id="${id}"`;
    if (listing.primary !== undefined) attributes += ` primary="${listing.primary}"`;
    if (listing.environment.starting) attributes += ' status="starting"';
    lines.push(`  <environment ${attributes}>`);
    lines.push(...flatLines(listing.environment).map((line) => `    ${line}`));
    lines.push("  </environment>");
  }
  lines.push("</environments>");
  return lines;
}

function renderNetwork(network: NetworkConfig): string {
  let line = '<network enabled="true">';
  if (network.allowed_domains.length > 0) {
    line += element("allowed", network.allowed_domains.join(","));
  }
  if (network.denied_domains.length > 0) {
    line += element("denied", network.denied_domains.join(","));
  }
  return `${line}</network>`;
}

/** A host listed both ways is denied. */
function domainRules(network: NetworkConfig): Map<string, DomainRule> {
  const rules = new Map<string, DomainRule>();
  for (const host of network.allowed_domains) rules.set(host, "allow");
  for (const host of network.denied_domains) rules.set(host, "deny");
  return rules;
}

function domainsToJson(rules: Map<string, DomainRule>): JsonObject {
  const json: JsonObject = {};
  const sorted = [...rules].sort(([a], [b]) => compareCodePoints(a, b));
  for (const [host, rule] of sorted) setMember(json, host, rule);
  return json;
}

function sameDomains(
  a: Map<string, DomainRule> | undefined,
  b: Map<string, DomainRule> | undefined,
): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.size === b.size && [...a].every(([host, rule]) => b.get(host) === rule);
}

/**
 * Reads a stored snapshot. `status` and `shell` are not compared, so they never cause a diff;
 * unknown members are ignored; a `filesystem` that is not a string reads as none.
 */
function readStored(stored: JsonValue): StoredEnvironments | undefined {
  if (!isJsonObject(stored)) return undefined;
  const environmentsJson = getMember(stored, "environments");
  if (!isJsonObject(environmentsJson)) return undefined;
  const environments = new Map<string, { key: string }>();
  let explicitPrimary: string | undefined;
  for (const id of Object.keys(environmentsJson)) {
    const entry = getMember(environmentsJson, id);
    if (!isJsonObject(entry)) return undefined;
    const cwd = getMember(entry, "cwd");
    const isPrimary = getMember(entry, "is_primary");
    if (typeof cwd !== "string") return undefined;
    if (isPrimary !== undefined && typeof isPrimary !== "boolean") return undefined;
    if (isPrimary === true) explicitPrimary ??= id;
    environments.set(id, { key: cwdKey(cwd) });
  }
  const result: StoredEnvironments = { environments };
  // One environment is the primary one even without the flag.
  const primaryId =
    explicitPrimary ?? (environments.size === 1 ? [...environments.keys()][0] : undefined);
  if (primaryId !== undefined) result.primaryId = primaryId;

  const currentDate = getMember(stored, "current_date");
  const timezone = getMember(stored, "timezone");
  if (currentDate !== undefined) {
    if (typeof currentDate !== "string") return undefined;
    result.currentDate = currentDate;
  }
  if (timezone !== undefined) {
    if (typeof timezone !== "string") return undefined;
    result.timezone = timezone;
  }
  const filesystem = getMember(stored, "filesystem");
  if (typeof filesystem === "string") result.filesystem = filesystem;
  const network = getMember(stored, "network");
  if (network !== undefined) {
    if (!isJsonObject(network)) return undefined;
    const domainsJson = getMember(network, "domains");
    if (!isJsonObject(domainsJson)) return undefined;
    const domains = new Map<string, DomainRule>();
    for (const host of Object.keys(domainsJson)) {
      const rule = getMember(domainsJson, host);
      if (rule !== "allow" && rule !== "deny") return undefined;
      domains.set(host, rule);
    }
    result.domains = domains;
  }
  return result;
}

/**
 * What a cwd is compared by: the `file://` URI of its path, so a stored plain path and a stored
 * URI of the same directory are the same cwd.
 */
function cwdKey(cwd: string): string {
  return fileUri(pathOf(cwd));
}

/** A plain path for a `file://` URI (Codex 0.141-alpha.4 and older world-state cwds); else as is. */
export function pathOf(cwd: string): string {
  if (!cwd.startsWith("file://")) return cwd;
  try {
    const path = decodeURIComponent(new URL(cwd).pathname);
    return /^\/[A-Za-z]:\//.test(path) ? path.slice(1) : path;
  } catch {
    return cwd;
  }
}

/**
 * The `file://` URI of a path (Codex's form of a cwd before 0.169). POSIX absolute paths become
 * `file:///…`, Windows drive paths `file:///C:/…`; anything else keeps its form after `file:`.
 * Characters outside the URI path set are percent-encoded as UTF-8.
 */
export function fileUri(path: string): string {
  if (path.startsWith("/")) return `file://${encodePath(path)}`;
  if (/^[A-Za-z]:[\\/]/.test(path)) return `file:///${encodePath(path.replaceAll("\\", "/"))}`;
  return `file:${encodePath(path)}`;
}

function encodePath(path: string): string {
  return path.replace(/[^A-Za-z0-9\-._~/!$&'()*+,;=:@]/gu, (ch) => {
    try {
      return encodeURIComponent(ch);
    } catch {
      // A lone surrogate has no UTF-8 form; encode its code unit so distinct paths stay distinct.
      return `%u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`;
    }
  });
}
