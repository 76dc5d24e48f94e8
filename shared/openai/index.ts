export * from "./ids.ts";
export * from "./input.ts";
export * from "./items.ts";
export * from "./request.ts";
export * from "./resources.ts";
export * from "./response.ts";
export * from "./stream.ts";
