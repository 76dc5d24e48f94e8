import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, eventually, text } from "./local-worker.ts";
import { persistedWorker } from "./persisted-worker.ts";

/**
 * A delivery through a restart of the runtime (design §12): the local queue lives in the
 * runtime's memory, so a restart between a failed attempt and its retry loses the retry's
 * message. The tenant's sweep sends it again from the delivery's record, with the same
 * `webhook-id`, and the receiver on 127.0.0.1 gets it once more.
 */

interface Arrival {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
}

const arrivals: Arrival[] = [];
let server: Server | undefined;
let receiverUrl = "";

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      arrivals.push({
        id: String(req.headers["webhook-id"]),
        timestamp: String(req.headers["webhook-timestamp"]),
        signature: String(req.headers["webhook-signature"]),
        body: Buffer.concat(chunks).toString("utf8"),
      });
      // The first attempt fails; the retry is what the restart loses.
      res.writeHead(arrivals.length === 1 ? 500 : 200);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
});

const { base, restart } = persistedWorker("spindle-e2e-webhook-restart-", () => ({
  // Attempts bounded to 1 s (so the sweep's grace is 3 s), the first retry 10 s after the first
  // attempt: far longer than the restart takes.
  SPINDLE_WEBHOOK_TIMEOUT_MS: "1000",
  SPINDLE_WEBHOOK_RETRY_SCALE: "2",
}));

async function as<T>(method: string, path: string, body?: unknown, status = 200): Promise<T> {
  return JSON.parse(await text(await call(base(), method, path, body), status)) as T;
}

interface Delivery {
  id: string;
  status: string;
  attempts: { status_code: number | null; error: string | null }[];
}

describe("a webhook delivery across a restart of the runtime", () => {
  it("is sent again by the tenant's sweep after the queue lost its retry, with the same webhook-id", async () => {
    const endpoint = await as<{ id: string; secret: string }>(
      "POST",
      "/v1/webhook-endpoints",
      { url: `${receiverUrl}/hook`, events: ["turn.completed"] },
      201,
    );
    const queued = await as<{ id: string }>(
      "POST",
      `/v1/webhook-endpoints/${endpoint.id}/test`,
      {},
      202,
    );
    const deliveries = () =>
      as<{ data: Delivery[] }>("GET", `/v1/webhook-endpoints/${endpoint.id}/deliveries`);
    await eventually(
      async () => {
        const [delivery] = (await deliveries()).data;
        return delivery?.attempts.length === 1 ? delivery : undefined;
      },
      "the first attempt",
      40_000,
    );

    await restart();

    const delivered = await eventually(
      async () => {
        const [delivery] = (await deliveries()).data;
        return delivery?.status === "delivered" ? delivery : undefined;
      },
      "the delivery after the restart",
      40_000,
    );
    expect(delivered).toMatchObject({ id: queued.id });
    expect(delivered.attempts.map((a) => [a.status_code, a.error])).toEqual([
      [500, "http_500"],
      [200, null],
    ]);
    expect(arrivals.map((a) => a.id)).toEqual([queued.id, queued.id]);
    for (const a of arrivals) {
      const event = new Webhook(endpoint.secret).verify(a.body, {
        "webhook-id": a.id,
        "webhook-timestamp": a.timestamp,
        "webhook-signature": a.signature,
      }) as { type: string };
      expect(event.type).toBe("webhook.test");
    }
  });
});
