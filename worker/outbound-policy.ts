import type { Env } from "../env.ts";
import {
  type OutboundUrlPolicy,
  outboundPolicyOf,
  outboundUrlRefusal,
} from "../shared/outbound/index.ts";
import { ApiError } from "./errors.ts";

/** The deployment's outbound URL policy (`outboundPolicyOf`). */
export function outboundPolicy(env: Pick<Env, "SPINDLE_ENV">): OutboundUrlPolicy {
  return outboundPolicyOf(env.SPINDLE_ENV);
}

/**
 * A URL a tenant gives for the service to send to (an endpoint's, an MCP server's), checked
 * against the policy when it is given: a 400 at `/url` naming why it is refused.
 */
export function requireOutboundUrl(env: Pick<Env, "SPINDLE_ENV">, url: string, what: string) {
  const refusal = outboundUrlRefusal(url, outboundPolicy(env));
  if (refusal) {
    throw new ApiError("invalid_request", `The ${what} URL is refused: ${refusal.detail}.`, {
      errors: [{ path: "/url", message: refusal.detail }],
    });
  }
}
