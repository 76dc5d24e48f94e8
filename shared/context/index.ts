export * from "./classify.ts";
export * from "./fragment.ts";
export * from "./markers.ts";
export * from "./retained.ts";
