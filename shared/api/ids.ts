import * as z from "../zod/index.ts";

/**
 * Tenant, thread and turn ids: 1-64 of `[A-Za-z0-9_-]`. No `:`, so the DO name
 * `{tenant}:{thread}` splits one way only (design §10 invariant 9).
 */
const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
const idSchema = (what: string) =>
  z.string().check(z.regex(ID_PATTERN, `${what} ids are 1-64 characters of [A-Za-z0-9_-]`));

export const TenantIdSchema = z.onFirstUse(() => idSchema("tenant"));
export const ThreadIdSchema = z.onFirstUse(() => idSchema("thread"));
export const TurnIdSchema = z.onFirstUse(() => idSchema("turn"));
export const ApiKeyIdSchema = z.onFirstUse(() => idSchema("key"));
export const HookIdSchema = z.onFirstUse(() => idSchema("hook"));
export const EndpointIdSchema = z.onFirstUse(() => idSchema("endpoint"));
