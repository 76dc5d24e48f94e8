import { TokenUsageInfoSchema } from "../protocol/index.ts";
import * as z from "../zod/index.ts";
import { TurnIdSchema } from "./ids.ts";
import { CacheReportSchema } from "./model-requests.ts";
import { ResponseItemOutputSchema, TurnResourceSchema, TurnWarningSchema } from "./resources.ts";

/** Every event type, in the order a turn emits them (design §7). */
export const THREAD_EVENT_TYPES = [
  "turn.started",
  "item.completed",
  "item.delta",
  "token_count",
  "turn.warning",
  "turn.completed",
  "turn.requires_action",
  "turn.interrupted",
  "turn.failed",
] as const;
export type ThreadEventType = (typeof THREAD_EVENT_TYPES)[number];

/** The events that end a turn's stream: exactly one of them comes last. */
export const TERMINAL_EVENT_TYPES = [
  "turn.completed",
  "turn.requires_action",
  "turn.interrupted",
  "turn.failed",
] as const satisfies readonly ThreadEventType[];
export type TerminalEventType = (typeof TERMINAL_EVENT_TYPES)[number];

const TERMINAL_EVENT_TYPE_SET: ReadonlySet<string> = new Set(TERMINAL_EVENT_TYPES);
export function isTerminalEventType(type: string): type is TerminalEventType {
  return TERMINAL_EVENT_TYPE_SET.has(type);
}

/** The thread's event sequence: strictly increasing per thread, never reused, not contiguous. */
const EventSeqSchema = z.onFirstUse(() =>
  z.number().check(z.int(), z.gte(0), z.lte(Number.MAX_SAFE_INTEGER)),
);

function threadEvent<
  T extends ThreadEventType,
  Turn extends z.ZodMiniType,
  D extends z.ZodMiniType,
>(type: T, turnId: Turn, data: D) {
  return z.object({ seq: EventSeqSchema, type: z.literal(type), turn_id: turnId, data });
}

/**
 * One thread event (design §7), as a line of the DO's NDJSON streams and as the `data:` of an SSE
 * event whose `event:` is `type` and `id:` is `seq`. `turn.*` events carry the Turn as it stands
 * (the terminal ones as it ended); `item.completed` carries every recorded item, with `context`
 * true for context items (initial context, world-state diffs) and `turn_id` null for items
 * injected outside a turn; `item.delta` is streamed model text (replay may skip it);
 * `token_count` carries the thread's usage after a model response and that request's cache report; `turn.warning` says a step
 * went without some MCP tools (a server unreachable), once per turn and cause.
 */
export const ThreadEventSchema = z.onFirstUse(() =>
  z.discriminatedUnion("type", [
    threadEvent("turn.started", TurnIdSchema, TurnResourceSchema),
    threadEvent(
      "item.completed",
      z.nullable(TurnIdSchema),
      z.object({ item: ResponseItemOutputSchema, context: z.boolean() }),
    ),
    threadEvent(
      "item.delta",
      TurnIdSchema,
      z.object({
        /** The message the text belongs to: the id its `item.completed` carries. */
        item_id: z.string(),
        delta: z.string(),
      }),
    ),
    threadEvent(
      "token_count",
      TurnIdSchema,
      z.object({
        info: z.nullable(TokenUsageInfoSchema),
        /** The cache report of the request the count answers (design §14); null: not known. */
        cache: z.nullable(CacheReportSchema),
      }),
    ),
    threadEvent("turn.warning", TurnIdSchema, z.object({ warning: TurnWarningSchema })),
    threadEvent("turn.completed", TurnIdSchema, TurnResourceSchema),
    threadEvent("turn.requires_action", TurnIdSchema, TurnResourceSchema),
    threadEvent("turn.interrupted", TurnIdSchema, TurnResourceSchema),
    threadEvent("turn.failed", TurnIdSchema, TurnResourceSchema),
  ]),
);
export type ThreadEvent = z.output<typeof ThreadEventSchema>;

/**
 * What the worker checks of each event line before framing it: the fields SSE framing needs.
 * The rest is the DO's own output and passes through as it came.
 */
export const ThreadEventEnvelopeSchema = z.onFirstUse(() =>
  z.looseObject({
    seq: EventSeqSchema,
    type: z.enum(THREAD_EVENT_TYPES),
  }),
);
