/**
 * The face of the Durable Objects: the worker imports the objects, and what it needs to address
 * them, only from here. Each room behind it is a storage and RPC boundary of its own: `thread/`
 * (one conversation), `tenant/` (one tenant, and the directory of tenants), over `common/`.
 */
export { digestsEqual, keyDigest } from "./common/digests.ts";
export { bucketIn, directoryStub, tenantStubIn, threadStubIn } from "./common/placement.ts";
export { TenantDirectory } from "./tenant/directory.ts";
export { type IdTags, idTagsOf } from "./tenant/id-tags.ts";
export { Tenant } from "./tenant/tenant.ts";
export { catalogOf } from "./thread/providers.ts";
export { Thread } from "./thread/thread.ts";
export { newWebhookId } from "./thread/webhooks/outbox.ts";
