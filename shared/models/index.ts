export * from "./catalog.ts";
export * from "./configured.ts";
