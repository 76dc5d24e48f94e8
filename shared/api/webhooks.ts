import {
  COMPACTION_TRIGGERS,
  McpApprovalRequestSchema,
  NewThreadMetadataSchema,
  ThreadConfigSchema,
  TokenUsageSchema,
} from "../protocol/index.ts";
import {
  HOOK_SCHEMES,
  type HookScheme,
  parseTemplate,
  TemplateError,
  WEBHOOK_EVENT_TYPES,
} from "../webhooks/index.ts";
import * as z from "../zod/index.ts";
import { EndpointIdSchema, HookIdSchema, ThreadIdSchema, TurnIdSchema } from "./ids.ts";
import {
  endpointDescriptionMaxBytes,
  hookInputTemplateMaxBytes,
  hookThreadConfigMaxBytes,
  hookThreadTemplateMaxBytes,
  jsonWithin,
  utf8Within,
} from "./limits.ts";
import { TurnErrorSchema, TurnStatusSchema } from "./resources.ts";
import type { Jurisdiction } from "./tenancy.ts";

/**
 * Webhooks in and out (design §12): inbound hooks that start turns and their delivery log,
 * outbound endpoints and their deliveries, and the events they receive. The zod schemas are the
 * single definition, as in `requests.ts` and `thread/resources.ts`.
 */

const timestamp = z.onFirstUse(() => z.iso.datetime());

export const HookSchemeSchema = z.onFirstUse(() =>
  z
    .enum(HOOK_SCHEMES)
    .check(z.describe("How deliveries are signed: Standard Webhooks, GitHub, Slack or Stripe.")),
);

/**
 * What a hook's 72-hour dedup is keyed on: the sender's delivery id, or the SHA-256 of the body.
 * GitHub signs only the body (its `X-GitHub-Delivery` can be replaced by anyone who captured a
 * delivery), so its hooks dedup on the body unless told otherwise.
 */
export const HookDedupSchema = z.onFirstUse(() =>
  z
    .enum(["delivery_id", "body"])
    .check(
      z.describe(
        "What redeliveries are recognized by for 72 hours: the sender's delivery id, or the body's " +
          "SHA-256. Default: `body` for `github` (its delivery id is not signed), else `delivery_id`.",
      ),
    ),
);
export type HookDedup = z.output<typeof HookDedupSchema>;

/** A hook's dedup: as it was created, or its scheme's default (also for hooks made before it). */
export function hookDedupOf(hook: {
  verify: { scheme: HookScheme };
  dedup?: HookDedup | undefined;
}): HookDedup {
  return hook.dedup ?? (hook.verify.scheme === "github" ? "body" : "delivery_id");
}

/** A template over a delivery, at most `maxBytes` of UTF-8; checked when the hook is created. */
const template = (maxBytes: number) =>
  z.string().check(
    z.minLength(1),
    utf8Within(maxBytes),
    z.superRefine((source, ctx) => {
      try {
        parseTemplate(source);
      } catch (err) {
        if (!(err instanceof TemplateError)) throw err;
        ctx.addIssue({ code: "custom", message: `not a template: ${err.message}` });
      }
    }),
  );

/** What a hook does when the thread is running a turn: its deliveries' turns wait by default. */
export const HookOnBusySchema = z.onFirstUse(() =>
  z
    .enum(["queue", "interrupt", "reject"])
    .check(
      z.describe(
        "`queue` (the default): the delivery's turn runs after the running one; `interrupt`: the " +
          "running turn is interrupted first; `reject`: 409 `thread_busy`, nothing recorded, so the " +
          "sender retries.",
      ),
    ),
);

/** `POST /v1/hooks`. */
export const CreateHookBodySchema = z.onFirstUse(() =>
  z.strictObject({
    id: z.optional(HookIdSchema).check(z.describe("The hook's id; generated when absent.")),
    name: z.optional(z.nullable(z.string().check(z.minLength(1), z.maxLength(256)))),
    verify: z.strictObject({
      scheme: HookSchemeSchema,
      secret: z
        .optional(z.string().check(z.minLength(1), z.maxLength(512)))
        .check(
          z.describe(
            "The signing secret. Generated when absent (shown once) for `standard` and `github`; " +
              "`slack` and `stripe` need the secret Slack or Stripe issued.",
          ),
        ),
    }),
    thread: template(hookThreadTemplateMaxBytes).check(
      z.describe(
        "The thread id as a template over the delivery (`{{body.path}}`, `{{headers.name}}`); " +
          "characters outside [A-Za-z0-9_-] become `_`, and an id longer than 64 is shortened " +
          `with a digest. At most ${hookThreadTemplateMaxBytes} bytes.`,
      ),
    ),
    input: z
      .optional(template(hookInputTemplateMaxBytes))
      .check(
        z.describe(
          "The turn's user message as a template; default: the event name, then the body. At " +
            `most ${hookInputTemplateMaxBytes} bytes.`,
        ),
      ),
    on_busy: z._default(HookOnBusySchema, "queue"),
    dedup: z.optional(HookDedupSchema),
    thread_config: z
      .optional(
        z
          .extend(ThreadConfigSchema, { metadata: z.optional(NewThreadMetadataSchema) })
          .check(jsonWithin(hookThreadConfigMaxBytes)),
      )
      .check(
        z.describe(
          "The configuration of the thread a first delivery creates (as `POST /v1/threads`), at " +
            `most ${hookThreadConfigMaxBytes} bytes of JSON.`,
        ),
      ),
    events: z
      .optional(
        z
          .array(z.string().check(z.minLength(1), z.maxLength(128)))
          .check(z.minLength(1), z.maxLength(100)),
      )
      .check(
        z.describe(
          "Only these event types start turns (GitHub `X-GitHub-Event`, or `event.action`; " +
            "Slack's event type; the `type` of Stripe and Standard Webhooks bodies); others are " +
            "answered 202 `ignored`.",
        ),
      ),
  }),
);
export type CreateHookBody = z.output<typeof CreateHookBodySchema>;

/** `POST /v1/hooks/{id}/rotate-secret`. */
export const RotateHookSecretBodySchema = z.onFirstUse(() =>
  z.strictObject({
    secret: z
      .optional(z.string().check(z.minLength(1), z.maxLength(512)))
      .check(z.describe("The new secret; generated when absent.")),
  }),
);

export const HookParamsSchema = z.onFirstUse(() => z.object({ id: HookIdSchema }));

export const HookResourceSchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("hook"),
    id: HookIdSchema,
    name: z.nullable(z.string()),
    url: z
      .url()
      .check(
        z.describe(
          "Where the sender posts, with no API key: `POST /hooks/{tenant}/{hook}.{tag}`, the tag " +
            "made by the service (use the URL as given).",
        ),
      ),
    verify: z.object({ scheme: HookSchemeSchema }),
    thread: z.string(),
    input: z.nullable(z.string()),
    on_busy: HookOnBusySchema,
    dedup: HookDedupSchema,
    thread_config: z.nullable(z.looseObject({})),
    events: z.nullable(z.array(z.string())),
    created_at: timestamp,
    /** Set by a rotation: the previous secret verifies for 24 hours after it. */
    secret_rotated_at: z.nullable(timestamp),
  }),
);
export type HookResource = z.output<typeof HookResourceSchema>;

/** A new hook (or a rotated secret): `secret` only when it was generated, shown this once. */
export const CreatedHookSchema = z.onFirstUse(() =>
  z.extend(HookResourceSchema, {
    secret: z.optional(z.string()).check(z.describe("The generated secret. Shown once.")),
  }),
);
export type CreatedHook = z.output<typeof CreatedHookSchema>;

export const DELIVERY_STATUSES = ["accepted", "ignored", "duplicate", "rejected"] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/**
 * One request to a hook, as its delivery log keeps it (and as `POST /hooks/…` answers it): an
 * accepted delivery with the turn it started and how that turn ended, an ignored one (the
 * filter), a duplicate (the same delivery id within 72 hours), a rejected one (the body, the
 * thread or its quota refused it). A request with a bad signature is not logged.
 */
export const DeliveryResourceSchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("delivery"),
    id: z.string(),
    hook_id: HookIdSchema,
    thread_id: z.nullable(ThreadIdSchema),
    status: z.enum(DELIVERY_STATUSES),
    /** The sender's id (webhook-id, X-GitHub-Delivery, Slack's event_id, Stripe's event id). */
    delivery_id: z.nullable(z.string()),
    event: z.nullable(z.string()),
    received_at: timestamp,
    /** A duplicate's first delivery. */
    duplicate_of: z.nullable(z.string()),
    turn_id: z.nullable(TurnIdSchema),
    turn_status: z.nullable(TurnStatusSchema),
    /** Why it was rejected, or how its turn failed. */
    error: z.nullable(TurnErrorSchema),
  }),
);
export type DeliveryResource = z.output<typeof DeliveryResourceSchema>;

/** `{challenge}`: Slack's `url_verification`, answered once its signature verified. */
export const SlackChallengeSchema = z.onFirstUse(() => z.object({ challenge: z.string() }));

export const WebhookEventTypeSchema = z.onFirstUse(() => z.enum(WEBHOOK_EVENT_TYPES));

const EndpointUrlSchema = z.onFirstUse(() =>
  z
    .string()
    .check(
      z.maxLength(2048),
      z.describe(
        "https (with `SPINDLE_ENV=development` also http to a loopback address); redirects are " +
          "not followed.",
      ),
    ),
);
const EndpointEventsSchema = z.onFirstUse(() =>
  z.array(WebhookEventTypeSchema).check(
    z.minLength(1),
    z.refine((events) => new Set(events).size === events.length, "each event type at most once"),
  ),
);

const EndpointDescriptionSchema = z.onFirstUse(() =>
  z
    .string()
    .check(
      z.minLength(1),
      utf8Within(endpointDescriptionMaxBytes),
      z.describe(`At most ${endpointDescriptionMaxBytes} bytes.`),
    ),
);

/** `POST /v1/webhook-endpoints`. */
export const CreateEndpointBodySchema = z.onFirstUse(() =>
  z.strictObject({
    url: EndpointUrlSchema,
    events: EndpointEventsSchema,
    description: z.optional(z.nullable(EndpointDescriptionSchema)),
  }),
);

/** `PATCH /v1/webhook-endpoints/{id}`. */
export const PatchEndpointBodySchema = z.onFirstUse(() =>
  z.strictObject({
    url: z.optional(EndpointUrlSchema),
    events: z.optional(EndpointEventsSchema),
    description: z.optional(z.nullable(EndpointDescriptionSchema)),
    disabled: z.optional(z.boolean()).check(z.describe("A disabled endpoint receives nothing.")),
  }),
);
export type PatchEndpointBody = z.output<typeof PatchEndpointBodySchema>;

export const EndpointParamsSchema = z.onFirstUse(() => z.object({ id: EndpointIdSchema }));

export const EndpointResourceSchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("webhook_endpoint"),
    id: EndpointIdSchema,
    url: z.string(),
    events: z.array(WebhookEventTypeSchema),
    description: z.nullable(z.string()),
    disabled: z.boolean(),
    /** Why it is disabled: `api` (a PATCH) or `gone` (it answered 410). */
    disabled_reason: z.nullable(z.enum(["api", "gone"])),
    created_at: timestamp,
    /** Set by a rotation: events are signed with the previous secret too for 24 hours after it. */
    secret_rotated_at: z.nullable(timestamp),
  }),
);
export type EndpointResource = z.output<typeof EndpointResourceSchema>;

/** A new endpoint (or a rotated secret): the resource plus its `whsec_` secret, shown once. */
export const CreatedEndpointSchema = z.onFirstUse(() =>
  z.extend(EndpointResourceSchema, {
    secret: z.string().check(z.describe("The `whsec_` signing secret. Shown once.")),
  }),
);
export type CreatedEndpoint = z.output<typeof CreatedEndpointSchema>;

/** One attempt to deliver an event: when, and the status code or the error. */
export const WebhookAttemptSchema = z.onFirstUse(() =>
  z.object({
    at: timestamp,
    status_code: z.nullable(z.number().check(z.int())),
    /** `timeout`, `redirect` (a 3xx: not followed), `network`, `http_{status}`, or null. */
    error: z.nullable(z.string()),
    duration_ms: z.number().check(z.int(), z.nonnegative()),
    /** When the next attempt is due; null when this one delivered or was the last. */
    next_retry_at: z.nullable(timestamp),
  }),
);
export type WebhookAttempt = z.output<typeof WebhookAttemptSchema>;

/** One event to one endpoint, with its attempts (the `webhook-id` is its id). */
export const WebhookDeliverySchema = z.onFirstUse(() =>
  z.object({
    object: z.literal("webhook_delivery"),
    id: z.string().check(z.describe("The `webhook-id`: the same on every attempt.")),
    endpoint_id: EndpointIdSchema,
    type: z.string(),
    thread_id: z.nullable(ThreadIdSchema),
    turn_id: z.nullable(TurnIdSchema),
    status: z.enum(["pending", "delivered", "failed"]),
    created_at: timestamp,
    attempts: z.array(WebhookAttemptSchema),
  }),
);
export type WebhookDelivery = z.output<typeof WebhookDeliverySchema>;

/** The body of an outbound event (Standard Webhooks), at most 20 KB. */
export const WebhookEventSchema = z.onFirstUse(() =>
  z.object({
    type: z.union([WebhookEventTypeSchema, z.literal("webhook.test")]),
    timestamp: timestamp,
    data: z.object({
      thread_id: z.optional(ThreadIdSchema),
      turn_id: z.optional(z.nullable(TurnIdSchema)),
      status: z.optional(z.nullable(z.string())),
      usage: z.optional(z.nullable(TokenUsageSchema)),
      pending_calls: z.optional(z.array(z.object({ call_id: z.string(), name: z.string() }))),
      pending_approvals: z.optional(z.array(McpApprovalRequestSchema)),
      pending_calls_truncated: z.optional(z.boolean()),
      error: z.optional(z.object({ code: z.string(), message: z.string() })),
      /** `thread.compacted`: what started the compaction. */
      trigger: z.optional(z.enum(COMPACTION_TRIGGERS)),
      hook_id: z.optional(HookIdSchema),
      delivery_id: z.optional(z.string()),
      endpoint_id: z.optional(EndpointIdSchema),
      sequence: z.optional(z.number().check(z.int())),
    }),
  }),
);

/**
 * What a hook's URL, `/hooks/{tenant}/{hook}.{tag}`, addresses. The `{tenant}` segment is the
 * tenant id, prefixed by its jurisdiction and `.` (outside the id alphabet) when it has one, so the
 * edge reaches the tenant's object from the URL alone, as it does from a key. The tag (after the
 * hook id and `.`) is checked before that (design §18 invariant 20); `null` for a URL made before
 * tags existed.
 */
export interface HookAddress {
  jurisdiction: Jurisdiction;
  tenant: string;
  hookId: string;
  tag: string | null;
}

export function hookPath({ jurisdiction, tenant, hookId, tag }: HookAddress): string {
  const owner = jurisdiction === null ? tenant : `${jurisdiction}.${tenant}`;
  return `/hooks/${owner}/${tag === null ? hookId : `${hookId}.${tag}`}`;
}

/** The address in a hook URL's two segments, or undefined when they cannot be one. */
export function parseHookPath(param: { tenant: string; hook: string }): HookAddress | undefined {
  const owner = /^(?:(eu|fedramp)\.)?([A-Za-z0-9_-]{1,64})$/.exec(param.tenant);
  const hook = /^([A-Za-z0-9_-]{1,64})(?:\.([A-Za-z0-9]{1,64}))?$/.exec(param.hook);
  if (!owner?.[2] || !hook?.[1]) return undefined;
  return {
    jurisdiction: (owner[1] as "eu" | "fedramp" | undefined) ?? null,
    tenant: owner[2],
    hookId: hook[1],
    tag: hook[2] ?? null,
  };
}

/** `POST /hooks/{tenant}/{hook}`: read loosely, so a malformed one is a 404 like an unknown one. */
export const HookDeliveryParamsSchema = z.onFirstUse(() =>
  z.object({
    tenant: z
      .string()
      .check(z.describe("The tenant id, prefixed `eu.` or `fedramp.` for its jurisdiction.")),
    hook: z
      .string()
      .check(z.describe("The hook id and its tag, `{hook}.{tag}`, as the hook's `url` has them.")),
  }),
);
