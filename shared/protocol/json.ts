export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** An object that is not an array or null: what parsed JSON gives for `{…}`. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * A world-state snapshot: section id → that section's JSON (no nulls inside objects).
 * Keys are kept sorted by section id when serialized (reference §3.3).
 */
export type WorldStateSnapshot = JsonObject;
