import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { parseJsonWithin } from "../protocol/index.ts";
import type { HookScheme } from "./signatures.ts";

/** A sender's delivery id is recognized for this long: a redelivery within it starts nothing. */
export const DEDUP_WINDOW_MS = 72 * 60 * 60_000;

/**
 * What a verified delivery says, read the way its scheme sends it (design §12): the sender's
 * delivery id (the key of the 72-hour dedup), the event type (what `events` filters), and the
 * body the templates read. A body that is not what the scheme sends is a `DeliveryBodyError`
 * (answered 400).
 */
export type ReadDelivery =
  | { kind: "challenge"; challenge: string }
  | {
      kind: "delivery";
      deliveryId: string;
      event: string | null;
      /** GitHub's `action` (e.g. `created`): a filter may name `issue_comment.created`. */
      action?: string;
      body: unknown;
      /** Set when the delivery starts nothing whatever the filter: `ping`, or a bot's message. */
      ignore?: "ping" | "bot_message";
    };

export class DeliveryBodyError extends Error {
  override readonly name = "DeliveryBodyError";
}

/** A sender's delivery id longer than this is kept as its digest. */
const DELIVERY_ID_MAX_CHARS = 200;

const digestId = (bytes: Uint8Array) => `sha256:${bytesToHex(sha256(bytes))}`;

/** What a hook dedups a delivery on: its id, or (`body`) the digest of its bytes. */
export function dedupKeyOf(
  dedup: "delivery_id" | "body",
  delivery: { deliveryId: string },
  bytes: Uint8Array,
): string {
  return dedup === "body" ? digestId(bytes) : delivery.deliveryId;
}

/**
 * GitHub signs the body, not `X-GitHub-Event`, so a captured delivery can be relabelled. For the
 * events a hook most often filters on, the body's own top-level keys say which event it is: a
 * label the signed body contradicts is refused. Other events are taken as labelled (documented).
 */
const GITHUB_EVENT_SHAPES: Readonly<Record<string, { has: string[]; lacks?: string[] }>> = {
  ping: { has: ["zen", "hook_id"] },
  issues: { has: ["issue"], lacks: ["comment"] },
  issue_comment: { has: ["issue", "comment"] },
  pull_request: { has: ["pull_request", "number"], lacks: ["comment", "review"] },
  pull_request_review: { has: ["pull_request", "review"] },
  pull_request_review_comment: { has: ["pull_request", "comment"] },
  push: { has: ["ref", "before", "after", "commits"] },
  release: { has: ["release"] },
  discussion: { has: ["discussion"], lacks: ["comment"] },
  discussion_comment: { has: ["discussion", "comment"] },
  workflow_run: { has: ["workflow_run"] },
  check_run: { has: ["check_run"] },
  check_suite: { has: ["check_suite"] },
};

function githubEventContradicted(event: string, body: Record<string, unknown>): boolean {
  const shape = GITHUB_EVENT_SHAPES[event];
  if (!shape) return false;
  return shape.has.some((key) => !(key in body)) || (shape.lacks ?? []).some((key) => key in body);
}

function idOf(value: string): string {
  return value.length <= DELIVERY_ID_MAX_CHARS ? value : digestId(new TextEncoder().encode(value));
}

function jsonObject(text: string, what = "The body"): Record<string, unknown> {
  let value: unknown;
  try {
    value = parseJsonWithin(text);
  } catch {
    throw new DeliveryBodyError(`${what} is not JSON (or nests deeper than 64 levels).`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new DeliveryBodyError(`${what} is not a JSON object.`);
  }
  return value as Record<string, unknown>;
}

const stringAt = (value: unknown, key: string): string | undefined => {
  const field =
    value !== null && typeof value === "object" ? (value as Record<string, unknown>)[key] : null;
  return typeof field === "string" && field !== "" ? field : undefined;
};

function isForm(header: (name: string) => string | undefined): boolean {
  const type = (header("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  return type === "application/x-www-form-urlencoded";
}

/** Reads a delivery whose signature has been verified. */
export function readDelivery(
  scheme: HookScheme,
  bytes: Uint8Array,
  header: (name: string) => string | undefined,
): ReadDelivery {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new DeliveryBodyError("The body is not UTF-8.");
  }
  switch (scheme) {
    case "standard": {
      const body = jsonObject(text);
      const id = header("webhook-id") ?? "";
      return {
        kind: "delivery",
        deliveryId: idOf(id),
        event: stringAt(body, "type") ?? null,
        body,
      };
    }
    case "github":
      return readGithub(text, header);
    case "slack":
      return readSlack(text, bytes, header);
    case "stripe": {
      const body = jsonObject(text);
      const id = stringAt(body, "id");
      if (id === undefined) throw new DeliveryBodyError("A Stripe event has an `id`.");
      return {
        kind: "delivery",
        deliveryId: idOf(id),
        event: stringAt(body, "type") ?? null,
        body,
      };
    }
  }
}

function readGithub(text: string, header: (name: string) => string | undefined): ReadDelivery {
  const id = header("x-github-delivery");
  if (id === undefined || id === "") {
    throw new DeliveryBodyError("A GitHub delivery has an `X-GitHub-Delivery` header.");
  }
  let body: Record<string, unknown>;
  if (isForm(header)) {
    const payload = new URLSearchParams(text).get("payload");
    if (payload === null) throw new DeliveryBodyError("A form-encoded delivery has `payload=`.");
    body = jsonObject(payload, "`payload`");
  } else {
    body = jsonObject(text);
  }
  const event = header("x-github-event") ?? null;
  if (event !== null && githubEventContradicted(event, body)) {
    throw new DeliveryBodyError(
      `The signed body is not a \`${event}\` event, as \`X-GitHub-Event\` says it is.`,
    );
  }
  const action = stringAt(body, "action");
  return {
    kind: "delivery",
    deliveryId: idOf(id),
    event,
    ...(action === undefined ? {} : { action }),
    body,
    ...(event === "ping" ? { ignore: "ping" as const } : {}),
  };
}

/**
 * Slack sends the Events API as JSON (`url_verification`, `event_callback` with `event_id`),
 * slash commands as a form, and interactivity as a form whose `payload` is JSON. Only the Events
 * API retries; the others are keyed by `trigger_id`, or by the body's digest.
 */
function readSlack(
  text: string,
  bytes: Uint8Array,
  header: (name: string) => string | undefined,
): ReadDelivery {
  if (isForm(header)) {
    const form = new URLSearchParams(text);
    const payload = form.get("payload");
    const body = payload === null ? Object.fromEntries(form) : jsonObject(payload, "`payload`");
    const trigger = stringAt(body, "trigger_id");
    const event = payload === null ? (form.has("command") ? "slash_command" : null) : null;
    return {
      kind: "delivery",
      deliveryId: trigger === undefined ? digestId(bytes) : idOf(trigger),
      event: event ?? stringAt(body, "type") ?? null,
      body,
    };
  }
  const body = jsonObject(text);
  const type = stringAt(body, "type");
  if (type === "url_verification") {
    const challenge = stringAt(body, "challenge");
    if (challenge === undefined) throw new DeliveryBodyError("`url_verification` has a challenge.");
    return { kind: "challenge", challenge };
  }
  if (type === "event_callback") {
    const id = stringAt(body, "event_id");
    if (id === undefined) throw new DeliveryBodyError("An `event_callback` has an `event_id`.");
    const inner = body.event;
    // A message a bot posted (the agent's own, relayed back) would start a turn about itself.
    const fromBot = stringAt(inner, "bot_id") !== undefined;
    return {
      kind: "delivery",
      deliveryId: idOf(id),
      event: stringAt(inner, "type") ?? null,
      body,
      ...(fromBot ? { ignore: "bot_message" as const } : {}),
    };
  }
  const id = stringAt(body, "event_id");
  return {
    kind: "delivery",
    deliveryId: id === undefined ? digestId(bytes) : idOf(id),
    event: type ?? null,
    body,
  };
}

/**
 * Whether a delivery passes a hook's `events` filter: no filter passes everything; an entry
 * matches the event type, or for GitHub `{event}.{action}`.
 */
export function passesFilter(
  events: readonly string[] | null,
  delivery: { event: string | null; action?: string },
): boolean {
  if (events === null) return true;
  if (delivery.event === null) return false;
  const names = [delivery.event];
  if (delivery.action !== undefined) names.push(`${delivery.event}.${delivery.action}`);
  return names.some((name) => events.includes(name));
}
