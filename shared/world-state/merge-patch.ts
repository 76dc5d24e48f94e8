import type { JsonObject, JsonValue, WorldStateSnapshot } from "../protocol/index.ts";
import {
  cloneJson,
  getMember,
  isJsonObject,
  jsonEqual,
  setMember,
  sortedEntries,
} from "./internal/json.ts";

/**
 * Drops object members whose value is `null`, recursively, and returns a new value. Arrays are
 * left as they are, nulls and all: RFC 7386 gives a null object member the meaning "delete",
 * but replaces arrays whole, so nulls inside arrays are ordinary data (reference §3.3).
 */
export function removeNullObjectFields(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return cloneJson(value);
  if (!isJsonObject(value)) return value;
  const result: JsonObject = {};
  for (const [key, member] of Object.entries(value)) {
    if (member !== null) setMember(result, key, removeNullObjectFields(member));
  }
  return result;
}

/**
 * The RFC 7386 merge patch that turns `previous` into `current` (reference §3.4), or `undefined`
 * when they are equal. Removed sections come first as `null`, then current sections in id order:
 * a new section is sent whole, a shared one as its recursive patch when it changed. Both
 * snapshots must be free of nulls inside objects (as `WorldState.snapshot()` guarantees), or the
 * patch could not tell "set to null" from "delete".
 */
export function mergePatchFrom(
  previous: WorldStateSnapshot,
  current: WorldStateSnapshot,
): JsonObject | undefined {
  const patch: JsonObject = {};
  for (const [key] of sortedEntries(previous)) {
    if (!Object.hasOwn(current, key)) setMember(patch, key, null);
  }
  for (const [key, value] of sortedEntries(current)) {
    const before = getMember(previous, key);
    if (before === undefined) {
      setMember(patch, key, cloneJson(value));
      continue;
    }
    const change = createMergePatch(before, value);
    if (change !== undefined) setMember(patch, key, change);
  }
  return Object.keys(patch).length === 0 ? undefined : patch;
}

/**
 * Applies an RFC 7386 merge patch to a snapshot and returns the new snapshot; the inputs are not
 * changed. A top-level `null` removes that section. Nulls nested inside newly inserted objects
 * are dropped, because RFC 7386 merges a new object onto an empty target.
 */
export function applyMergePatch(
  snapshot: WorldStateSnapshot,
  patch: JsonObject,
): WorldStateSnapshot {
  const merged = cloneJson(snapshot);
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete merged[key];
    } else {
      setMember(merged, key, applyMergePatchValue(getMember(merged, key) ?? null, value));
    }
  }
  const result: WorldStateSnapshot = {};
  for (const [key, value] of sortedEntries(merged)) setMember(result, key, value);
  return result;
}

/** `undefined` when equal; a non-object `current` replaces whole (arrays are never diffed). */
function createMergePatch(previous: JsonValue, current: JsonValue): JsonValue | undefined {
  if (jsonEqual(previous, current)) return undefined;
  if (!isJsonObject(current)) return cloneJson(current);
  // A non-object previous still yields an object patch, `{}` when `current` is `{}`: applying it
  // turns the target into an empty object.
  const before = isJsonObject(previous) ? previous : undefined;
  const patch: JsonObject = {};
  if (before !== undefined) {
    for (const key of Object.keys(before)) {
      if (!Object.hasOwn(current, key)) setMember(patch, key, null);
    }
  }
  for (const [key, value] of Object.entries(current)) {
    const old = before === undefined ? undefined : getMember(before, key);
    if (old === undefined) {
      setMember(patch, key, cloneJson(value));
      continue;
    }
    const change = createMergePatch(old, value);
    if (change !== undefined) setMember(patch, key, change);
  }
  return patch;
}

/** RFC 7386 `MergePatch(Target, Patch)`, returning a new value. */
function applyMergePatchValue(target: JsonValue, patch: JsonValue): JsonValue {
  if (!isJsonObject(patch)) return cloneJson(patch);
  // Object spread defines own members (an own `__proto__` stays data), unlike assignment.
  const result: JsonObject = isJsonObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete result[key];
    } else {
      setMember(result, key, applyMergePatchValue(getMember(result, key) ?? null, value));
    }
  }
  return result;
}
