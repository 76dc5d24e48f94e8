/**
 * The handlers of the webhook routes (design §12): inbound hooks and their delivery logs, and
 * outbound endpoints with their deliveries, all tenant state in the tenant's object (scope
 * `hooks`); the public delivery route is `hook-delivery.ts`'s.
 */
import type { Context } from "hono";
import { newWebhookId } from "../durable-objects/index.ts";
import {
  type CreatedHook,
  type HookRecord,
  type HookResource,
  hookPath,
  type WebhookDelivery,
  type WebhookEvent,
} from "../shared/api/index.ts";
import {
  type HookScheme,
  newHookSecret,
  newStandardSecret,
  secretProblem,
  TEST_EVENT_TYPE,
} from "../shared/webhooks/index.ts";
import type { Handlers } from "./app.ts";
import type { AppEnv } from "./app-env.ts";
import { requireIdTags } from "./auth.ts";
import { ApiError, unwrap } from "./errors.ts";
import { type HookCache, hookCacheKey } from "./hook-cache.ts";
import { deliverHook } from "./hook-delivery.ts";
import { requireOutboundUrl } from "./outbound-policy.ts";
import { callerOf, homeOf, jurisdictionOf, ownTenant } from "./tenancy.ts";
import type { ThreadStubFactory } from "./thread-stub.ts";

type HookOperation =
  | "createHook"
  | "listHooks"
  | "getHook"
  | "deleteHook"
  | "rotateHookSecret"
  | "listHookDeliveries"
  | "deliverHook"
  | "createEndpoint"
  | "listEndpoints"
  | "getEndpoint"
  | "patchEndpoint"
  | "deleteEndpoint"
  | "rotateEndpointSecret"
  | "testEndpoint"
  | "listEndpointDeliveries";

/**
 * The caller's hooks with their URLs, `POST /hooks/{tenant}/{hook}.{tag}` on the host this request
 * reached. Made before the hook is, so a deployment without an id secret refuses before it stores
 * a hook nobody could deliver to.
 */
function hookUrls(c: Context<AppEnv>): (hook: HookRecord) => HookResource {
  const tags = requireIdTags(c.env);
  const origin = new URL(c.req.url).origin;
  const jurisdiction = jurisdictionOf(c);
  const tenant = c.var.tenant;
  return (hook) => {
    const tag = tags.hookTag(jurisdiction, tenant, hook.id);
    return { ...hook, url: `${origin}${hookPath({ jurisdiction, tenant, hookId: hook.id, tag })}` };
  };
}

/**
 * The secret a hook of `scheme` is given: `secret`, checked, or a generated one (`generated`);
 * Slack and Stripe issue theirs, so a hook of theirs must be given it.
 */
function hookSecret(
  scheme: HookScheme,
  secret: string | undefined,
  path: string,
): { secret: string; generated: boolean } {
  if (secret !== undefined) {
    const problem = secretProblem(scheme, secret);
    if (problem) {
      throw new ApiError("invalid_request", `The secret cannot be used: ${problem}.`, {
        errors: [{ path, message: problem }],
      });
    }
    return { secret, generated: false };
  }
  const generated = newHookSecret(scheme);
  if (generated === undefined) {
    const sender = scheme === "slack" ? "Slack" : "Stripe";
    throw new ApiError("invalid_request", `${sender} issues the signing secret: pass it.`, {
      errors: [{ path, message: `Required for scheme "${scheme}"` }],
    });
  }
  return { secret: generated, generated: true };
}

export function hookHandlers(
  cache: HookCache,
  threadStub: ThreadStubFactory,
): Pick<Handlers, HookOperation> {
  const forget = (c: Context<AppEnv>, hookId: string) =>
    cache.forget(hookCacheKey(jurisdictionOf(c), c.var.tenant, hookId));
  return {
    createHook: async (c, { body }) => {
      const withUrl = hookUrls(c);
      const { secret, generated } = hookSecret(
        body.verify.scheme,
        body.verify.secret,
        "/verify/secret",
      );
      const hook = unwrap(
        await ownTenant(c).createHook(callerOf(c), {
          body: { ...body, verify: { ...body.verify, secret } },
        }),
      );
      const created: CreatedHook = { ...withUrl(hook), ...(generated ? { secret } : {}) };
      return c.json(created, 201, { Location: `/v1/hooks/${hook.id}` });
    },

    listHooks: async (c, { query }) => {
      const withUrl = hookUrls(c);
      const page = unwrap(await ownTenant(c).listHooks(callerOf(c), query));
      return c.json({ ...page, data: page.data.map(withUrl) });
    },

    getHook: async (c, { param }) => {
      const withUrl = hookUrls(c);
      return c.json(withUrl(unwrap(await ownTenant(c).getHook(callerOf(c), param.id))));
    },

    deleteHook: async (c, { param }) => {
      unwrap(await ownTenant(c).deleteHook(callerOf(c), param.id));
      forget(c, param.id);
      return c.body(null, 204);
    },

    rotateHookSecret: async (c, { param, body }) => {
      const withUrl = hookUrls(c);
      const tenant = ownTenant(c);
      const current = unwrap(await tenant.getHook(callerOf(c), param.id));
      const { secret, generated } = hookSecret(current.verify.scheme, body.secret, "/secret");
      const hook = unwrap(await tenant.rotateHookSecret(callerOf(c), param.id, secret));
      forget(c, param.id);
      const rotated: CreatedHook = { ...withUrl(hook), ...(generated ? { secret } : {}) };
      return c.json(rotated);
    },

    listHookDeliveries: async (c, { param, query }) =>
      c.json(unwrap(await ownTenant(c).listHookDeliveries(callerOf(c), param.id, query))),

    deliverHook: (c, { param }) => deliverHook(c, param, cache, threadStub),

    createEndpoint: async (c, { body }) => {
      requireOutboundUrl(c.env, body.url, "endpoint");
      const secret = newStandardSecret();
      const endpoint = unwrap(
        await ownTenant(c).createEndpoint(callerOf(c), {
          url: body.url,
          events: body.events,
          description: body.description ?? null,
          secret,
        }),
      );
      return c.json({ ...endpoint, secret }, 201, {
        Location: `/v1/webhook-endpoints/${endpoint.id}`,
      });
    },

    listEndpoints: async (c, { query }) =>
      c.json(unwrap(await ownTenant(c).listEndpoints(callerOf(c), query))),

    getEndpoint: async (c, { param }) =>
      c.json(unwrap(await ownTenant(c).getEndpoint(callerOf(c), param.id))),

    patchEndpoint: async (c, { param, body }) => {
      if (body.url !== undefined) requireOutboundUrl(c.env, body.url, "endpoint");
      return c.json(unwrap(await ownTenant(c).patchEndpoint(callerOf(c), param.id, body)));
    },

    deleteEndpoint: async (c, { param }) => {
      unwrap(await ownTenant(c).deleteEndpoint(callerOf(c), param.id));
      return c.body(null, 204);
    },

    rotateEndpointSecret: async (c, { param }) => {
      const secret = newStandardSecret();
      const endpoint = unwrap(
        await ownTenant(c).rotateEndpointSecret(callerOf(c), param.id, secret),
      );
      return c.json({ ...endpoint, secret });
    },

    testEndpoint: async (c, { param }) => {
      const tenant = ownTenant(c);
      const endpoint = unwrap(await tenant.getEndpoint(callerOf(c), param.id));
      const createdAt = new Date().toISOString();
      const event: WebhookEvent = {
        tenant: c.var.tenant,
        jurisdiction: jurisdictionOf(c),
        incarnation: homeOf(c).incarnation,
        endpointId: endpoint.id,
        webhookId: newWebhookId(),
        type: TEST_EVENT_TYPE,
        threadId: null,
        turnId: null,
        createdAt,
        payload: JSON.stringify({
          type: TEST_EVENT_TYPE,
          timestamp: createdAt,
          data: { endpoint_id: endpoint.id },
        }),
        requestId: c.var.requestId,
      };
      // Recorded (listed at once, before its first attempt), then sent to the queue.
      unwrap(await tenant.enqueueWebhooks([event]));
      const delivery: WebhookDelivery = {
        object: "webhook_delivery",
        id: event.webhookId,
        endpoint_id: endpoint.id,
        type: TEST_EVENT_TYPE,
        thread_id: null,
        turn_id: null,
        status: "pending",
        created_at: createdAt,
        attempts: [],
      };
      return c.json(delivery, 202);
    },

    listEndpointDeliveries: async (c, { param, query }) =>
      c.json(unwrap(await ownTenant(c).listEndpointDeliveries(callerOf(c), param.id, query))),
  };
}
