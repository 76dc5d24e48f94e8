import { utf8ByteLength } from "../context-manager/index.ts";
import * as z from "../zod/index.ts";

/**
 * Size limits of HTTP API v1, shared by the worker, which counts request bodies, and the Thread
 * DO, which reads an import's lines; and the per-tenant limits of what a tenant's object holds.
 */

/** A turn's body (turns, outputs, steer, inject) may carry inline images. */
export const turnBodyMaxBytes = 8 * 1024 * 1024;
/** Every other JSON body. */
export const jsonBodyMaxBytes = 1024 * 1024;
/** A rollout uploaded to `POST /v1/threads/import` (unless the app is given another limit). */
export const importBodyMaxBytes = 64 * 1024 * 1024;
/**
 * One line of an imported rollout, without its line end. The largest line a turn writes holds
 * its body's text re-encoded, which can grow it threefold (an invalid UTF-8 byte reads as
 * U+FFFD, three bytes); four turn bodies leave room for the line's own fields, so every line
 * Spindle exports imports again.
 */
export const rolloutLineMaxBytes = 4 * turnBodyMaxBytes;
/** Entries of a turn's `additional_context` (Codex's `MAX_ADDITIONAL_CONTEXT_ITEMS`). */
export const MAX_ADDITIONAL_CONTEXT_ENTRIES = 32;
/** A delivery to an inbound hook. */
export const webhookBodyMaxBytes = 1024 * 1024;

/**
 * A hook's `thread` template: it renders a thread id of at most 64 characters, so a few paths
 * and a prefix are all it needs.
 */
export const hookThreadTemplateMaxBytes = 512;
/**
 * A hook's `input` template: a message around the delivery's values, rendered for every
 * delivery; standing instructions belong in the thread's configuration.
 */
export const hookInputTemplateMaxBytes = 16 * 1024;
/**
 * A hook's `thread_config`, as JSON: instructions and a few dozen tools. It travels with every
 * delivery to its thread and sits in every isolate's hook cache; a thread created beforehand
 * with `POST /v1/threads` takes a configuration up to the body limit.
 */
export const hookThreadConfigMaxBytes = 64 * 1024;
/** A webhook endpoint's `description`. */
export const endpointDescriptionMaxBytes = 1024;

/**
 * An MCP server's `headers` (its credentials, design §16): a few names (an `Authorization`, an
 * API key header, a tenant or org id), each value up to a long bearer token, and all of them
 * together within what servers commonly accept in a request's header block.
 */
export const mcpServerHeadersMaxCount = 16;
export const mcpServerHeaderValueMaxBytes = 4096;
export const mcpServerHeadersMaxBytes = 8 * 1024;
/** An MCP server's `timeout_ms` for one request to it: the default (Codex's) and its bounds. */
export const mcpServerTimeoutMsDefault = 60_000;
export const mcpServerTimeoutMsMin = 1_000;
export const mcpServerTimeoutMsMax = 300_000;

/**
 * What one tenant's object may hold, the same for every tenant (static ones too): each is a
 * bound on the object's storage and on what a list of them costs, and the endpoints' one on how
 * many times each event is posted. `limit_exceeded` names the one that refused a create.
 */
export const TENANT_LIMIT_NAMES = [
  "api_keys_per_tenant",
  "hooks_per_tenant",
  "webhook_endpoints_per_tenant",
  "mcp_servers_per_tenant",
] as const;
export type TenantLimitName = (typeof TENANT_LIMIT_NAMES)[number];

export const tenantLimits: Readonly<Record<TenantLimitName, number>> = Object.freeze({
  api_keys_per_tenant: 100,
  hooks_per_tenant: 100,
  webhook_endpoints_per_tenant: 20,
  // A thread names at most 16 of them; the tenant's registry holds servers for several kinds
  // of threads.
  mcp_servers_per_tenant: 32,
});

/** A zod check: the string is at most `maxBytes` bytes of UTF-8 (later checks are skipped). */
export function utf8Within(maxBytes: number) {
  return z.refine<string>((value) => utf8ByteLength(value) <= maxBytes, {
    message: `At most ${maxBytes} bytes of UTF-8`,
    abort: true,
  });
}

/** A zod check: the value, as JSON, is at most `maxBytes` bytes of UTF-8. */
export function jsonWithin(maxBytes: number) {
  return z.refine<unknown>((value) => utf8ByteLength(JSON.stringify(value)) <= maxBytes, {
    message: `At most ${maxBytes} bytes of JSON`,
  });
}
