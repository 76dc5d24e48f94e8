/**
 * The handlers of the tenancy routes (design §11): the admin API (tenants and their keys), a
 * tenant's own keys, thread listing and usage. Tenant state lives in the tenant's object, reached
 * through the placement of its jurisdiction; the directory is asked by the admin API only.
 */
import type { Context } from "hono";
import { bucketIn, directoryStub, tenantStubIn } from "../durable-objects/index.ts";
import {
  type Jurisdiction,
  NO_QUOTAS,
  OPERATOR,
  patchQuotas,
  patchThreadDefaults,
  SCOPES,
  type TenantCaller,
  type TenantHome,
  type TenantPolicy,
  type TenantResource,
  type TenantRpc,
} from "../shared/api/index.ts";
import type { Handlers } from "./app.ts";
import type { AppEnv } from "./app-env.ts";
import { requireIdTags, staticTenants } from "./auth.ts";
import { ApiError, unwrap } from "./errors.ts";
import type { HookCache } from "./hook-cache.ts";
import type { KeyCache } from "./key-cache.ts";

type TenancyOperation =
  | "listThreads"
  | "getUsage"
  | "createKey"
  | "listKeys"
  | "revokeKey"
  | "createTenant"
  | "listTenants"
  | "getTenant"
  | "patchTenant"
  | "deleteTenant"
  | "createTenantKey"
  | "listTenantKeys"
  | "revokeTenantKey";

/** The jurisdiction of the caller's tenant (null for a tenant of the static keys). */
export function jurisdictionOf(c: Context<AppEnv>): Jurisdiction {
  const principal = c.var.principal;
  return principal.kind === "tenant" ? (principal.policy?.jurisdiction ?? null) : null;
}

/** `{policy}` of the caller's managed tenant, for a Thread request; `{}` for a static tenant. */
export function policyOf(c: Context<AppEnv>): { policy?: TenantPolicy } {
  const principal = c.var.principal;
  return principal.kind === "tenant" && principal.policy ? { policy: principal.policy } : {};
}

/** Where the caller's tenant lives: its id, jurisdiction and incarnation, as its key says. */
export function homeOf(c: Context<AppEnv>): TenantHome {
  const principal = c.var.principal;
  const policy = principal.kind === "tenant" ? principal.policy : undefined;
  return {
    tenant: c.var.tenant,
    jurisdiction: policy?.jurisdiction ?? null,
    incarnation: policy?.incarnation ?? null,
  };
}

/** The caller, as its tenant's object checks it: the incarnation its key was verified in. */
export function callerOf(c: Context<AppEnv>): TenantCaller {
  return { incarnation: homeOf(c).incarnation };
}

/** The caller's own tenant object. */
export function ownTenant(c: Context<AppEnv>): TenantRpc {
  return tenantStubIn(c.env, jurisdictionOf(c), c.var.tenant);
}

/** A tenant of the directory (404 when there is none), with its object. */
async function managedTenant(
  c: Context<AppEnv>,
  id: string,
): Promise<{ record: TenantResource; tenant: TenantRpc }> {
  const record = unwrap(await directoryStub(c.env).get(id));
  return { record, tenant: tenantStubIn(c.env, record.jurisdiction, record.id) };
}

/** Keys of `SPINDLE_API_KEYS` are managed in that secret, not through the API. */
function requireManagedKey(c: Context<AppEnv>): void {
  const principal = c.var.principal;
  if (principal.kind === "tenant" && principal.keyId === null) {
    throw new ApiError(
      "forbidden",
      "This key comes from SPINDLE_API_KEYS; that secret manages its tenant's keys.",
    );
  }
}

export function tenancyHandlers(
  cache: KeyCache,
  hooks: HookCache,
): Pick<Handlers, TenancyOperation> {
  return {
    listThreads: async (c, { query }) =>
      c.json(unwrap(await ownTenant(c).listThreads(callerOf(c), query))),

    getUsage: async (c, { query }) => c.json(unwrap(await ownTenant(c).usage(callerOf(c), query))),

    createKey: async (c, { body }) => {
      requireManagedKey(c);
      const principal = c.var.principal;
      const own = principal.kind === "tenant" ? principal.scopes : [];
      const scopes = body.scopes ?? [...own];
      const beyond = scopes.filter((scope) => !own.includes(scope));
      if (beyond.length > 0) {
        throw new ApiError(
          "forbidden",
          `This key may not give scopes it lacks: ${beyond.join(", ")}.`,
        );
      }
      const created = unwrap(
        await ownTenant(c).createKey(callerOf(c), { name: body.name ?? null, scopes }),
      );
      return c.json(created, 201);
    },

    listKeys: async (c, { query }) => {
      requireManagedKey(c);
      return c.json(unwrap(await ownTenant(c).listKeys(callerOf(c), query)));
    },

    revokeKey: async (c, { param }) => {
      requireManagedKey(c);
      unwrap(await ownTenant(c).revokeKey(callerOf(c), param.key_id));
      cache.forget(c.var.tenant, param.key_id);
      return c.body(null, 204);
    },

    createTenant: async (c, { body }) => {
      const jurisdiction = body.jurisdiction ?? null;
      if (bucketIn(c.env, jurisdiction) === undefined) {
        throw new ApiError(
          "invalid_request",
          `This deployment binds no R2 bucket for jurisdiction "${jurisdiction}".`,
          { errors: [{ path: "/jurisdiction", message: "no bucket is configured for it" }] },
        );
      }
      if (staticTenants(c.env).has(body.id)) {
        throw new ApiError("tenant_exists", `Tenant "${body.id}" is configured by static keys.`);
      }
      const record: TenantResource = {
        object: "tenant",
        id: body.id,
        name: body.name ?? null,
        jurisdiction,
        quotas: patchQuotas(NO_QUOTAS, body.quotas ?? {}),
        thread_defaults: patchThreadDefaults(undefined, body.thread_defaults),
        status: "active",
        created_at: new Date().toISOString(),
      };
      unwrap(await directoryStub(c.env).claim(record));
      unwrap(await tenantStubIn(c.env, jurisdiction, record.id).putRecord(record));
      return c.json(record, 201, { Location: `/v1/admin/tenants/${record.id}` });
    },

    listTenants: async (c, { query }) => c.json(unwrap(await directoryStub(c.env).list(query))),

    getTenant: async (c, { param }) => c.json((await managedTenant(c, param.tenant)).record),

    patchTenant: async (c, { param, body }) => {
      const { record, tenant } = await managedTenant(c, param.tenant);
      const next: TenantResource = {
        ...record,
        ...(body.name === undefined ? {} : { name: body.name }),
        quotas: patchQuotas(record.quotas, body.quotas ?? {}),
        thread_defaults: patchThreadDefaults(record.thread_defaults, body.thread_defaults),
      };
      // The directory first: a failure after it is mended by a retry, which writes both again.
      unwrap(await directoryStub(c.env).put(next));
      unwrap(await tenant.putRecord(next));
      cache.forget(next.id);
      return c.json(next);
    },

    deleteTenant: async (c, { param }) => {
      const { record, tenant } = await managedTenant(c, param.tenant);
      const deleting: TenantResource = { ...record, status: "deleting" };
      unwrap(await directoryStub(c.env).put(deleting));
      unwrap(await tenant.deleteTenant(deleting));
      // Nothing this isolate remembers of the tenant authorizes anything from now on.
      cache.forget(record.id);
      hooks.forgetTenant(record.jurisdiction, record.id);
      return c.json(deleting, 202);
    },

    createTenantKey: async (c, { param, body }) => {
      // A key is minted with its id's tag: without the secret, refused here with the clear problem.
      requireIdTags(c.env);
      const { record, tenant } = await managedTenant(c, param.tenant);
      const created = unwrap(
        await tenant.createKey(OPERATOR, {
          name: body.name ?? null,
          scopes: body.scopes ?? [...SCOPES],
          record,
        }),
      );
      return c.json(created, 201);
    },

    listTenantKeys: async (c, { param, query }) => {
      const { tenant } = await managedTenant(c, param.tenant);
      return c.json(unwrap(await tenant.listKeys(OPERATOR, query)));
    },

    revokeTenantKey: async (c, { param }) => {
      const { record, tenant } = await managedTenant(c, param.tenant);
      unwrap(await tenant.revokeKey(OPERATOR, param.key_id));
      cache.forget(record.id, param.key_id);
      return c.body(null, 204);
    },
  };
}
