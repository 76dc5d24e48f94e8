import {
  IdleCompactionConfigSchema,
  METADATA_MAX_KEYS,
  MetadataFilterSchema,
  metadataRecordOf,
  ThreadMetadataValueSchema,
} from "../protocol/index.ts";
import * as z from "../zod/index.ts";
import { ApiKeyIdSchema, TenantIdSchema } from "./ids.ts";
import { QUOTA_NAMES } from "./problems.ts";
import { pageLimitParam } from "./requests.ts";

/**
 * The tenancy layer of HTTP API v1 (design §11): tenants and their quotas, API keys and scopes,
 * thread listing and metadata, the usage ledger. The zod schemas are the single definition, as in
 * `requests.ts` and `thread/resources.ts`.
 */

/** Where a tenant's data lives: its Durable Objects' jurisdiction and its R2 bucket's. */
export const JURISDICTIONS = ["eu", "fedramp"] as const;
export const JurisdictionSchema = z.onFirstUse(() =>
  z
    .nullable(z.enum(JURISDICTIONS))
    .check(
      z.describe("Data residency, fixed at creation: `eu`, `fedramp`, or null (no restriction)."),
    ),
);
export type Jurisdiction = z.output<typeof JurisdictionSchema>;

/**
 * What a key may do. A key created without `scopes` has every one. `tools` (the tenant's MCP
 * servers, design §16) came after the others: a key made before it that held all of them was
 * given it too (the tenant schema's step that added the MCP servers' table).
 */
export const SCOPES = ["threads", "hooks", "keys", "usage", "tools"] as const;
export const ScopeSchema = z.onFirstUse(() => z.enum(SCOPES));
export type Scope = z.output<typeof ScopeSchema>;

const positiveCount = z.onFirstUse(() =>
  z.number().check(z.int(), z.gte(1), z.lte(Number.MAX_SAFE_INTEGER)),
);

/** The quotas as a request sets them: a number sets one, null removes it, absent leaves it. */
export const QuotasInputSchema = z.onFirstUse(() =>
  z.strictObject({
    max_threads: z
      .optional(z.nullable(positiveCount))
      .check(z.describe("Threads the tenant may hold.")),
    max_running_turns: z
      .optional(z.nullable(positiveCount))
      .check(z.describe("Turns (and compactions) running at once across the tenant's threads.")),
    tokens_per_day: z
      .optional(z.nullable(positiveCount))
      .check(
        z.describe("Input + output tokens per UTC day; a turn is refused once they are spent."),
      ),
    max_thread_bytes: z
      .optional(z.nullable(positiveCount))
      .check(
        z.describe("Bytes of rollout JSONL one thread may hold; a full thread takes no new turn."),
      ),
  }),
);

/** The quotas of a tenant: every one present, null when unlimited. */
export const QuotasSchema = z.onFirstUse(() =>
  z.object({
    max_threads: z.nullable(positiveCount),
    max_running_turns: z.nullable(positiveCount),
    tokens_per_day: z.nullable(positiveCount),
    max_thread_bytes: z.nullable(positiveCount),
  }),
);
export type Quotas = z.output<typeof QuotasSchema>;

export const NO_QUOTAS: Quotas = Object.freeze({
  max_threads: null,
  max_running_turns: null,
  tokens_per_day: null,
  max_thread_bytes: null,
});

/** `quotas` as stored after applying `patch` (RFC 7386 style: null removes, absent keeps). */
export function patchQuotas(base: Quotas, patch: z.output<typeof QuotasInputSchema>): Quotas {
  const next = { ...base };
  for (const name of QUOTA_NAMES) {
    const value = patch[name];
    if (value !== undefined) next[name] = value;
  }
  return next;
}

/**
 * What a tenant's threads use where they set nothing of their own: today `idle_compaction`
 * (null: none). A thread's own value wins, and a thread's explicit null turns it off.
 */
export const ThreadDefaultsSchema = z.onFirstUse(() =>
  z.object({
    idle_compaction: z
      .nullable(IdleCompactionConfigSchema)
      .check(
        z.describe(
          "The idle compaction of the tenant's threads whose configuration has no idle_compaction.",
        ),
      ),
  }),
);
export type ThreadDefaults = z.output<typeof ThreadDefaultsSchema>;

export const NO_THREAD_DEFAULTS: ThreadDefaults = Object.freeze({ idle_compaction: null });

/** `thread_defaults` in a create or patch: each field present sets it, null removes it. */
export const ThreadDefaultsInputSchema = z.onFirstUse(() =>
  z.strictObject({
    idle_compaction: z.optional(z.nullable(IdleCompactionConfigSchema)),
  }),
);

/** `thread_defaults` as stored after applying `patch` (absent keeps, null removes). */
export function patchThreadDefaults(
  base: ThreadDefaults | undefined,
  patch: z.output<typeof ThreadDefaultsInputSchema> | undefined,
): ThreadDefaults {
  const idle = patch?.idle_compaction;
  return { idle_compaction: idle === undefined ? (base?.idle_compaction ?? null) : idle };
}

/** A stored tenant record, with the fields records written before them lacked. */
export function tenantRecordOf(record: TenantResource): TenantResource {
  return record.thread_defaults === undefined
    ? { ...record, thread_defaults: NO_THREAD_DEFAULTS }
    : record;
}

const timestamp = z.onFirstUse(() => z.iso.datetime());
const TenantNameSchema = z.onFirstUse(() => z.string().check(z.minLength(1), z.maxLength(256)));

/** `POST /v1/admin/tenants`. */
export const CreateTenantBodySchema = z.onFirstUse(() =>
  z.strictObject({
    id: TenantIdSchema,
    name: z.optional(z.nullable(TenantNameSchema)),
    jurisdiction: z.optional(JurisdictionSchema),
    quotas: z.optional(QuotasInputSchema),
    thread_defaults: z.optional(ThreadDefaultsInputSchema),
  }),
);

/**
 * `PATCH /v1/admin/tenants/{tenant}`: the name, quotas and thread defaults; the jurisdiction is
 * fixed.
 */
export const PatchTenantBodySchema = z.onFirstUse(() =>
  z.strictObject({
    name: z.optional(z.nullable(TenantNameSchema)),
    quotas: z.optional(QuotasInputSchema),
    thread_defaults: z.optional(ThreadDefaultsInputSchema),
  }),
);

export const TenantResourceSchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("tenant"),
    id: TenantIdSchema,
    name: z.nullable(z.string()),
    jurisdiction: JurisdictionSchema,
    quotas: QuotasSchema,
    thread_defaults: ThreadDefaultsSchema,
    /** `deleting` from the delete until its threads are gone; then the tenant no longer exists. */
    status: z.enum(["active", "deleting"]),
    created_at: timestamp,
  }),
);
export type TenantResource = z.output<typeof TenantResourceSchema>;

/** `POST /v1/keys`, `POST /v1/admin/tenants/{tenant}/keys`. */
export const CreateKeyBodySchema = z.onFirstUse(() =>
  z.strictObject({
    name: z.optional(z.nullable(z.string().check(z.minLength(1), z.maxLength(256)))),
    scopes: z
      .optional(
        z.array(ScopeSchema).check(
          z.minLength(1),
          z.refine((scopes) => new Set(scopes).size === scopes.length, "each scope at most once"),
        ),
      )
      .check(
        z.describe(
          "What the key may do; absent: every scope (of the creating key, under /v1/keys).",
        ),
      ),
  }),
);

export const ApiKeyResourceSchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("api_key"),
    id: ApiKeyIdSchema,
    name: z.nullable(z.string()),
    scopes: z.array(ScopeSchema),
    /** The key with its secret cut to its last four characters, to tell keys apart. */
    redacted_key: z.string(),
    created_at: timestamp,
    /** When the key was last checked by the service; updated at most once a minute. */
    last_used_at: z.nullable(timestamp),
  }),
);
export type ApiKeyResource = z.output<typeof ApiKeyResourceSchema>;

/** A new key: the resource plus `key`, the secret, in this answer only. */
export const CreatedApiKeySchema = z.onFirstUse(() =>
  z.extend(ApiKeyResourceSchema, {
    key: z.string().check(z.describe("The secret. Shown once: only its SHA-256 digest is stored.")),
  }),
);
export type CreatedApiKey = z.output<typeof CreatedApiKeySchema>;

/** A page of a directory-like list (tenants, keys). */
export const ListQuerySchema = z.onFirstUse(() =>
  z.strictObject({
    limit: pageLimitParam(100, 20),
    cursor: z.optional(z.string().check(z.minLength(1), z.maxLength(512))),
  }),
);
export type ListQuery = z.output<typeof ListQuerySchema>;

export const TenantParamsSchema = z.onFirstUse(() => z.object({ tenant: TenantIdSchema }));
export const KeyParamsSchema = z.onFirstUse(() => z.object({ key_id: ApiKeyIdSchema }));
export const TenantKeyParamsSchema = z.onFirstUse(() =>
  z.object({ tenant: TenantIdSchema, key_id: ApiKeyIdSchema }),
);

/** `GET /v1/threads`: `metadata[KEY]=VALUE` arrives folded into `metadata` (see the worker). */
export const ListThreadsQuerySchema = z.onFirstUse(() =>
  z.strictObject({
    limit: pageLimitParam(100, 20),
    cursor: z.optional(z.string().check(z.minLength(1), z.maxLength(512))),
    status: z.optional(z.enum(["idle", "running", "requires_action"])),
    order: z
      ._default(z.enum(["desc", "asc"]), "desc")
      .check(z.describe("By `updated_at`: newest first (`desc`, the default) or oldest first.")),
    metadata: z
      .optional(MetadataFilterSchema)
      .check(
        z.describe(
          "`metadata[KEY]=VALUE`: only threads whose metadata has KEY set to VALUE (all of them).",
        ),
      ),
  }),
);
export type ListThreadsQuery = z.output<typeof ListThreadsQuerySchema>;

/** `PATCH /v1/threads/{id}`: a JSON merge patch of the metadata (a string sets, null removes). */
export const PatchThreadBodySchema = z.onFirstUse(() =>
  z.strictObject({
    metadata: metadataRecordOf(z.nullable(ThreadMetadataValueSchema)),
  }),
);
export type PatchThreadBody = z.output<typeof PatchThreadBodySchema>;

/**
 * `metadata` after a JSON merge patch (RFC 7386: a string sets a key, null removes it), or
 * undefined when the result would hold more keys than a thread may.
 */
export function mergeMetadata(
  base: Readonly<Record<string, string>>,
  patch: Readonly<Record<string, string | null>>,
): Record<string, string> | undefined {
  const next: Record<string, string> = { ...base };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete next[key];
    else next[key] = value;
  }
  return Object.keys(next).length <= METADATA_MAX_KEYS ? next : undefined;
}

/** Token counts of the usage ledger (design §11); `reasoning_tokens` is part of `output_tokens`. */
const usageCounts = () => ({
  input_tokens: z.number().check(z.int(), z.nonnegative()),
  cached_input_tokens: z.number().check(z.int(), z.nonnegative()),
  output_tokens: z.number().check(z.int(), z.nonnegative()),
  reasoning_tokens: z.number().check(z.int(), z.nonnegative()),
  /** Provider requests that reported usage. */
  requests: z.number().check(z.int(), z.nonnegative()),
  /** Turns (and compactions) counted where their first provider request is. */
  turns: z.number().check(z.int(), z.nonnegative()),
});

/** The share of prompt tokens served from the provider's cache, derived from the counts. */
const cacheHitRatio = () =>
  z
    .nullable(z.number().check(z.gte(0), z.lte(1)))
    .check(
      z.describe(
        "`cached_input_tokens` ÷ `input_tokens`: the share of the prompt tokens the provider read from its cache (design §14); null before any input.",
      ),
    );

/** A thread's own totals: what its provider requests used (a fork starts from zero). */
export const ThreadUsageSchema = z.onFirstUse(() =>
  z.object({ ...usageCounts(), cache_hit_ratio: cacheHitRatio() }),
);
export type ThreadUsage = z.output<typeof ThreadUsageSchema>;
/** The counts a ledger keeps; the ratio is derived when they are shown (`withCacheHitRatio`). */
export type UsageCounts = Omit<ThreadUsage, "cache_hit_ratio">;

/** Counts with their `cache_hit_ratio`. */
export function withCacheHitRatio<T extends UsageCounts>(counts: T): T & ThreadUsage {
  const ratio = counts.input_tokens > 0 ? counts.cached_input_tokens / counts.input_tokens : null;
  return { ...counts, cache_hit_ratio: ratio === null ? null : Math.min(1, ratio) };
}

export const ZERO_THREAD_USAGE: UsageCounts = Object.freeze({
  input_tokens: 0,
  cached_input_tokens: 0,
  output_tokens: 0,
  reasoning_tokens: 0,
  requests: 0,
  turns: 0,
});

export const USAGE_GROUPS = ["day", "thread", "model"] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

const day = z.onFirstUse(() => z.iso.date());

/** `GET /v1/usage`: UTC days, `start` included, `end` excluded. */
export const UsageQuerySchema = z.onFirstUse(() =>
  z
    .strictObject({
      start: z
        .optional(day)
        .check(z.describe("First UTC day (YYYY-MM-DD); default: 30 days before `end`.")),
      end: z.optional(day).check(z.describe("The UTC day after the last one; default: tomorrow.")),
      group_by: z._default(z.enum(USAGE_GROUPS), "day"),
      limit: pageLimitParam(1000, 100),
      cursor: z.optional(z.string().check(z.minLength(1), z.maxLength(512))),
    })
    .check(
      z.superRefine((query, ctx) => {
        if (query.start !== undefined && query.end !== undefined && query.start >= query.end) {
          ctx.addIssue({ code: "custom", path: ["end"], message: "end must be after start" });
        }
      }),
    ),
);
export type UsageQuery = z.output<typeof UsageQuerySchema>;

/** One bucket of `GET /v1/usage`: a UTC day, a thread id or a model, by `group_by`. */
export const UsageBucketSchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("usage_bucket"),
    bucket: z.string(),
    ...usageCounts(),
    cache_hit_ratio: cacheHitRatio(),
  }),
);
export type UsageBucket = z.output<typeof UsageBucketSchema>;
