import * as z from "../zod/index.ts";

/**
 * A JSON object as a record, refusing a `__proto__` key: assigning that key to a JavaScript
 * object sets the object's prototype instead of a member, so zod's record (and most clients)
 * would drop it without a word.
 */
export function recordOf<K extends z.core.$ZodRecordKey, V extends z.ZodMiniType>(
  key: K,
  value: V,
) {
  return z.pipe(
    z.transform((input: unknown, payload) => {
      if (typeof input === "object" && input !== null && Object.hasOwn(input, "__proto__")) {
        const message = "__proto__ cannot be a key";
        payload.issues.push({ code: "custom", path: ["__proto__"], message, input });
      }
      return input;
    }),
    z.record(key, value),
  );
}
