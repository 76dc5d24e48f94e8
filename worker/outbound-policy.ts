import type { Env } from "../env.ts";
import type { OutboundUrlPolicy } from "../shared/outbound/index.ts";

/** The deployment's outbound URL policy: development also allows loopback (a local receiver). */
export function outboundPolicy(env: Pick<Env, "SPINDLE_ENV">): OutboundUrlPolicy {
  return { allowLoopback: env.SPINDLE_ENV === "development" };
}
