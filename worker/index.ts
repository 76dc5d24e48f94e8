import type { Env } from "../env.ts";
import { createApp } from "./app.ts";
import { consumeWebhooks } from "./webhook-consumer.ts";

export { TenantDirectory } from "../durable-objects/tenant/directory.ts";
export { Tenant } from "../durable-objects/tenant/tenant.ts";
export { Thread } from "../durable-objects/thread/thread.ts";

const app = createApp();

/** The HTTP API, and the consumer of the webhook queue and its dead-letter queue. */
export default {
  fetch: app.fetch,
  queue: consumeWebhooks,
} satisfies ExportedHandler<Env>;
