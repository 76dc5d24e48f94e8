import { createHmac } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, eventually, text } from "./local-worker.ts";
import { persistedWorker } from "./persisted-worker.ts";

/**
 * Webhooks over real sockets (design §12): the worker as `npm start` runs it (wrangler's local
 * runtime, its queue and consumer), and a receiver on 127.0.0.1 that fails some first attempts
 * and lets others time out. Turns complete, pause for a client tool, fail (a provider stand-in
 * on the same server answers 400) and are interrupted; a signed hook delivery starts one. Every
 * request the receiver gets is verified with the `standardwebhooks` package, and each event is
 * delivered exactly once as the endpoint's record shows (at least once on the wire, with one
 * `webhook-id` for all its attempts).
 */

interface Arrival {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  answered: number | "timeout";
}

const arrivals: Arrival[] = [];
let server: Server | undefined;
let receiverUrl = "";
/** The order in which each webhook-id first arrived. */
const firstSeen = new Map<string, number>();

/** How the receiver treats attempt `attempt` of the `order`-th event: fail, stall, or take it. */
function answerFor(order: number, attempt: number): number | "timeout" {
  if (attempt > 1) return 200;
  if (order % 3 === 0) return 500;
  if (order % 3 === 1) return "timeout";
  return 204;
}

async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

beforeAll(async () => {
  server = createServer((req, res) => {
    void (async () => {
      const body = await bodyOf(req);
      if (req.url?.startsWith("/v1/responses")) {
        // The openai provider's stand-in: every request is refused, so the turn fails.
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "refused by the stand-in" } }));
        return;
      }
      const id = String(req.headers["webhook-id"]);
      if (!firstSeen.has(id)) firstSeen.set(id, firstSeen.size);
      const attempt = arrivals.filter((a) => a.id === id).length + 1;
      const answered = answerFor(firstSeen.get(id) ?? 0, attempt);
      arrivals.push({
        id,
        timestamp: String(req.headers["webhook-timestamp"]),
        signature: String(req.headers["webhook-signature"]),
        body,
        answered,
      });
      if (answered === "timeout") {
        setTimeout(() => res.end("late"), 2_500);
        return;
      }
      res.writeHead(answered);
      res.end();
    })();
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
});

const { base } = persistedWorker("spindle-e2e-webhooks-", () => ({
  // Retries at once (the schedule compressed) and attempts bounded to 1 s: the run stays short.
  SPINDLE_WEBHOOK_RETRY_SCALE: "0",
  SPINDLE_WEBHOOK_TIMEOUT_MS: "1000",
  OPENAI_BASE_URL: `${receiverUrl}/v1`,
  OPENAI_API_KEY: "sk-e2e",
  SPINDLE_OPENAI_MODELS: JSON.stringify([{ slug: "gpt-e2e", context_window: 128_000 }]),
}));

async function as<T>(method: string, path: string, body?: unknown, status = 200): Promise<T> {
  return JSON.parse(await text(await call(base(), method, path, body), status)) as T;
}

interface Delivery {
  id: string;
  type: string;
  status: string;
  turn_id: string | null;
  attempts: { status_code: number | null; error: string | null }[];
}

describe("outbound events and an inbound hook, over loopback sockets", () => {
  it("delivers every lifecycle event exactly once through failures and timeouts, each one verifiable", async () => {
    const endpoint = await as<{ id: string; secret: string }>(
      "POST",
      "/v1/webhook-endpoints",
      {
        url: `${receiverUrl}/hook`,
        events: [
          "turn.completed",
          "turn.requires_action",
          "turn.failed",
          "turn.interrupted",
          "hook.failed",
        ],
      },
      201,
    );
    const thread = `e2e-${crypto.randomUUID().slice(0, 8)}`;
    await as(
      "POST",
      "/v1/threads",
      { id: thread, tools: [{ name: "lookup", description: "x" }] },
      201,
    );
    const completed = await as<{ id: string; status: string }>(
      "POST",
      `/v1/threads/${thread}/turns`,
      { input: "hello" },
    );
    const paused = await as<{ id: string; status: string }>("POST", `/v1/threads/${thread}/turns`, {
      input: "/call lookup {}",
    });
    const slow = as<{ id: string; status: string }>("POST", `/v1/threads/${thread}/turns`, {
      input: "/slow 300 take your time",
    });
    await eventually(async () => {
      const t = await as<{ status: string }>("GET", `/v1/threads/${thread}`);
      return t.status === "running" ? true : undefined;
    }, "the slow turn's start");
    const instead = await as<{ id: string }>("POST", `/v1/threads/${thread}/turns`, {
      input: "instead",
      on_busy: "interrupt",
    });
    const interrupted = await slow;
    const failing = `e2e-fail-${crypto.randomUUID().slice(0, 8)}`;
    await as("POST", "/v1/threads", { id: failing, model: "gpt-e2e" }, 201);
    const failed = await as<{ id: string; status: string }>(
      "POST",
      `/v1/threads/${failing}/turns`,
      { input: "hi" },
    );
    expect([completed.status, paused.status, interrupted.status, failed.status]).toEqual([
      "completed",
      "requires_action",
      "interrupted",
      "failed",
    ]);

    // A hook whose deliveries' turns fail (its threads use the refusing provider): hook.failed.
    const hook = await as<{ url: string; secret: string }>(
      "POST",
      "/v1/hooks",
      {
        verify: { scheme: "standard" },
        thread: "e2e-hook-{{body.n}}",
        thread_config: { model: "gpt-e2e" },
      },
      201,
    );
    const payload = JSON.stringify({ type: "build.failed", n: crypto.randomUUID().slice(0, 8) });
    const msgId = `msg_${crypto.randomUUID().replaceAll("-", "")}`;
    const now = new Date();
    const hookHeaders = {
      "content-type": "application/json",
      "webhook-id": msgId,
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": new Webhook(hook.secret).sign(msgId, now, payload),
    };
    const accepted = await fetch(hook.url.replace(/^https?:\/\/[^/]+/, base().origin), {
      method: "POST",
      headers: hookHeaders,
      body: payload,
    });
    expect(accepted.status).toBe(202);
    const delivery = (await accepted.json()) as { status: string; turn_id: string };
    expect(delivery.status).toBe("accepted");

    // Each event, delivered: seven of turns (the paused turn ended interrupted when the next turn
    // replaced it), and the hook's failure.
    const expected = 8;
    const deliveries = await eventually(async () => {
      const list = await as<{ data: Delivery[] }>(
        "GET",
        `/v1/webhook-endpoints/${endpoint.id}/deliveries?limit=100`,
      );
      return list.data.length === expected && list.data.every((d) => d.status === "delivered")
        ? list.data
        : undefined;
    }, "every event's delivery");

    const events = arrivals.map((a) => ({
      id: a.id,
      answered: a.answered,
      event: new Webhook(endpoint.secret).verify(a.body, {
        "webhook-id": a.id,
        "webhook-timestamp": a.timestamp,
        "webhook-signature": a.signature,
      }) as { type: string; data: { turn_id: string; status: string } },
    }));
    const delivered = new Map<string, (typeof events)[number]["event"]>();
    for (const e of events)
      if (e.answered !== "timeout" && e.answered < 300) delivered.set(e.id, e.event);
    expect(delivered.size).toBe(expected);
    expect(new Set(deliveries.map((d) => d.id))).toEqual(new Set(delivered.keys()));
    expect([...delivered.values()].map((e) => `${e.type}:${e.data.turn_id}`).sort()).toEqual(
      [
        `turn.completed:${completed.id}`,
        `turn.requires_action:${paused.id}`,
        `turn.interrupted:${paused.id}`,
        `turn.interrupted:${interrupted.id}`,
        `turn.completed:${instead.id}`,
        `turn.failed:${failed.id}`,
        `turn.failed:${delivery.turn_id}`,
        `hook.failed:${delivery.turn_id}`,
      ].sort(),
    );
    // Failures and timeouts were retried under the same webhook-id, and recorded.
    expect(events.filter((e) => e.answered === 500).length).toBeGreaterThan(0);
    expect(events.filter((e) => e.answered === "timeout").length).toBeGreaterThan(0);
    const errors = deliveries.flatMap((d) => d.attempts.map((a) => a.error ?? "ok")).sort();
    expect(new Set(errors)).toEqual(new Set(["http_500", "timeout", "ok"]));
    expect(deliveries.every((d) => d.attempts.at(-1)?.error === null)).toBe(true);
  });

  it("a hand-signed GitHub delivery starts a turn, and a redelivery starts none", async () => {
    const hook = await as<{ id: string; url: string; secret: string }>(
      "POST",
      "/v1/hooks",
      { verify: { scheme: "github" }, thread: "gh-{{body.issue.number}}", events: ["issues"] },
      201,
    );
    const body = JSON.stringify({ action: "opened", issue: { number: Date.now() % 100_000 } });
    const headers = {
      "content-type": "application/json",
      "x-github-event": "issues",
      "x-github-delivery": crypto.randomUUID(),
      "x-hub-signature-256": `sha256=${createHmac("sha256", hook.secret).update(body).digest("hex")}`,
    };
    const url = hook.url.replace(/^https?:\/\/[^/]+/, base().origin);
    const first = await fetch(url, { method: "POST", headers, body });
    const accepted = (await first.json()) as { thread_id: string; turn_id: string };
    expect(first.status).toBe(202);
    const again = await fetch(url, { method: "POST", headers, body });
    expect(again.status).toBe(200);
    const turn = await eventually(async () => {
      const t = await as<{ status: string }>(
        "GET",
        `/v1/threads/${accepted.thread_id}/turns/${accepted.turn_id}`,
      );
      return ["completed", "requires_action", "interrupted", "failed"].includes(t.status)
        ? t
        : undefined;
    }, "the delivery's turn to end");
    expect(turn.status).toBe("completed");
    expect(
      (await as<{ turn_count: number }>("GET", `/v1/threads/${accepted.thread_id}`)).turn_count,
    ).toBe(1);
  });
});
