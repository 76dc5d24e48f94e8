import type { Env } from "../env.ts";
import { createApp } from "./app.ts";
import { consumeWebhooks } from "./webhook-consumer.ts";

export { Tenant, TenantDirectory, Thread } from "../durable-objects/index.ts";

/**
 * Made on the isolate's first HTTP request, not in its global scope: an isolate that runs only
 * the Durable Objects, or only the queue consumer, never needs it.
 */
let app: ReturnType<typeof createApp> | undefined;

const fetch: ReturnType<typeof createApp>["fetch"] = (request, env, ctx) => {
  app ??= createApp();
  return app.fetch(request, env, ctx);
};

/** The HTTP API, and the consumer of the webhook queue and its dead-letter queue. */
export default {
  fetch,
  queue: consumeWebhooks,
} satisfies ExportedHandler<Env>;
