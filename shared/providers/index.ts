export { LocalModelClient } from "./local.ts";
export { type ModelClient, type ModelEvent, ProviderError } from "./model-client.ts";
