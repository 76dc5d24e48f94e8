import * as z from "zod";

/** At most this many keys per thread (design §11). */
export const METADATA_MAX_KEYS = 16;
export const METADATA_KEY_MAX_CHARS = 64;
export const METADATA_VALUE_MAX_CHARS = 512;

/**
 * Names of JavaScript's object machinery. A request may not name one as a metadata key: zod
 * passes over `__proto__` without a word (it would set the prototype of the object it builds),
 * and the other two read as inherited members wherever metadata is an object.
 */
const RESERVED_KEYS: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);
const RESERVED_KEY_MESSAGE = "a metadata key may not be __proto__, constructor or prototype";

const MetadataKeySchema = z
  .string()
  .min(1, "a metadata key is 1-64 characters")
  .max(METADATA_KEY_MAX_CHARS, "a metadata key is 1-64 characters");

export const ThreadMetadataValueSchema = z
  .string()
  .max(METADATA_VALUE_MAX_CHARS, "a metadata value is at most 512 characters");

/** `schema` with at most `METADATA_MAX_KEYS` keys (`noun`: what the message calls them). */
const atMostKeys = <S extends z.ZodType<Record<string, unknown>>>(schema: S, noun: string) =>
  schema.refine((metadata) => Object.keys(metadata).length <= METADATA_MAX_KEYS, {
    message: `at most ${METADATA_MAX_KEYS} ${noun}`,
  });

/**
 * A thread's metadata: string keys and string values a client sets to find its threads again
 * (`GET /v1/threads?metadata[KEY]=VALUE`). Persisted in `spindle_metadata` rollout lines, so a
 * thread rebuilt from R2 keeps it; read back as stored.
 */
export const ThreadMetadataSchema = atMostKeys(
  z.record(MetadataKeySchema, ThreadMetadataValueSchema),
  "metadata keys",
);

export type ThreadMetadata = z.output<typeof ThreadMetadataSchema>;

/**
 * Metadata keys a request names (to set, to remove, to filter by), with `values`: 1-64
 * characters and no reserved name. An own `__proto__` key is refused before the record is read,
 * since the record would skip it.
 */
export function metadataRecordOf<V extends z.ZodType>(values: V) {
  return z.preprocess(
    (input, ctx) => {
      if (typeof input === "object" && input !== null && Object.hasOwn(input, "__proto__")) {
        ctx.addIssue({ code: "custom", path: ["__proto__"], message: RESERVED_KEY_MESSAGE, input });
      }
      return input;
    },
    z.record(
      MetadataKeySchema.refine((key) => !RESERVED_KEYS.has(key), RESERVED_KEY_MESSAGE),
      values,
    ),
  );
}

/** The metadata a request gives a new thread (a create, a fork, a hook's thread). */
export const NewThreadMetadataSchema = atMostKeys(
  metadataRecordOf(ThreadMetadataValueSchema),
  "metadata keys",
);

/** `GET /v1/threads`' `metadata[KEY]=VALUE` filters: keys as a create sets them. */
export const MetadataFilterSchema = atMostKeys(
  metadataRecordOf(ThreadMetadataValueSchema),
  "metadata filters",
);
