import type { Env } from "../env.ts";

/** Hono's environment for this app: the bindings, and what middleware sets on the context. */
export interface AppEnv {
  Bindings: Env;
  Variables: {
    /** The authenticated tenant; set by `authenticate()` before any `/v1` handler runs. */
    tenant: string;
  };
}
