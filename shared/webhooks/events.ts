import { utf8ByteLength } from "../context-manager/index.ts";
import type { COMPACTION_TRIGGERS, McpApprovalRequest, TokenUsage } from "../protocol/index.ts";

/**
 * Outbound lifecycle events (design §12): their types, their thin Standard Webhooks payloads, and
 * the retry schedule of their delivery.
 */
export const WEBHOOK_EVENT_TYPES = [
  "turn.completed",
  "turn.requires_action",
  "turn.failed",
  "turn.interrupted",
  "thread.created",
  "thread.deleted",
  "thread.compacted",
  "hook.failed",
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** What `POST /v1/webhook-endpoints/{id}/test` sends; no endpoint subscribes to it. */
export const TEST_EVENT_TYPE = "webhook.test";

/** The largest payload (Standard Webhooks: thin, usually under 20 KB). */
export const WEBHOOK_PAYLOAD_MAX_BYTES = 20 * 1024;

/** An error message in a payload is cut to this many characters. */
const ERROR_MESSAGE_MAX_CHARS = 1_000;

/** The waits after each failed attempt, in seconds (Svix's schedule): 8 attempts in all. */
export const RETRY_SCHEDULE_S: readonly number[] = [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000];
export const MAX_ATTEMPTS = RETRY_SCHEDULE_S.length + 1;

/** How long an attempt may take by default (design §12: a 15 s timeout is a failed attempt). */
export const DELIVERY_TIMEOUT_MS = 15_000;

/** The bound on an attempt: `raw` milliseconds (`SPINDLE_WEBHOOK_TIMEOUT_MS`), else the default. */
export function deliveryTimeoutMs(raw: string | undefined): number {
  const ms = Number(raw);
  return Number.isFinite(ms) && ms > 0 ? ms : DELIVERY_TIMEOUT_MS;
}

/**
 * The wait before the attempt after attempt `attempt` (1 for the first) failed, in whole
 * seconds, the schedule multiplied by `scale` (tests compress it); undefined after the last.
 */
export function retryDelaySeconds(attempt: number, scale = 1): number | undefined {
  const wait = RETRY_SCHEDULE_S[attempt - 1];
  return wait === undefined ? undefined : Math.round(wait * scale);
}

/** A pending client tool call, as a payload names it (its arguments are in the turn). */
export interface PendingCallRef {
  call_id: string;
  name: string;
}

/** The `data` of an event: the thread, and for a turn's events the turn as it ended or paused. */
export interface WebhookEventData {
  thread_id: string;
  turn_id: string | null;
  status: string | null;
  usage: TokenUsage | null;
  pending_calls?: PendingCallRef[];
  /** `turn.requires_action`: the server calls held for approval (`mcp_approval_request`s). */
  pending_approvals?: McpApprovalRequest[];
  error?: { code: string; message: string };
  /** `thread.compacted`: what started the compaction (`manual`, `auto`, `idle`). */
  trigger?: (typeof COMPACTION_TRIGGERS)[number];
  /** `hook.failed`: the hook and the delivery whose turn failed. */
  hook_id?: string;
  delivery_id?: string;
  /** Grows by one with each event the thread records for its endpoints, across deletes. */
  sequence: number;
}

/**
 * The JSON body of an event: `{type, timestamp, data}`, at most `WEBHOOK_PAYLOAD_MAX_BYTES`. An
 * error message is cut to 1,000 characters; pending calls and approval requests that would not
 * fit are left out (`pending_calls_truncated: true`): the turn has them all.
 */
export function eventPayload(type: string, timestamp: string, data: WebhookEventData): string {
  const error = data.error && {
    code: data.error.code,
    message: data.error.message.slice(0, ERROR_MESSAGE_MAX_CHARS),
  };
  const fitted = { ...data, ...(error ? { error } : {}) };
  let body = JSON.stringify({ type, timestamp, data: fitted });
  const calls = fitted.pending_calls;
  const approvals = fitted.pending_approvals;
  if (calls === undefined || utf8ByteLength(body) <= WEBHOOK_PAYLOAD_MAX_BYTES) return body;
  let kept = Math.max(calls.length, approvals?.length ?? 0);
  while (kept > 0) {
    kept = Math.floor(kept / 2);
    const trimmed = {
      ...fitted,
      pending_calls: calls.slice(0, kept),
      ...(approvals ? { pending_approvals: approvals.slice(0, kept) } : {}),
      pending_calls_truncated: true,
    };
    body = JSON.stringify({ type, timestamp, data: trimmed });
    if (utf8ByteLength(body) <= WEBHOOK_PAYLOAD_MAX_BYTES) return body;
  }
  return body;
}
