import type { Env } from "../env.ts";
import type { Scope, TenantPolicy } from "../shared/api/index.ts";
import type { Logger } from "../shared/observability/index.ts";

/** Who a request acts for, as its key says (`auth.ts`). */
export type Principal =
  /** An operator's admin key: the admin API, and nothing of a tenant's. */
  | { kind: "admin" }
  | {
      kind: "tenant";
      tenant: string;
      /** The key's id; null for a key of the static `SPINDLE_API_KEYS` secret. */
      keyId: string | null;
      scopes: readonly Scope[];
      /** A managed tenant's residency and quotas; undefined for a tenant of the static keys. */
      policy: TenantPolicy | undefined;
    };

/** Hono's environment for this app: the bindings, and what middleware sets on the context. */
export interface AppEnv {
  Bindings: Env;
  Variables: {
    /** The request's id (`x-request-id`), set by `requestContext()` before anything else runs. */
    requestId: string;
    /** The request's log: its id, and once a route matched, the route and its thread. */
    log: Logger;
    /** Set by `authenticate()` before any `/v1` handler runs. */
    principal: Principal;
    /** The tenant of a tenant route's key; set by `authorize()` before the handler runs. */
    tenant: string;
  };
}
