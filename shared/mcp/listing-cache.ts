import type { Clock } from "../ports/index.ts";
import type { McpListedTool } from "./step-tools.ts";

/**
 * How long a server's `tools/list` answer is used before it is asked again. Within it every step
 * offers the server's tools from one answer, so the prompt's `tools` are the same bytes from step
 * to step and turn to turn and the provider's prompt cache (whose prefix starts with the tools)
 * keeps hitting; a server that changes its tools says so (`notifications/tools/list_changed`),
 * which ends its entry at once, so the TTL only bounds how stale a silent server's list can be.
 */
export const MCP_LISTING_TTL_MS = 5 * 60 * 1000;

interface Entry {
  readonly url: string;
  readonly tools: readonly McpListedTool[];
  readonly listedAtMs: number;
}

/** One thread instance's listings, by server label (lost with the instance, as its sessions). */
export class McpListingCache {
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #entries = new Map<string, Entry>();

  constructor(clock: Clock, ttlMs = MCP_LISTING_TTL_MS) {
    this.#clock = clock;
    this.#ttlMs = ttlMs;
  }

  /** The server's tools while its listing is fresh and was made at `url` (a moved server lists again). */
  get(label: string, url: string): readonly McpListedTool[] | undefined {
    const entry = this.#entries.get(label);
    if (entry === undefined || entry.url !== url) return undefined;
    if (this.#clock.nowMs() - entry.listedAtMs >= this.#ttlMs) {
      this.#entries.delete(label);
      return undefined;
    }
    return entry.tools;
  }

  set(label: string, url: string, tools: readonly McpListedTool[]): void {
    this.#entries.set(label, { url, tools, listedAtMs: this.#clock.nowMs() });
  }

  /** `notifications/tools/list_changed`, a failed call or a removed server: list again next step. */
  invalidate(label: string): void {
    this.#entries.delete(label);
  }
}
