import { exports } from "cloudflare:workers";
import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { DEV_ID_SECRET } from "../../../durable-objects/tenant/id-tags.ts";
import { api, BASE, DEV_KEY, json } from "./api.ts";

export type Scheme = "standard" | "github" | "slack" | "stripe";

export interface CreatedHook {
  id: string;
  url: string;
  secret?: string;
  verify: { scheme: Scheme };
}

/** The secrets Slack and Stripe would have issued (the service generates none for them). */
export const ISSUED_SECRETS: Record<"slack" | "stripe", string> = {
  slack: "8f742231b10e8888abcd99yyyzzz85a5",
  stripe: "whsec_stripe_test_secret",
};

/** A hook of the local tenant (or `key`'s) with `scheme`, and the secret its sender signs with. */
export async function createHook(
  scheme: Scheme,
  body: Record<string, unknown> = {},
  key = DEV_KEY,
): Promise<CreatedHook & { secret: string }> {
  const issued = scheme === "slack" || scheme === "stripe" ? ISSUED_SECRETS[scheme] : undefined;
  const hook = await json<CreatedHook>(
    await api(
      "POST",
      "/v1/hooks",
      { thread: "hook-{{body.thread}}", ...body, verify: { scheme, secret: issued } },
      key,
    ),
    201,
  );
  return { ...hook, secret: issued ?? hook.secret ?? "" };
}

const hex = (secret: string, data: string) =>
  createHmac("sha256", secret).update(data).digest("hex");

/**
 * The URL the service gives `tenant`'s hook `hookId`, its tag made here with Node's HMAC under
 * the development secret the suites run with (`durable-objects/tenant/id-tags.ts`).
 */
export function expectedHookUrl(jurisdiction: "eu" | null, tenant: string, hookId: string) {
  const tag = hex(DEV_ID_SECRET, `hook.${jurisdiction ?? "g"}.${tenant}.${hookId}`).slice(0, 32);
  return `${BASE}/hooks/${jurisdiction === null ? "" : `${jurisdiction}.`}${tenant}/${hookId}.${tag}`;
}

export interface SignOptions {
  /** The sender's delivery id (header or body, as the scheme puts it). */
  id?: string;
  /** The event type (GitHub's header; in the body for the others, set by the caller). */
  event?: string;
  /** Unix seconds of the signature (default: now). */
  timestamp?: number;
}

/** The headers a sender of `scheme` signs `body` with (Node's HMAC, not the service's). */
export function signedHeaders(
  scheme: Scheme,
  secret: string,
  body: string,
  options: SignOptions = {},
): Record<string, string> {
  const t = options.timestamp ?? Math.floor(Date.now() / 1000);
  const id = options.id ?? `id-${crypto.randomUUID()}`;
  const json = { "content-type": "application/json" };
  switch (scheme) {
    case "standard":
      return {
        ...json,
        "webhook-id": id,
        "webhook-timestamp": String(t),
        "webhook-signature": new Webhook(secret).sign(id, new Date(t * 1000), body),
      };
    case "github":
      return {
        ...json,
        "x-github-delivery": id,
        "x-github-event": options.event ?? "issue_comment",
        "x-hub-signature-256": `sha256=${hex(secret, body)}`,
      };
    case "slack":
      return {
        ...json,
        "x-slack-request-timestamp": String(t),
        "x-slack-signature": `v0=${hex(secret, `v0:${t}:${body}`)}`,
      };
    case "stripe":
      return { ...json, "stripe-signature": `t=${t},v1=${hex(secret, `${t}.${body}`)}` };
  }
}

/** A body of `scheme` carrying the sender's id where the scheme puts it in the body. */
export function bodyOf(scheme: Scheme, fields: Record<string, unknown>, id: string): string {
  switch (scheme) {
    case "slack":
      return JSON.stringify({
        type: "event_callback",
        event_id: id,
        event: { type: "app_mention" },
        ...fields,
      });
    case "stripe":
      return JSON.stringify({ id, type: "invoice.paid", ...fields });
    case "standard":
      return JSON.stringify({ type: "order.created", ...fields });
    case "github":
      // An issue_comment body (what the default event header says), told apart by its comment.
      return JSON.stringify({
        action: "created",
        issue: { number: 1 },
        comment: { node_id: id },
        ...fields,
      });
  }
}

/** Posts a delivery to a hook's URL, with no API key. */
export async function deliver(
  url: string,
  body: string | Uint8Array,
  headers: Record<string, string>,
): Promise<Response> {
  return exports.default.fetch(url, { method: "POST", headers, body });
}

/** A signed delivery of `fields` to `hook` with the sender id `id`. */
export async function signedDelivery(
  hook: CreatedHook & { secret: string },
  fields: Record<string, unknown>,
  id = `id-${crypto.randomUUID()}`,
  options: Omit<SignOptions, "id"> = {},
): Promise<Response> {
  const body = bodyOf(hook.verify.scheme, fields, id);
  return deliver(
    hook.url,
    body,
    signedHeaders(hook.verify.scheme, hook.secret, body, { ...options, id }),
  );
}
