// The types of `bundle.js` (built on install from `entry.ts`) are the entry's.
export * from "./entry.ts";
