import * as z from "zod";

/**
 * A JSON object as a record, refusing a `__proto__` key: assigning that key to a JavaScript
 * object sets the object's prototype instead of a member, so zod's record (and most clients)
 * would drop it without a word.
 */
export function recordOf<K extends z.core.$ZodRecordKey, V extends z.ZodType>(key: K, value: V) {
  return z.preprocess(
    (input, ctx) => {
      if (typeof input === "object" && input !== null && Object.hasOwn(input, "__proto__")) {
        ctx.addIssue({ code: "custom", path: ["__proto__"], message: "__proto__ cannot be a key" });
      }
      return input;
    },
    z.record(key, value),
  );
}
