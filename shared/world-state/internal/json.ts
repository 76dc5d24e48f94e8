import type { JsonObject, JsonValue } from "../../protocol/index.ts";

/** A JSON object (not an array, not null). */
export function isJsonObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * An own member of `object`, or `undefined`. Plain indexing would read inherited properties
 * (`object["__proto__"]` is `Object.prototype`), and JSON keys are arbitrary strings.
 */
export function getMember(object: JsonObject, key: string): JsonValue | undefined {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

/** Sets an own member; `__proto__` is defined as data instead of changing the prototype. */
export function setMember(object: JsonObject, key: string, value: JsonValue): void {
  if (key === "__proto__") {
    Object.defineProperty(object, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else {
    object[key] = value;
  }
}

export function cloneJson<T extends JsonValue>(value: T): T {
  if (Array.isArray(value)) return value.map(cloneJson) as T;
  if (isJsonObject(value)) {
    const copy: JsonObject = {};
    for (const [key, member] of Object.entries(value)) setMember(copy, key, cloneJson(member));
    return copy as T;
  }
  return value;
}

/** Structural equality of JSON values; object member order does not matter. */
export function jsonEqual(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    return a.every((value, i) => {
      const other = b[i];
      return other !== undefined && jsonEqual(value, other);
    });
  }
  if (isJsonObject(a)) {
    if (!isJsonObject(b)) return false;
    const members = Object.entries(a);
    if (members.length !== Object.keys(b).length) return false;
    return members.every(([key, value]) => {
      const other = getMember(b, key);
      return other !== undefined && jsonEqual(value, other);
    });
  }
  return false;
}

/**
 * Orders strings by Unicode code point, which is the byte order of their UTF-8 form (how Codex's
 * `BTreeMap<String, _>` sorts section ids). Plain `<` compares UTF-16 code units, which puts
 * astral characters (surrogate pairs) before U+E000–U+FFFF.
 */
export function compareCodePoints(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xSurrogate = x >= 0xd800 && x <= 0xdfff;
    const ySurrogate = y >= 0xd800 && y <= 0xdfff;
    if (xSurrogate !== ySurrogate) return xSurrogate ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** The object's members in code point order of their keys (see `compareCodePoints`). */
export function sortedEntries(object: JsonObject): [string, JsonValue][] {
  return Object.entries(object).sort(([a], [b]) => compareCodePoints(a, b));
}
