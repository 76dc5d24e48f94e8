import * as z from "zod";

/** At most this many keys per thread (design §11). */
export const METADATA_MAX_KEYS = 16;
export const METADATA_KEY_MAX_CHARS = 64;
export const METADATA_VALUE_MAX_CHARS = 512;

/**
 * A thread's metadata: string keys and string values a client sets to find its threads again
 * (`GET /v1/threads?metadata[KEY]=VALUE`). Persisted in `spindle_metadata` rollout lines, so a
 * thread rebuilt from R2 keeps it.
 */
export const ThreadMetadataSchema = z
  .record(
    z
      .string()
      .min(1, "a metadata key is 1-64 characters")
      .max(METADATA_KEY_MAX_CHARS, "a metadata key is 1-64 characters"),
    z.string().max(METADATA_VALUE_MAX_CHARS, "a metadata value is at most 512 characters"),
  )
  .refine((metadata) => Object.keys(metadata).length <= METADATA_MAX_KEYS, {
    message: `at most ${METADATA_MAX_KEYS} metadata keys`,
  });

export type ThreadMetadata = z.output<typeof ThreadMetadataSchema>;
