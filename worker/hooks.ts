/**
 * The handlers of the webhook routes (design §12): inbound hooks and their delivery logs, and
 * outbound endpoints with their deliveries, all tenant state in the tenant's object (scope
 * `hooks`); the public delivery route is `hook-delivery.ts`'s.
 */
import type { Context } from "hono";
import { newWebhookId } from "../durable-objects/webhook-outbox.ts";
import {
  type CreatedHook,
  type HookRecord,
  type HookResource,
  hookUrlTenant,
  type WebhookDelivery,
  type WebhookEvent,
} from "../shared/api/index.ts";
import {
  endpointUrlProblem,
  type HookScheme,
  newHookSecret,
  newStandardSecret,
  secretProblem,
  TEST_EVENT_TYPE,
} from "../shared/webhooks/index.ts";
import type { Handlers } from "./app.ts";
import type { AppEnv } from "./app-env.ts";
import { ApiError, unwrap } from "./errors.ts";
import { type HookCache, hookCacheKey } from "./hook-cache.ts";
import { deliverHook } from "./hook-delivery.ts";
import { jurisdictionOf, ownTenant } from "./tenancy.ts";

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

/** The hook with its URL: `POST /hooks/{tenant}/{hook}` on the host this request reached. */
function withUrl(c: Context<AppEnv>, hook: HookRecord): HookResource {
  const tenant = hookUrlTenant(c.var.tenant, jurisdictionOf(c));
  return { ...hook, url: `${new URL(c.req.url).origin}/hooks/${tenant}/${hook.id}` };
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

/** A URL an endpoint may have here (https; loopback too in development), else a 400. */
function checkEndpointUrl(c: Context<AppEnv>, url: string): void {
  const problem = endpointUrlProblem(url, c.env.SPINDLE_ENV === "development");
  if (problem) {
    throw new ApiError("invalid_request", `The endpoint URL is refused: ${problem}.`, {
      errors: [{ path: "/url", message: problem }],
    });
  }
}

export function hookHandlers(cache: HookCache): Pick<Handlers, HookOperation> {
  const forget = (c: Context<AppEnv>, hookId: string) =>
    cache.forget(hookCacheKey(jurisdictionOf(c), c.var.tenant, hookId));
  return {
    createHook: async (c, { body }) => {
      const { secret, generated } = hookSecret(
        body.verify.scheme,
        body.verify.secret,
        "/verify/secret",
      );
      const hook = unwrap(
        await ownTenant(c).createHook({ body: { ...body, verify: { ...body.verify, secret } } }),
      );
      const created: CreatedHook = { ...withUrl(c, hook), ...(generated ? { secret } : {}) };
      return c.json(created, 201, { Location: `/v1/hooks/${hook.id}` });
    },

    listHooks: async (c, { query }) => {
      const page = unwrap(await ownTenant(c).listHooks(query));
      return c.json({ ...page, data: page.data.map((hook) => withUrl(c, hook)) });
    },

    getHook: async (c, { param }) =>
      c.json(withUrl(c, unwrap(await ownTenant(c).getHook(param.id)))),

    deleteHook: async (c, { param }) => {
      unwrap(await ownTenant(c).deleteHook(param.id));
      forget(c, param.id);
      return c.body(null, 204);
    },

    rotateHookSecret: async (c, { param, body }) => {
      const tenant = ownTenant(c);
      const current = unwrap(await tenant.getHook(param.id));
      const { secret, generated } = hookSecret(current.verify.scheme, body.secret, "/secret");
      const hook = unwrap(await tenant.rotateHookSecret(param.id, secret));
      forget(c, param.id);
      const rotated: CreatedHook = { ...withUrl(c, hook), ...(generated ? { secret } : {}) };
      return c.json(rotated);
    },

    listHookDeliveries: async (c, { param, query }) =>
      c.json(unwrap(await ownTenant(c).listHookDeliveries(param.id, query))),

    deliverHook: (c, { param }) => deliverHook(c, param, cache),

    createEndpoint: async (c, { body }) => {
      checkEndpointUrl(c, body.url);
      const secret = newStandardSecret();
      const endpoint = unwrap(
        await ownTenant(c).createEndpoint({
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

    listEndpoints: async (c, { query }) => c.json(unwrap(await ownTenant(c).listEndpoints(query))),

    getEndpoint: async (c, { param }) => c.json(unwrap(await ownTenant(c).getEndpoint(param.id))),

    patchEndpoint: async (c, { param, body }) => {
      if (body.url !== undefined) checkEndpointUrl(c, body.url);
      return c.json(unwrap(await ownTenant(c).patchEndpoint(param.id, body)));
    },

    deleteEndpoint: async (c, { param }) => {
      unwrap(await ownTenant(c).deleteEndpoint(param.id));
      return c.body(null, 204);
    },

    rotateEndpointSecret: async (c, { param }) => {
      const secret = newStandardSecret();
      const endpoint = unwrap(await ownTenant(c).rotateEndpointSecret(param.id, secret));
      return c.json({ ...endpoint, secret });
    },

    testEndpoint: async (c, { param }) => {
      const tenant = ownTenant(c);
      const endpoint = unwrap(await tenant.getEndpoint(param.id));
      const createdAt = new Date().toISOString();
      const event: WebhookEvent = {
        tenant: c.var.tenant,
        jurisdiction: jurisdictionOf(c),
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
      c.json(unwrap(await ownTenant(c).listEndpointDeliveries(param.id, query))),
  };
}
