/**
 * Cloudflare AI Gateway in front of an HTTP provider. A provider is routed through a gateway by
 * its base URL alone (`https://gateway.ai.cloudflare.com/v1/{account}/{gateway}/{provider}…`);
 * what the gateway needs beyond that is added to each request here.
 */
import type { FetchFn } from "./attempts.ts";

const GATEWAY_HOST = "gateway.ai.cloudflare.com";

/**
 * `fetch` with the gateway's headers on requests to a gateway: `cf-aig-authorization` for an
 * authenticated gateway (when `token` is set), and `cf-aig-skip-cache`, always, because the
 * gateway's response cache answers an identical request with the stored answer: a retried step
 * or a step after a rollback would get a stale reply instead of a new sample. The provider's own
 * headers (its key) pass unchanged; other hosts get nothing added.
 */
export function throughGateway(fetch: FetchFn, token: string | undefined): FetchFn {
  return (input, init) => {
    if (!isGateway(input)) return fetch(input, init);
    const headers = new Headers(init.headers);
    headers.set("cf-aig-skip-cache", "true");
    if (token) headers.set("cf-aig-authorization", `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
}

function isGateway(url: string): boolean {
  try {
    return new URL(url).hostname === GATEWAY_HOST;
  } catch {
    return false;
  }
}
