import type { Env } from "../env.ts";
import { createApp } from "./app.ts";
import { consumeWebhooks } from "./webhook-consumer.ts";

export { Tenant, TenantDirectory, Thread } from "../durable-objects/index.ts";

const app = createApp();

/** The HTTP API, and the consumer of the webhook queue and its dead-letter queue. */
export default {
  fetch: app.fetch,
  queue: consumeWebhooks,
} satisfies ExportedHandler<Env>;
