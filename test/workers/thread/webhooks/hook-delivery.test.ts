/**
 * Inbound hooks (design §12, §15 invariant 11) through the running service: `POST /hooks/{tenant}
 * /{hook}` with each scheme's signature, the 202 before the turn runs, exactly one turn per
 * accepted delivery (also when the object dies right after the 202), none for a duplicate, the
 * refusals (401, 400, 413, 404), the filter, the templates, `on_busy`, and the delivery log with
 * each turn's outcome (`durable-objects/thread/webhooks/hook-intake.ts`, `worker/hook-delivery.ts`).
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DEDUP_WINDOW_MS } from "../../../../shared/webhooks/index.ts";
import { api, json, post, threadStub, untilRunning } from "../../helpers/api.ts";
import {
  bodyOf,
  createHook,
  deliver,
  expectedHookUrl,
  type Scheme,
  signedDelivery,
  signedHeaders,
} from "../../helpers/hooks.ts";
import { tenantWithKey } from "../../helpers/tenancy.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

interface Delivery {
  object: "delivery";
  id: string;
  hook_id: string;
  thread_id: string | null;
  status: string;
  delivery_id: string | null;
  event: string | null;
  received_at: string;
  duplicate_of: string | null;
  turn_id: string | null;
  turn_status: string | null;
  error: { code: string; message: string } | null;
}

interface Turn {
  id: string;
  status: string;
  items: { type: string; role?: string; content?: { text?: string }[] }[];
  error: { code: string } | null;
}

const SCHEMES: Scheme[] = ["standard", "github", "slack", "stripe"];
/** The event each scheme's test body names (see `bodyOf`). */
const EVENTS: Record<Scheme, string> = {
  standard: "order.created",
  github: "issue_comment",
  slack: "app_mention",
  stripe: "invoice.paid",
};

const tag = () => crypto.randomUUID().slice(0, 8);

/** Waits until the turn has ended (its queued start is the alarm's or the drain's). */
async function endedTurn(threadId: string, turnId: string): Promise<Turn> {
  let turn: Turn | undefined;
  await vi.waitUntil(
    async () => {
      const res = await api("GET", `/v1/threads/${threadId}/turns/${turnId}`);
      if (res.status !== 200) return false;
      turn = (await res.json()) as Turn;
      return turn.status !== "in_progress";
    },
    { timeout: 5_000, interval: 10 },
  );
  return turn as Turn;
}

async function thread(threadId: string) {
  return json<{ turn_count: number; config: { model: string }; metadata: Record<string, string> }>(
    await api("GET", `/v1/threads/${threadId}`),
  );
}

/** The hook's log, once `done` says it has caught up (pushes follow within about a second). */
async function logOf(hookId: string, done: (log: Delivery[]) => boolean): Promise<Delivery[]> {
  let log: Delivery[] = [];
  await vi.waitUntil(
    async () => {
      log = (await json<{ data: Delivery[] }>(await api("GET", `/v1/hooks/${hookId}/deliveries`)))
        .data;
      return done(log);
    },
    { timeout: 8_000, interval: 50 },
  );
  return log;
}

const userText = (turn: Turn) =>
  turn.items.find((i) => i.role === "user" && !i.content?.[0]?.text?.startsWith("<"))?.content?.[0]
    ?.text;

describe.each(SCHEMES)("a signed %s delivery", (scheme) => {
  it("is answered 202 before its turn runs, and becomes exactly one turn with the default input", async () => {
    const hook = await createHook(scheme);
    const threadId = `hook-${tag()}`;
    const id = `d-${tag()}`;
    const res = await signedDelivery(hook, { thread: threadId.slice(5) }, id);
    const accepted = await json<Delivery>(res, 202);
    expect(accepted).toEqual({
      object: "delivery",
      id: expect.stringMatching(/^dlv_[0-9a-f]{32}$/),
      hook_id: hook.id,
      thread_id: threadId,
      status: "accepted",
      delivery_id: id,
      event: EVENTS[scheme],
      received_at: expect.any(String),
      duplicate_of: null,
      turn_id: expect.stringMatching(/^turn_/),
      turn_status: "in_progress",
      error: null,
    });
    const turn = await endedTurn(threadId, accepted.turn_id ?? "");
    expect(turn.status).toBe("completed");
    const body = bodyOf(scheme, { thread: threadId.slice(5) }, id);
    expect(userText(turn)).toBe(`${EVENTS[scheme]}\n\n${JSON.stringify(JSON.parse(body))}`);
    expect((await thread(threadId)).turn_count).toBe(1);
  });

  it("sent again with the same delivery id is answered 200 with the first delivery, and starts nothing", async () => {
    const hook = await createHook(scheme);
    const name = tag();
    const id = `d-${tag()}`;
    const first = await json<Delivery>(await signedDelivery(hook, { thread: name }, id), 202);
    await endedTurn(first.thread_id ?? "", first.turn_id ?? "");
    const again = await json<Delivery>(await signedDelivery(hook, { thread: name }, id), 200);
    expect(again).toEqual({ ...first, turn_status: "completed" });
    const other = await json<Delivery>(await signedDelivery(hook, { thread: name }), 202);
    await endedTurn(other.thread_id ?? "", other.turn_id ?? "");
    expect((await thread(first.thread_id ?? "")).turn_count).toBe(2);
    const log = await logOf(hook.id, (entries) => entries.length === 3);
    // Newest first.
    expect(log.map((e) => [e.id, e.status, e.duplicate_of, e.turn_id])).toEqual([
      [other.id, "accepted", null, other.turn_id],
      [expect.any(String), "duplicate", first.id, first.turn_id],
      [first.id, "accepted", null, first.turn_id],
    ]);
  });
});

describe("the dedup window", () => {
  it("a delivery id is recognized for 72 hours: a redelivery just inside starts nothing, one after starts a turn", async () => {
    const hook = await createHook("github");
    const name = tag();
    const id = `d-${tag()}`;
    const start = Date.now();
    const first = await json<Delivery>(await signedDelivery(hook, { thread: name }, id), 202);
    await endedTurn(first.thread_id ?? "", first.turn_id ?? "");
    vi.useFakeTimers({ toFake: ["Date"], now: start + DEDUP_WINDOW_MS - 60_000 });
    const inside = await json<Delivery>(await signedDelivery(hook, { thread: name }, id), 200);
    expect(inside.id).toBe(first.id);
    vi.setSystemTime(start + DEDUP_WINDOW_MS + 60_000);
    const after = await json<Delivery>(await signedDelivery(hook, { thread: name }, id), 202);
    expect(after.id).not.toBe(first.id);
    expect(after.turn_id).not.toBe(first.turn_id);
    vi.useRealTimers();
    await endedTurn(after.thread_id ?? "", after.turn_id ?? "");
    expect((await thread(first.thread_id ?? "")).turn_count).toBe(2);
  });
});

describe("what a hook refuses, recording nothing", () => {
  it.each(SCHEMES)(
    "%s: a wrong, missing or stale signature is 401 invalid_signature",
    async (scheme) => {
      const hook = await createHook(scheme);
      const name = tag();
      const body = bodyOf(scheme, { thread: name }, `d-${tag()}`);
      const wrong = signedHeaders(
        scheme,
        scheme === "standard" ? "whsec_d3JvbmcgYnV0IGxvbmcgZW5vdWdoIHNlY3JldA==" : "wrong",
        body,
      );
      const stale = signedHeaders(scheme, hook.secret, body, {
        timestamp: Math.floor(Date.now() / 1000) - 301,
      });
      const answers = [
        await deliver(hook.url, body, wrong),
        await deliver(hook.url, body, { "content-type": "application/json" }),
        // GitHub signs no timestamp: a stale one does not exist there.
        ...(scheme === "github" ? [] : [await deliver(hook.url, body, stale)]),
      ];
      for (const res of answers) {
        expect({ status: res.status, code: ((await res.json()) as { code: string }).code }).toEqual(
          {
            status: 401,
            code: "invalid_signature",
          },
        );
      }
      expect((await api("GET", `/v1/threads/hook-${name}`)).status).toBe(404);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(
        (await json<{ data: unknown[] }>(await api("GET", `/v1/hooks/${hook.id}/deliveries`))).data,
      ).toEqual([]);
    },
  );

  it("a signed body that is not what the scheme sends is 400, logged as rejected", async () => {
    const hook = await createHook("standard");
    const res = await deliver(
      hook.url,
      "not json",
      signedHeaders("standard", hook.secret, "not json"),
    );
    expect(res.status).toBe(400);
    const log = await logOf(hook.id, (entries) => entries.length === 1);
    expect(log.map((e) => [e.status, e.error?.code, e.thread_id])).toEqual([
      ["rejected", "invalid_request", null],
    ]);
  });

  it("a body over 1 MiB is 413; an unknown hook, tenant, tag or malformed id is 404", async () => {
    const hook = await createHook("github");
    const big = JSON.stringify({ thread: "x", pad: "x".repeat(1024 * 1024) });
    const tooBig = await deliver(hook.url, big, signedHeaders("github", hook.secret, big));
    expect(tooBig.status).toBe(413);
    const body = JSON.stringify({ thread: "x" });
    const headers = signedHeaders("github", hook.secret, body);
    const { origin: base, pathname } = new URL(hook.url);
    const segment = pathname.split("/").at(-1) ?? "";
    const tag = segment.slice(hook.id.length + 1);
    const otherTag = `${tag.slice(0, -1)}${tag.endsWith("0") ? "1" : "0"}`;
    for (const path of [
      "/hooks/local/hook_nope",
      new URL(expectedHookUrl(null, "local", "hook_nope")).pathname,
      `/hooks/local/${hook.id}`,
      `/hooks/local/${hook.id}.${otherTag}`,
      `/hooks/local/${hook.id}.${tag}0`,
      `/hooks/local/${hook.id}.${"z".repeat(32)}`,
      `/hooks/nobody/${segment}`,
      `/hooks/eu.local/${segment}`,
      `/hooks/xx.local/${segment}`,
      "/hooks/local/bad%20id",
    ]) {
      const res = await deliver(`${base}${path}`, body, headers);
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
    }
  });
});

describe("reading, filtering and mapping deliveries", () => {
  it("Slack's url_verification is answered with its challenge once signed, and starts nothing", async () => {
    const hook = await createHook("slack");
    const body = JSON.stringify({ type: "url_verification", challenge: "ch-1", token: "t" });
    const res = await deliver(hook.url, body, signedHeaders("slack", hook.secret, body));
    expect(await json(res)).toEqual({ challenge: "ch-1" });
    const unsigned = await deliver(hook.url, body, { "content-type": "application/json" });
    expect(unsigned.status).toBe(401);
    // The challenge left nothing: the hook's log shows only the event delivered after it.
    const event = await signedDelivery(hook, { thread: tag() });
    const accepted = await json<Delivery>(event, 202);
    const log = await logOf(hook.id, (entries) => entries.length > 0);
    expect(log.map((e) => e.id)).toEqual([accepted.id]);
  });

  it("a delivery the events filter leaves out, and GitHub's ping, are 202 ignored", async () => {
    const hook = await createHook("github", { events: ["issues.opened", "push"] });
    const name = tag();
    // Each body has the keys GitHub's payload of that event has (a contradicting label is a 400).
    const shapes: Record<string, Record<string, unknown>> = {
      issue_comment: { issue: { number: 1 }, comment: { id: 1 } },
      ping: { zen: "Design for failure.", hook_id: 1 },
      issues: { issue: { number: 1 } },
    };
    const send = (event: string, action?: string) => {
      const body = JSON.stringify({
        thread: name,
        ...shapes[event],
        ...(action ? { action } : {}),
      });
      return deliver(hook.url, body, signedHeaders("github", hook.secret, body, { event }));
    };
    const comment = await json<Delivery>(await send("issue_comment", "created"), 202);
    expect([comment.status, comment.thread_id, comment.turn_id]).toEqual(["ignored", null, null]);
    expect((await json<Delivery>(await send("ping"), 202)).status).toBe("ignored");
    const opened = await json<Delivery>(await send("issues", "opened"), 202);
    expect(opened.status).toBe("accepted");
    expect((await json<Delivery>(await send("issues", "closed"), 202)).status).toBe("ignored");
    await endedTurn(opened.thread_id ?? "", opened.turn_id ?? "");
    expect((await thread(`hook-${name}`)).turn_count).toBe(1);
    const log = await logOf(hook.id, (entries) => entries.length === 4);
    expect(log.map((e) => e.status).sort()).toEqual(["accepted", "ignored", "ignored", "ignored"]);
  });

  it("the thread and input templates read the body and headers; the thread is created from thread_config", async () => {
    const hook = await createHook("github", {
      thread: "gh-{{body.repository.full_name}}-{{body.issue.number}}",
      input: "{{headers.x-github-event}} on #{{body.issue.number}}: {{body.comment.body}}",
      thread_config: { model: "spindle-local-lite", metadata: { source: "github" } },
    });
    const repo = `octo/${tag()}`;
    const body = JSON.stringify({
      repository: { full_name: repo },
      issue: { number: 7 },
      comment: { body: "please fix" },
    });
    const accepted = await json<Delivery>(
      await deliver(hook.url, body, signedHeaders("github", hook.secret, body)),
      202,
    );
    const threadId = `gh-${repo.replace("/", "_")}-7`;
    expect(accepted.thread_id).toBe(threadId);
    const turn = await endedTurn(threadId, accepted.turn_id ?? "");
    expect(userText(turn)).toBe("issue_comment on #7: please fix");
    const created = await thread(threadId);
    expect([created.config.model, created.metadata]).toEqual([
      "spindle-local-lite",
      { source: "github" },
    ]);
  });

  it("a thread template whose field the delivery lacks is 400, logged as rejected", async () => {
    const hook = await createHook("stripe", { thread: "cus-{{body.data.object.customer}}" });
    const res = await signedDelivery(hook, {});
    expect(res.status).toBe(400);
    expect(((await res.json()) as { detail: string }).detail).toBe(
      "The hook's thread template reads {{body.data.object.customer}}, which this delivery lacks.",
    );
    const log = await logOf(hook.id, (entries) => entries.length === 1);
    expect(log[0]?.status).toBe("rejected");
  });

  it("a delivery whose thread cannot be created (an unknown model) is rejected with the create's code", async () => {
    const hook = await createHook("github", { thread_config: { model: "no-such-model" } });
    const res = await signedDelivery(hook, { thread: tag() });
    expect(((await res.json()) as { code: string }).code).toBe("unknown_model");
    const log = await logOf(hook.id, (entries) => entries.length === 1);
    expect(log.map((e) => [e.status, e.error?.code])).toEqual([["rejected", "unknown_model"]]);
  });

  it("a delivery a quota refuses is the same 429 problem as the API's, naming the quota", async () => {
    const { key } = await tenantWithKey({ quotas: { max_threads: 1 } });
    await json(await api("POST", "/v1/threads", {}, key), 201);
    const hook = await createHook("github", {}, key);
    const res = await signedDelivery(hook, { thread: tag() });
    expect(res.status).toBe(429);
    expect(await res.json()).toMatchObject({ code: "quota_exceeded", quota: "max_threads" });
  });
});

/** A thread busy with a slow turn, and that turn's request (in an object: it is not awaited). */
async function busyThread(threadId: string): Promise<{ slow: Promise<Response> }> {
  await json(await post("/v1/threads", { id: threadId }), 201);
  const slow = post(`/v1/threads/${threadId}/turns`, { input: "/slow 150 take your time" });
  await untilRunning(threadId);
  return { slow };
}

describe("on_busy, when the thread is running a turn", () => {
  it("queue (the default): the delivery's turn runs after the running one", async () => {
    const hook = await createHook("github");
    const name = tag();
    const { slow } = await busyThread(`hook-${name}`);
    const accepted = await json<Delivery>(await signedDelivery(hook, { thread: name }), 202);
    const first = await json<Turn>(await slow);
    expect(first.status).toBe("completed");
    expect((await endedTurn(`hook-${name}`, accepted.turn_id ?? "")).status).toBe("completed");
  });

  it("reject: 409 thread_busy, nothing recorded, so the sender's retry is accepted later", async () => {
    const hook = await createHook("github", { on_busy: "reject" });
    const name = tag();
    const { slow } = await busyThread(`hook-${name}`);
    const id = `d-${tag()}`;
    const refused = await signedDelivery(hook, { thread: name }, id);
    expect(((await refused.json()) as { code: string }).code).toBe("thread_busy");
    await slow;
    const retried = await json<Delivery>(await signedDelivery(hook, { thread: name }, id), 202);
    expect(retried.status).toBe("accepted");
    await endedTurn(`hook-${name}`, retried.turn_id ?? "");
  });

  it("interrupt: the running turn ends interrupted, then the delivery's turn runs", async () => {
    const hook = await createHook("github", { on_busy: "interrupt" });
    const name = tag();
    const { slow } = await busyThread(`hook-${name}`);
    const accepted = await json<Delivery>(await signedDelivery(hook, { thread: name }), 202);
    expect((await json<Turn>(await slow)).status).toBe("interrupted");
    expect((await endedTurn(`hook-${name}`, accepted.turn_id ?? "")).status).toBe("completed");
  });
});

/** Resets the object as if its instance died: memory gone, storage kept. */
async function abortObject(threadId: string): Promise<void> {
  await runInDurableObject(threadStub(threadId), (_instance, state) => {
    state.abort("the instance is lost");
  }).catch(() => undefined);
}

describe("invariant 11: an accepted delivery becomes exactly one turn", () => {
  it("even when the object dies right after the 202, with its turn still queued", async () => {
    const hook = await createHook("standard");
    const name = tag();
    const threadId = `hook-${name}`;
    const { slow } = await busyThread(threadId);
    const accepted = await json<Delivery>(await signedDelivery(hook, { thread: name }), 202);
    await abortObject(threadId);
    await slow.catch(() => undefined);
    // No request comes: the alarm the acceptance set wakes a new instance, which runs the turn.
    await runDurableObjectAlarm(threadStub(threadId));
    const turn = await endedTurn(threadId, accepted.turn_id ?? "");
    expect(turn.status).toBe("completed");
    const rows = await runInDurableObject(threadStub(threadId), (_i, state) =>
      state.storage.sql
        .exec("SELECT turn_id FROM spindle_turns WHERE ordinal > 0")
        .toArray()
        .map((row) => row.turn_id),
    );
    expect(rows.filter((id) => id === accepted.turn_id)).toHaveLength(1);
    expect((await thread(threadId)).turn_count).toBe(2);
  });

  it("even when the object dies right after the 202 of a delivery that created the thread", async () => {
    const hook = await createHook("github");
    const name = tag();
    const threadId = `hook-${name}`;
    const id = `d-${tag()}`;
    const accepted = await json<Delivery>(await signedDelivery(hook, { thread: name }, id), 202);
    await abortObject(threadId);
    await runDurableObjectAlarm(threadStub(threadId));
    const turn = await endedTurn(threadId, accepted.turn_id ?? "");
    // Cut short if it had started before the instance died; never run twice.
    expect(["completed", "interrupted"]).toContain(turn.status);
    expect((await thread(threadId)).turn_count).toBe(1);
    expect((await signedDelivery(hook, { thread: name }, id)).status).toBe(200);
    expect((await thread(threadId)).turn_count).toBe(1);
  });
});

describe("a duplicate after the thread was deleted", () => {
  it("starts nothing and creates no thread: the dedup records outlive the thread", async () => {
    const hook = await createHook("stripe");
    const name = tag();
    const id = `evt_${tag()}`;
    const first = await json<Delivery>(await signedDelivery(hook, { thread: name }, id), 202);
    await endedTurn(`hook-${name}`, first.turn_id ?? "");
    expect((await api("DELETE", `/v1/threads/hook-${name}`)).status).toBe(204);
    const again = await json<Delivery>(await signedDelivery(hook, { thread: name }, id), 200);
    expect(again.id).toBe(first.id);
    expect((await api("GET", `/v1/threads/hook-${name}`)).status).toBe(404);
  });
});

describe("the delivery log", () => {
  it("shows each accepted delivery with its turn and how that turn ended, failed ones with the error", async () => {
    const hook = await createHook("github", { thread_config: { model: "gpt-test" } });
    vi.spyOn(globalThis, "fetch").mockImplementation(async () => {
      return new Response(JSON.stringify({ error: { message: "bad request" } }), { status: 400 });
    });
    const name = tag();
    const accepted = await json<Delivery>(await signedDelivery(hook, { thread: name }), 202);
    const turn = await endedTurn(`hook-${name}`, accepted.turn_id ?? "");
    expect(turn.error?.code).toBe("provider_error");
    const log = await logOf(hook.id, (entries) => entries[0]?.turn_status === "failed");
    expect(log).toEqual([
      {
        ...accepted,
        turn_status: "failed",
        error: { code: "provider_error", message: expect.any(String) },
      },
    ]);
  });

  it("reaches the tenant even when the thread's pushes fail: the alarm repairs them", async () => {
    const hook = await createHook("github");
    const name = tag();
    const threadId = `hook-${name}`;
    // The tenant's object refuses every push until the spy goes; it answers all else.
    const getByName = env.TENANT.getByName.bind(env.TENANT);
    vi.spyOn(env.TENANT, "getByName").mockImplementation((tenantName) => {
      const real = getByName(tenantName) as unknown as Record<string, (...a: unknown[]) => unknown>;
      return new Proxy(real, {
        get: (target, prop) =>
          prop === "then"
            ? undefined
            : prop === "sync"
              ? async () => {
                  throw new Error("the tenant's object is unreachable");
                }
              : (...args: unknown[]) => target[prop as string]?.(...args),
      }) as never;
    });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const accepted = await json<Delivery>(await signedDelivery(hook, { thread: name }), 202);
    await endedTurn(threadId, accepted.turn_id ?? "");
    expect(warn).toHaveBeenCalled();
    vi.restoreAllMocks();
    await runDurableObjectAlarm(threadStub(threadId));
    const log = await logOf(hook.id, (entries) => entries[0]?.turn_status === "completed");
    expect(log.map((e) => [e.id, e.status, e.turn_id, e.turn_status])).toEqual([
      [accepted.id, "accepted", accepted.turn_id, "completed"],
    ]);
  });
});
