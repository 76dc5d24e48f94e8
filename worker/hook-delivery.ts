/**
 * `POST /hooks/{tenant}/{hook}.{tag}` (design §12): a sender's delivery, with no API key. The
 * URL's tag is checked first, so a forged URL addresses no object (design §18 invariant 20). The
 * hook's configuration comes from the isolate's cache (or, once per 30 s, the tenant's object:
 * never a global one); the signature is verified over the exact bytes; the delivery is read as
 * its scheme sends it, filtered, mapped to a thread and an input by the hook's templates, and
 * handed to the thread, which makes it durable with its turn queued before this answers 202.
 */
import type { Context } from "hono";
import { tenantStubIn } from "../durable-objects/index.ts";
import {
  type AcceptDeliveryRequest,
  type DeliveryResource,
  hookDedupOf,
  type Jurisdiction,
  parseHookPath,
  type RpcFailure,
  type TenantCaller,
  type TenantHome,
} from "../shared/api/index.ts";
import { describeError } from "../shared/observability/index.ts";
import { uuidv7 } from "../shared/uuid/index.ts";
import {
  DeliveryBodyError,
  dedupKeyOf,
  parseTemplate,
  passesFilter,
  type ReadDelivery,
  readDelivery,
  renderTemplate,
  safeThreadId,
  verifySignature,
} from "../shared/webhooks/index.ts";
import type { AppEnv } from "./app-env.ts";
import { requireIdTags } from "./auth.ts";
import { ApiError, unwrap } from "./errors.ts";
import { type CachedHook, type HookCache, hookCacheKey, RECHECK_AFTER_MS } from "./hook-cache.ts";
import { traceOf } from "./observability.ts";
import type { ThreadStubFactory } from "./thread-stub.ts";
import { brokenBody } from "./validate.ts";

const UNKNOWN_HOOK = () => new ApiError("not_found", "No such hook.");

interface Place {
  tenant: string;
  jurisdiction: Jurisdiction;
  hookId: string;
  key: string;
}

/** The hook, from the isolate's cache or else its tenant's object; undefined when there is none. */
async function hookOf(
  c: Context<AppEnv>,
  place: Place,
  cache: HookCache,
  fresh = false,
): Promise<CachedHook | undefined> {
  const cached = fresh ? undefined : cache.get(place.key);
  if (cached) return cached;
  const askedAt = cache.now();
  const answer = await tenantStubIn(c.env, place.jurisdiction, place.tenant).hookTarget(
    place.hookId,
  );
  if (!answer.ok && answer.error.code === "not_found") {
    cache.forget(place.key);
    return undefined;
  }
  return cache.set(place.key, unwrap(answer), askedAt);
}

/** Runs `work` after the answer (a log entry), never failing the request. */
function background(c: Context<AppEnv>, work: Promise<unknown>): void {
  const quiet = work.catch((err: unknown) =>
    c.var.log.warn("hook.log_failed", { error: describeError(err) }),
  );
  try {
    c.executionCtx.waitUntil(quiet);
  } catch {
    // No execution context (a unit test's app): the promise still runs.
  }
}

export async function deliverHook(
  c: Context<AppEnv>,
  param: { tenant: string; hook: string },
  cache: HookCache,
  threadStub: ThreadStubFactory,
): Promise<Response> {
  const address = parseHookPath(param);
  if (!address) throw UNKNOWN_HOOK();
  const { jurisdiction, tenant, hookId, tag } = address;
  c.set("log", c.var.log.with({ tenant, hook: hookId }));
  // A wrong tag is an unknown hook: nothing is read or addressed for it.
  if (!requireIdTags(c.env).hookTagValid(jurisdiction, tenant, hookId, tag)) throw UNKNOWN_HOOK();
  const place: Place = {
    jurisdiction,
    tenant,
    hookId,
    key: hookCacheKey(jurisdiction, tenant, hookId),
  };
  let body: Uint8Array;
  try {
    body = new Uint8Array(await c.req.arrayBuffer());
  } catch (cause) {
    throw brokenBody(cause);
  }
  let hook = await hookOf(c, place, cache);
  if (!hook) throw UNKNOWN_HOOK();
  const signed = { body, header: (name: string) => c.req.header(name), nowMs: Date.now() };
  let verified = await verifySignature(hook.target.hook.verify.scheme, hook.target.secrets, signed);
  if (!verified && cache.now() - hook.fetchedAt >= RECHECK_AFTER_MS) {
    // A secret rotated through another isolate: read the hook once more.
    hook = await hookOf(c, place, cache, true);
    if (!hook) throw UNKNOWN_HOOK();
    verified = await verifySignature(hook.target.hook.verify.scheme, hook.target.secrets, signed);
  }
  if (!verified) {
    throw new ApiError("invalid_signature", "The delivery's signature is missing, wrong or stale.");
  }
  return accept(c, place, hook, body, cache, threadStub);
}

/** A verified delivery: read, filtered, mapped and handed to its thread. */
async function accept(
  c: Context<AppEnv>,
  place: Place,
  { target, fetchedAt }: CachedHook,
  bytes: Uint8Array,
  cache: HookCache,
  threadStub: ThreadStubFactory,
): Promise<Response> {
  const { hook } = target;
  const tenant = tenantStubIn(c.env, place.jurisdiction, place.tenant);
  // The incarnation the hook was read in: a tenant id created again since refuses it below.
  const incarnation = target.policy?.incarnation ?? null;
  const caller: TenantCaller = { incarnation };
  const home: TenantHome = { tenant: place.tenant, jurisdiction: place.jurisdiction, incarnation };
  const entry: DeliveryResource = {
    object: "delivery",
    id: `dlv_${uuidv7().replaceAll("-", "")}`,
    hook_id: hook.id,
    thread_id: null,
    status: "rejected",
    delivery_id: null,
    event: null,
    received_at: new Date().toISOString(),
    duplicate_of: null,
    turn_id: null,
    turn_status: null,
    error: null,
  };
  const log = (delivery: DeliveryResource & { status: "ignored" | "rejected" }) =>
    background(c, tenant.logDelivery(caller, { delivery }));
  const reject = (failure: RpcFailure, at: DeliveryResource = entry): never => {
    log({ ...at, status: "rejected", error: { code: failure.code, message: failure.detail } });
    return unwrap({ ok: false, error: failure });
  };
  let read: ReadDelivery;
  try {
    read = readDelivery(hook.verify.scheme, bytes, (name) => c.req.header(name));
  } catch (err) {
    if (!(err instanceof DeliveryBodyError)) throw err;
    return reject({ code: "invalid_request", detail: err.message });
  }
  if (read.kind === "challenge") return c.json({ challenge: read.challenge });
  const seen: DeliveryResource = { ...entry, delivery_id: read.deliveryId, event: read.event };
  if (read.ignore !== undefined || !passesFilter(hook.events, read)) {
    const ignored = { ...seen, status: "ignored" as const };
    log(ignored);
    return c.json(ignored, 202);
  }
  const scope = { body: read.body, headers: c.req.header() };
  const rendered = renderTemplate(parseTemplate(hook.thread), scope, true);
  const candidate = rendered.text === undefined ? undefined : safeThreadId(rendered.text);
  if (candidate === undefined) {
    const detail = rendered.missing
      ? `The hook's thread template reads ${rendered.missing}, which this delivery lacks.`
      : "The hook's thread template gave an empty thread id for this delivery.";
    return reject({ code: "invalid_request", detail });
  }
  const text =
    hook.input === null
      ? `${read.event ?? "webhook"}\n\n${JSON.stringify(read.body)}`
      : (renderTemplate(parseTemplate(hook.input), scope).text ?? "");
  // Dedup per hook, before the thread is settled: a copy goes where its first copy went, so a
  // template reading what the signature does not cover cannot split one delivery into many.
  const dedupKey = dedupKeyOf(hookDedupOf(hook), read, bytes);
  const claim = await tenant.claimDelivery(caller, {
    hookId: hook.id,
    key: dedupKey,
    threadId: candidate,
  });
  if (!claim.ok && claim.error.code === "not_found") {
    cache.forget(place.key);
    throw UNKNOWN_HOOK();
  }
  const { threadId } = unwrap(claim);
  c.set("log", c.var.log.with({ thread: threadId }));
  const stub = threadStub(c.env, home, threadId);
  const answer = await stub.acceptDelivery(
    {
      tenant: place.tenant,
      delivery: { ...seen, thread_id: threadId },
      dedupKey,
      content: [{ type: "input_text", text }],
      onBusy: hook.on_busy,
      // Validated as a thread configuration when the hook was created.
      threadConfig: hook.thread_config as AcceptDeliveryRequest["threadConfig"],
      ...(target.policy ? { policy: target.policy } : {}),
      webhooks: { subscriptions: target.webhooks, at: fetchedAt },
    },
    traceOf(c),
  );
  if (!answer.ok) return reject(answer.error, { ...seen, thread_id: threadId });
  const { delivery, duplicate } = answer.value;
  return c.json(delivery, duplicate ? 200 : 202);
}
