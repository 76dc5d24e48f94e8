import * as z from "../zod/index.ts";
import { recordOf } from "./json-record.ts";

/** At most this many keys per thread (design §11). */
export const METADATA_MAX_KEYS = 16;
export const METADATA_KEY_MAX_CHARS = 64;
export const METADATA_VALUE_MAX_CHARS = 512;

/**
 * Names a request may not give a metadata key: wherever metadata is a JavaScript object they
 * read as inherited members (`__proto__` is refused by `recordOf`: zod would drop it).
 */
const RESERVED_KEYS: ReadonlySet<string> = new Set(["constructor", "prototype"]);

const MetadataKeySchema = z.onFirstUse(() =>
  z
    .string()
    .check(
      z.minLength(1, "a metadata key is 1-64 characters"),
      z.maxLength(METADATA_KEY_MAX_CHARS, "a metadata key is 1-64 characters"),
    ),
);

export const ThreadMetadataValueSchema = z.onFirstUse(() =>
  z
    .string()
    .check(z.maxLength(METADATA_VALUE_MAX_CHARS, "a metadata value is at most 512 characters")),
);

/** `schema` with at most `METADATA_MAX_KEYS` keys (`noun`: what the message calls them). */
const atMostKeys = <S extends z.ZodMiniType<Record<string, unknown>>>(schema: S, noun: string) =>
  schema.check(
    z.refine((metadata) => Object.keys(metadata).length <= METADATA_MAX_KEYS, {
      message: `at most ${METADATA_MAX_KEYS} ${noun}`,
    }),
  );

/**
 * A thread's metadata: string keys and string values a client sets to find its threads again
 * (`GET /v1/threads?metadata[KEY]=VALUE`). Persisted in `spindle_metadata` rollout lines, so a
 * thread rebuilt from R2 keeps it. Read as stored: the keys a request may not name are refused on
 * the way in (`metadataRecordOf`), so no line stored before becomes unreadable.
 */
export const ThreadMetadataSchema = z.onFirstUse(() =>
  atMostKeys(z.record(MetadataKeySchema, ThreadMetadataValueSchema), "metadata keys"),
);

export type ThreadMetadata = z.output<typeof ThreadMetadataSchema>;

/**
 * Metadata keys a request names (to set, to remove, to filter by), with `values`: 1-64
 * characters, and neither `__proto__`, `constructor` nor `prototype`.
 */
export function metadataRecordOf<V extends z.ZodMiniType>(values: V) {
  return recordOf(
    MetadataKeySchema.check(
      z.refine(
        (key) => !RESERVED_KEYS.has(key),
        "a metadata key may not be constructor or prototype",
      ),
    ),
    values,
  );
}

/** The metadata a request gives a new thread (a create, a fork, a hook's thread). */
export const NewThreadMetadataSchema = z.onFirstUse(() =>
  atMostKeys(metadataRecordOf(ThreadMetadataValueSchema), "metadata keys"),
);

/** `GET /v1/threads`' `metadata[KEY]=VALUE` filters: keys as a create sets them. */
export const MetadataFilterSchema = z.onFirstUse(() =>
  atMostKeys(metadataRecordOf(ThreadMetadataValueSchema), "metadata filters"),
);
