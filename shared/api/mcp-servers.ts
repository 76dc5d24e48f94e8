import {
  type McpServerDefinition,
  McpServerLabelSchema,
  type McpServerRef,
  McpToolNameSchema,
  type RequireApproval,
  RequireApprovalSchema,
  recordOf,
} from "../protocol/index.ts";
import * as z from "../zod/index.ts";
import {
  mcpServerHeadersMaxBytes,
  mcpServerHeadersMaxCount,
  mcpServerHeaderValueMaxBytes,
  mcpServerTimeoutMsDefault,
  mcpServerTimeoutMsMax,
  mcpServerTimeoutMsMin,
  utf8Within,
} from "./limits.ts";

/**
 * The tenant's registry of remote MCP servers (design §16): `/v1/mcp-servers`, scope `tools`.
 * A registration holds the server's URL and the headers sent with every request to it (its
 * credentials: stored in the tenant's object, never answered; a resource lists their names
 * only). Threads name a server by label; `resolveMcpServerRef` is how a thread's reference and
 * the registration combine into what the thread uses.
 */

const timestamp = z.onFirstUse(() => z.iso.datetime());

/** RFC 9110 §5.1: a field name is a token. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
/** Visible ASCII, spaces and tabs: what a credential is, and never a line break. */
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;

/**
 * Names the MCP transport sets itself, or that only the connection may carry (RFC 9110 §7.6.1
 * hop-by-hop fields, and what `fetch` computes): a registration may not set them.
 */
const RESERVED_HEADER_NAMES: ReadonlySet<string> = new Set([
  "accept",
  "connection",
  "content-length",
  "content-type",
  "host",
  "keep-alive",
  "last-event-id",
  "mcp-protocol-version",
  "mcp-session-id",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** Why a registration's headers (names lowercased) cannot be stored, or undefined. */
export function mcpHeadersProblem(headers: Readonly<Record<string, string>>): string | undefined {
  const names = Object.keys(headers);
  if (names.length > mcpServerHeadersMaxCount) {
    return `at most ${mcpServerHeadersMaxCount} headers`;
  }
  let bytes = 0;
  for (const [name, value] of Object.entries(headers)) {
    if (RESERVED_HEADER_NAMES.has(name)) return `${name} is set by the MCP transport, not here`;
    bytes += name.length + value.length;
  }
  if (bytes > mcpServerHeadersMaxBytes) {
    return `at most ${mcpServerHeadersMaxBytes} bytes of names and values together`;
  }
  return undefined;
}

const HeaderNameSchema = z.onFirstUse(() =>
  z.string().check(z.regex(HEADER_NAME, "a header name is 1-128 characters of an HTTP token")),
);
const HeaderValueSchema = z.onFirstUse(() =>
  z
    .string()
    .check(
      z.regex(HEADER_VALUE, "a header value is visible ASCII, spaces and tabs"),
      utf8Within(mcpServerHeaderValueMaxBytes),
    ),
);

/**
 * A record of headers with the names lowercased (HTTP names are case-insensitive); a name
 * spelled twice is refused.
 */
function headerRecord<V extends z.ZodMiniType>(value: V) {
  return z.pipe(
    recordOf(HeaderNameSchema, value),
    z.transform((headers: Record<string, z.output<V>>, payload) => {
      const out: Record<string, z.output<V>> = {};
      for (const [name, given] of Object.entries(headers)) {
        const lower = name.toLowerCase();
        if (Object.hasOwn(out, lower)) {
          const message = `${lower} is given twice`;
          payload.issues.push({ code: "custom", path: [name], message, input: headers });
        }
        out[lower] = given;
      }
      return out;
    }),
  );
}

/** A registration's `headers`: names lowercased, within the count and size limits. */
const McpHeadersSchema = z.onFirstUse(() =>
  headerRecord(HeaderValueSchema).check(
    z.superRefine((headers, ctx) => {
      const problem = mcpHeadersProblem(headers);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    }),
    z.describe(
      "Sent with every request to the server (its credentials, e.g. `Authorization`). Stored, " +
        "never returned: resources list `header_names` only. Names are case-insensitive " +
        `(stored lowercase); at most ${mcpServerHeadersMaxCount}, each value at most ` +
        `${mcpServerHeaderValueMaxBytes} bytes, ${mcpServerHeadersMaxBytes} bytes in all. ` +
        "The transport's own headers (`Content-Type`, `Accept`, `Mcp-Session-Id`, " +
        "`Mcp-Protocol-Version`, hop-by-hop ones) may not be set.",
    ),
  ),
);

/** `PATCH`'s `headers`: a merge patch (a string sets a header, null removes it). */
const McpHeadersPatchSchema = z.onFirstUse(() =>
  headerRecord(z.nullable(HeaderValueSchema)).check(
    z.describe(
      "A merge patch of the headers: a string sets one (replacing its value), null removes " +
        "it, a name left out keeps its value. The limits apply to the result.",
    ),
  ),
);

const McpServerUrlSchema = z.onFirstUse(() =>
  z
    .string()
    .check(
      z.maxLength(2048),
      z.describe(
        "The server's Streamable HTTP endpoint: https to a public name or address (with " +
          "`SPINDLE_ENV=development` also http to a loopback address). Checked here and again " +
          "before each request; redirects are not followed.",
      ),
    ),
);

const AllowedToolsSchema = z.onFirstUse(() =>
  z
    .nullable(
      z.array(McpToolNameSchema).check(
        z.minLength(1),
        z.maxLength(256),
        z.refine((names) => new Set(names).size === names.length, "each tool at most once"),
      ),
    )
    .check(z.describe("Only these of the server's tools are offered to threads; null: every one.")),
);

const TimeoutMsSchema = z.onFirstUse(() =>
  z
    .number()
    .check(
      z.int(),
      z.gte(mcpServerTimeoutMsMin),
      z.lte(mcpServerTimeoutMsMax),
      z.describe(
        `How long one request to the server may take, in ms (${mcpServerTimeoutMsMin}-` +
          `${mcpServerTimeoutMsMax}); default ${mcpServerTimeoutMsDefault}.`,
      ),
    ),
);

const ApprovalSchema = z.onFirstUse(() =>
  RequireApprovalSchema.check(
    z.describe(
      "Which calls pause the turn for an `mcp_approval_response`: `always` (the default), " +
        "`never`, or `{never: {tool_names}}` (those tools run without asking). A thread's " +
        "reference can only make it stricter.",
    ),
  ),
);

/** `POST /v1/mcp-servers`. */
export const CreateMcpServerBodySchema = z.onFirstUse(() =>
  z.strictObject({
    label: McpServerLabelSchema.check(
      z.describe("The server's name in the tenant (1-64 of [A-Za-z0-9_-]); threads use it."),
    ),
    url: McpServerUrlSchema,
    headers: z._default(McpHeadersSchema, {}),
    allowed_tools: z._default(AllowedToolsSchema, null),
    require_approval: z._default(ApprovalSchema, "always"),
    timeout_ms: z._default(TimeoutMsSchema, mcpServerTimeoutMsDefault),
  }),
);
export type CreateMcpServerBody = z.output<typeof CreateMcpServerBodySchema>;

/** `PATCH /v1/mcp-servers/{label}`: what is given changes; the label is the server's id. */
export const PatchMcpServerBodySchema = z.onFirstUse(() =>
  z.strictObject({
    url: z.optional(McpServerUrlSchema),
    headers: z.optional(McpHeadersPatchSchema),
    allowed_tools: z.optional(AllowedToolsSchema),
    require_approval: z.optional(ApprovalSchema),
    timeout_ms: z.optional(TimeoutMsSchema),
  }),
);
export type PatchMcpServerBody = z.output<typeof PatchMcpServerBodySchema>;

export const McpServerParamsSchema = z.onFirstUse(() => z.object({ label: McpServerLabelSchema }));

/** A registration as the API answers it: never a header's value. */
export const McpServerResourceSchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("mcp_server"),
    label: McpServerLabelSchema,
    url: z.string(),
    header_names: z
      .array(z.string())
      .check(z.describe("The names of the stored headers, sorted; their values are never shown.")),
    allowed_tools: z.nullable(z.array(McpToolNameSchema)),
    require_approval: RequireApprovalSchema,
    timeout_ms: z.number().check(z.int()),
    created_at: timestamp,
    updated_at: timestamp,
  }),
);
export type McpServerResource = z.output<typeof McpServerResourceSchema>;

/** A registration as the tenant's object holds it: the resource and the headers' values. */
export interface McpServerRecord {
  resource: McpServerResource;
  headers: Readonly<Record<string, string>>;
}

/**
 * Stricter of two approval policies: a call needs approval when either asks for it, so the
 * tools that run without asking are those both exempt. `always` wins; `never` gives way to the
 * other; two exemption lists keep the tools on both (none left: `always`).
 */
export function stricterApproval(a: RequireApproval, b: RequireApproval): RequireApproval {
  if (a === "always" || b === "always") return "always";
  if (a === "never") return b;
  if (b === "never") return a;
  const both = new Set(b.never.tool_names);
  const tool_names = a.never.tool_names.filter((name) => both.has(name));
  return tool_names.length === 0 ? "always" : { never: { tool_names } };
}

/** The URL as `fetch` would send it, so spellings of one URL compare equal. */
function normalizedUrl(url: string): string | undefined {
  try {
    return new URL(url).href;
  } catch {
    return undefined;
  }
}

/**
 * A thread's reference to a server, against the tenant's registration (undefined: none of that
 * label): what the thread uses, or why it cannot. The reference narrows, never widens:
 * - `url` (an inline entry's `server_url`) must be the registered URL (compared as parsed);
 * - `allowed_tools` keeps the registration's tools that it names, in the registration's order
 *   (both null: every tool); when none is left the server is unavailable;
 * - `require_approval` combines with the registration's by `stricterApproval`.
 */
export function resolveMcpServerRef(
  ref: McpServerRef,
  registration: McpServerRecord | undefined,
): { server: McpServerDefinition } | { unavailable: string } {
  if (!registration) return { unavailable: `no MCP server "${ref.label}" is registered` };
  const { resource, headers } = registration;
  if (ref.url !== undefined && normalizedUrl(ref.url) !== normalizedUrl(resource.url)) {
    return { unavailable: `server_url is not the URL registered for "${ref.label}"` };
  }
  let allowed = resource.allowed_tools;
  if (ref.allowed_tools !== undefined) {
    const asked = new Set(ref.allowed_tools);
    allowed = allowed ? allowed.filter((name) => asked.has(name)) : [...asked];
    if (allowed.length === 0) {
      return { unavailable: `none of the allowed_tools is allowed by "${ref.label}"` };
    }
  }
  return {
    server: {
      label: resource.label,
      url: resource.url,
      headers,
      allowed_tools: allowed,
      require_approval:
        ref.require_approval === undefined
          ? resource.require_approval
          : stricterApproval(resource.require_approval, ref.require_approval),
      timeout_ms: resource.timeout_ms,
    },
  };
}
