export * from "./json.ts";
export * from "./prompt.ts";
export * from "./response-item.ts";
export * from "./rollout-line.ts";
export * from "./thread-config.ts";
export * from "./thread-metadata.ts";
export * from "./token-usage.ts";
export * from "./turn-context.ts";
