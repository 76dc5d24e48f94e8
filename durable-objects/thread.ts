import { DurableObject } from "cloudflare:workers";
import type { Env } from "../worker/env.ts";

/** One conversation thread. Wired to the core engine in the Thread DO issue. */
export class Thread extends DurableObject<Env> {
  ping(): string {
    return "pong";
  }
}
