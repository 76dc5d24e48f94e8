import { createApp } from "./app.ts";

export { TenantDirectory } from "../durable-objects/directory.ts";
export { Tenant } from "../durable-objects/tenant.ts";
export { Thread } from "../durable-objects/thread.ts";

export default createApp();
