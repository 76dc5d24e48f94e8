/**
 * Deep, frozen copies of JSON-like values.
 *
 * Everything the ContextManager stores is frozen: clones share item objects (copy-on-write
 * only copies the array), so an in-place change through one clone would leak into the others
 * and into prompts already handed out (design §10 invariant 4). Freezing turns such a change
 * into a TypeError instead of silent corruption. Keys whose value is `undefined` are dropped,
 * as a JSON round trip would drop them. Copying an already-frozen value is free (it is shared),
 * so a history rebuilt from another manager's state (a reload) does not copy every item again.
 */
export function frozenCopy<T>(value: T): T {
  if (typeof value !== "object" || value === null) return value;
  // A frozen value is one this function made (it freezes all the way down): share it. A value
  // frozen only at its top level would break that; none reaches a ContextManager (the engine's
  // other frozen objects, turn and step contexts, are never recorded).
  if (Object.isFrozen(value)) return value;
  if (Array.isArray(value)) {
    return Object.freeze(value.map((v: unknown) => frozenCopy(v))) as T;
  }
  return Object.freeze(withFrozenMembers(value)) as T;
}

/**
 * A new plain object holding frozen copies of `value`'s members (`undefined` ones dropped), not
 * frozen itself: for callers that add to it before freezing it (see `frozenItem`).
 */
export function withFrozenMembers(value: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (v !== undefined) out[key] = frozenCopy(v);
  }
  return out;
}

/**
 * Freezes a JSON value all the way down, in place, and returns it: for values nobody else holds,
 * such as the result of `JSON.parse` (a restored checkpoint's items, see `freezeItemsInPlace`).
 * Like `frozenCopy`, it expects no `undefined` values (JSON has none).
 */
export function freezeInPlace<T>(value: T): T {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return value;
  if (Array.isArray(value)) {
    for (const v of value) freezeInPlace(v);
  } else {
    const record = value as Record<string, unknown>;
    for (const key in record) freezeInPlace(record[key]);
  }
  return Object.freeze(value);
}
