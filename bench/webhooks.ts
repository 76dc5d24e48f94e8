/**
 * `npm run bench:webhooks`: what webhooks (design §12) cost and whether they keep their
 * guarantees under load, over loopback sockets to the worker as `npm start` runs it (wrangler's
 * local runtime, with its queue and consumer). Numbers are printed (and written to
 * bench/results-webhooks.md), never asserted. Four measurements:
 *
 * 1. Inbound: the 202 of a signed Standard Webhooks delivery against a plain authenticated
 *    `GET /v1/threads/{id}` of the same thread, interleaved, p50 side by side.
 * 2. A burst: BENCH_BURST deliveries (2,000) over BENCH_BURST_THREADS threads (50), one in ten
 *    a redelivery of an earlier one, BENCH_BURST_CONCURRENCY (50) at a time: deliveries per
 *    second, and once the turns ran, turns per distinct delivery (exactly one each) and none lost.
 * 3. Outbound: BENCH_OUTBOUND_TURNS (1,000) turns, each `turn.completed` to two endpoints whose
 *    receiver fails 30% of attempts at random (the retry schedule compressed to none): delivered
 *    events per endpoint, none missing, attempts per event.
 * 4. A warm turn on a tenant with no hooks or endpoints, against the same turn on the release
 *    before webhooks (BENCH_BASELINE_REF, default c691947, run from a `git archive` of it) and
 *    on a tenant with one endpoint, interleaved (BENCH_TURN_SAMPLES, 60).
 */
import { execSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Webhook } from "standardwebhooks";
import { type LocalWorker, startLocalWorker } from "../test/e2e/local-worker.ts";
import { timedFetch } from "./harness.ts";
import { count, median, ms, percentile, positiveInt, ratio, table } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const INBOUND_SAMPLES = positiveInt(process.env.BENCH_INBOUND_SAMPLES, 200);
const BURST = positiveInt(process.env.BENCH_BURST, 2_000);
const BURST_THREADS = positiveInt(process.env.BENCH_BURST_THREADS, 50);
const BURST_CONCURRENCY = positiveInt(process.env.BENCH_BURST_CONCURRENCY, 50);
const OUTBOUND_TURNS = positiveInt(process.env.BENCH_OUTBOUND_TURNS, 1_000);
const OUTBOUND_THREADS = positiveInt(process.env.BENCH_OUTBOUND_THREADS, 20);
const TURN_SAMPLES = positiveInt(process.env.BENCH_TURN_SAMPLES, 60);
const BASELINE_REF = process.env.BENCH_BASELINE_REF ?? "c691947";
const FAIL_SHARE = 0.3;
const WARMUP = 20;
const KEY = "sk-local-dev";

function log(message: string): void {
  process.stderr.write(`[bench:webhooks] ${message}\n`);
}

const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };

async function request(
  base: URL,
  method: string,
  path: string,
  body?: unknown,
  status = 200,
): Promise<{ ms: number; body: string }> {
  return timedFetch(
    new URL(path, base),
    { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) },
    status,
  );
}

/** A Standard Webhooks delivery of `payload` with the sender id `id`, signed now. */
function signed(secret: string, id: string, payload: string): Record<string, string> {
  const now = new Date();
  return {
    "content-type": "application/json",
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
    "webhook-signature": new Webhook(secret).sign(id, now, payload),
  };
}

async function until<T>(read: () => Promise<T | undefined>, what: string, seconds = 300) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${seconds} s`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Runs `work(i)` for i < n, `concurrency` at a time. */
async function pool(n: number, concurrency: number, work: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      for (let i = next++; i < n; i = next++) await work(i);
    }),
  );
}

/** The receiver of the outbound endpoints: answers 500 to 30% of attempts, at random. */
async function startReceiver() {
  const attempts = new Map<string, number>();
  const delivered = new Map<string, Set<string>>();
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const id = String(req.headers["webhook-id"]);
      attempts.set(id, (attempts.get(id) ?? 0) + 1);
      if (Math.random() < FAIL_SHARE) {
        res.writeHead(500).end();
        return;
      }
      const endpoint = req.url ?? "";
      if (!delivered.has(endpoint)) delivered.set(endpoint, new Set());
      delivered.get(endpoint)?.add(id);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, attempts, delivered, close: () => server.close() };
}

/** The worker of `ref`, from a `git archive` of it, with this checkout's node_modules. */
function baselineTree(ref: string): string {
  const dir = mkdtempSync(join(tmpdir(), "spindle-baseline-"));
  execSync(`git -C ${JSON.stringify(ROOT)} archive ${ref} | tar -x -C ${JSON.stringify(dir)}`);
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const loadBefore = loadavg();
  const t0 = performance.now();
  const receiver = await startReceiver();
  const dirs: string[] = [];
  const workers: LocalWorker[] = [];
  const started = async (vars: Record<string, string>, config?: string) => {
    const dir = mkdtempSync(join(tmpdir(), "spindle-bench-webhooks-"));
    dirs.push(dir);
    const worker = await startLocalWorker(dir, vars, config);
    workers.push(worker);
    return worker.url;
  };
  try {
    log("starting the worker…");
    const base = await started({ SPINDLE_WEBHOOK_RETRY_SCALE: "0" });
    const suffix = crypto.randomUUID().slice(0, 8);

    // 1. Inbound 202 against a plain GET.
    log("inbound…");
    const hook = JSON.parse(
      (
        await request(
          base,
          "POST",
          "/v1/hooks",
          { verify: { scheme: "standard" }, thread: `bench-in-${suffix}` },
          201,
        )
      ).body,
    ) as { url: string; secret: string };
    const hookPath = new URL(hook.url).pathname;
    const deliver = async (id: string, payload: string, status = 202) => {
      const start = performance.now();
      const res = await fetch(new URL(hookPath, base), {
        method: "POST",
        headers: signed(hook.secret, id, payload),
        body: payload,
      });
      const body = await res.text();
      if (res.status !== status) throw new Error(`delivery: ${res.status} ${body}`);
      return performance.now() - start;
    };
    await deliver(`msg_warm_${suffix}`, JSON.stringify({ type: "warm" }));
    const inbound = { get: [] as number[], deliver: [] as number[] };
    for (let i = 0; i < WARMUP + INBOUND_SAMPLES; i++) {
      const got = (await request(base, "GET", `/v1/threads/bench-in-${suffix}`)).ms;
      const took = await deliver(`msg_in_${suffix}_${i}`, JSON.stringify({ type: "ping", i }));
      if (i >= WARMUP) {
        inbound.get.push(got);
        inbound.deliver.push(took);
      }
    }

    // 2. The burst.
    log(`a burst of ${count(BURST)} deliveries over ${BURST_THREADS} threads…`);
    const burstHook = JSON.parse(
      (
        await request(
          base,
          "POST",
          "/v1/hooks",
          { verify: { scheme: "standard" }, thread: `bench-burst-${suffix}-{{body.thread}}` },
          201,
        )
      ).body,
    ) as { url: string; secret: string };
    const burstPath = new URL(burstHook.url).pathname;
    const distinct = Math.round(BURST * 0.9);
    const plan = Array.from({ length: BURST }, (_, i) =>
      // Every tenth is a redelivery of an earlier one.
      i % 10 === 9 ? Math.floor((i / 10) * 9) : i - Math.floor(i / 10),
    );
    const answers = { accepted: 0, duplicate: 0, other: 0 };
    const turnIds = new Set<string>();
    const burstStart = performance.now();
    await pool(BURST, BURST_CONCURRENCY, async (i) => {
      const n = plan[i] ?? 0;
      const payload = JSON.stringify({ type: "burst", thread: n % BURST_THREADS, n });
      const res = await fetch(new URL(burstPath, base), {
        method: "POST",
        headers: signed(burstHook.secret, `msg_burst_${suffix}_${n}`, payload),
        body: payload,
      });
      const body = JSON.parse(await res.text()) as { turn_id?: string };
      if (res.status === 202) {
        answers.accepted += 1;
        if (body.turn_id) turnIds.add(body.turn_id);
      } else if (res.status === 200) answers.duplicate += 1;
      else answers.other += 1;
    });
    const burstSeconds = (performance.now() - burstStart) / 1000;
    const burstTurns = await until(async () => {
      let turns = 0;
      let running = 0;
      for (let t = 0; t < BURST_THREADS; t++) {
        const thread = JSON.parse(
          (await request(base, "GET", `/v1/threads/bench-burst-${suffix}-${t}`)).body,
        ) as { turn_count: number; status: string };
        turns += thread.turn_count;
        if (thread.status !== "idle") running += 1;
      }
      return turns >= distinct && running === 0 ? turns : undefined;
    }, "the burst's turns");
    const drainedSeconds = (performance.now() - burstStart) / 1000;

    // 3. Outbound, through a receiver that fails 30% of attempts.
    log(`outbound: ${count(OUTBOUND_TURNS)} turns to two endpoints…`);
    const endpoints = await Promise.all(
      ["a", "b"].map(async (name) => {
        const created = JSON.parse(
          (
            await request(
              base,
              "POST",
              "/v1/webhook-endpoints",
              { url: `${receiver.url}/${name}`, events: ["turn.completed"] },
              201,
            )
          ).body,
        ) as { id: string };
        return { ...created, path: `/${name}` };
      }),
    );
    const outThreads = Array.from(
      { length: OUTBOUND_THREADS },
      (_, t) => `bench-out-${suffix}-${t}`,
    );
    for (const id of outThreads) await request(base, "POST", "/v1/threads", { id }, 201);
    const outStart = performance.now();
    await pool(OUTBOUND_TURNS, OUTBOUND_THREADS, async (i) => {
      const id = outThreads[i % OUTBOUND_THREADS] ?? "";
      await request(base, "POST", `/v1/threads/${id}/turns`, {
        input: `turn ${i}`,
        on_busy: "queue",
      });
    });
    /** An endpoint's delivery records by status. */
    const statusesOf = async (id: string) => {
      const statuses = new Map<string, number>();
      let cursor: string | null = null;
      do {
        const after: string = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`;
        const page = JSON.parse(
          (await request(base, "GET", `/v1/webhook-endpoints/${id}/deliveries?limit=100${after}`))
            .body,
        ) as { data: { status: string }[]; next_cursor: string | null };
        for (const d of page.data) statuses.set(d.status, (statuses.get(d.status) ?? 0) + 1);
        cursor = page.next_cursor;
      } while (cursor !== null);
      return statuses;
    };
    // Until every event is delivered, or failed: all 8 attempts of an event fail about once in
    // 15,000 events at a 30% failure rate, and the schedule then ends it.
    await until(async () => {
      const received = endpoints.every(
        (e) => (receiver.delivered.get(e.path)?.size ?? 0) >= OUTBOUND_TURNS,
      );
      if (received) return true;
      // The records are read only once nearly every event has arrived.
      const nearly = endpoints.every(
        (e) => (receiver.delivered.get(e.path)?.size ?? 0) >= OUTBOUND_TURNS * 0.99,
      );
      if (!nearly) return undefined;
      const ended = await Promise.all(
        endpoints.map(async (e) => {
          const statuses = await statusesOf(e.id);
          return (statuses.get("delivered") ?? 0) + (statuses.get("failed") ?? 0);
        }),
      );
      return ended.every((n) => n >= OUTBOUND_TURNS) ? true : undefined;
    }, "every event's delivery");
    const outSeconds = (performance.now() - outStart) / 1000;
    const records = await Promise.all(endpoints.map((e) => statusesOf(e.id)));
    const attempts = [...receiver.attempts.values()];
    const attemptsPerEvent = attempts.reduce((a, b) => a + b, 0) / attempts.length;

    // 4. Warm turns against the release before webhooks.
    log(`warm turns against ${BASELINE_REF}…`);
    const baselineDir = baselineTree(BASELINE_REF);
    dirs.push(baselineDir);
    const baseline = await started({}, join(baselineDir, "wrangler.toml"));
    // Managed tenants of their own on both workers: the local tenant has endpoints by now.
    const admin = { ...headers, authorization: "Bearer sk-local-admin" };
    const newTenant = async (on: URL, id: string) => {
      await timedFetch(
        new URL("/v1/admin/tenants", on),
        { method: "POST", headers: admin, body: JSON.stringify({ id }) },
        201,
      );
      const created = await timedFetch(
        new URL(`/v1/admin/tenants/${id}/keys`, on),
        { method: "POST", headers: admin, body: "{}" },
        201,
      );
      return (JSON.parse(created.body) as { key: string }).key;
    };
    const withEndpoint = await newTenant(base, `bench_wh_endpoint_${suffix}`);
    await timedFetch(
      new URL("/v1/webhook-endpoints", base),
      {
        method: "POST",
        headers: { ...headers, authorization: `Bearer ${withEndpoint}` },
        body: JSON.stringify({ url: `${receiver.url}/warm`, events: ["turn.completed"] }),
      },
      201,
    );
    const kinds = [
      {
        label: `before webhooks (${BASELINE_REF})`,
        base: baseline,
        key: await newTenant(baseline, `bench_wh_before_${suffix}`),
      },
      {
        label: "no hooks or endpoints",
        base,
        key: await newTenant(base, `bench_wh_none_${suffix}`),
      },
      { label: "one endpoint (turn.completed)", base, key: withEndpoint },
    ];
    const samples = kinds.map(() => [] as number[]);
    for (const [k, kind] of kinds.entries()) {
      await timedFetch(
        new URL("/v1/threads", kind.base),
        {
          method: "POST",
          headers: { ...headers, authorization: `Bearer ${kind.key}` },
          body: JSON.stringify({ id: `bench_warm_${suffix}_${k}` }),
        },
        201,
      );
    }
    for (let i = 0; i < 10 + TURN_SAMPLES; i++) {
      for (const [k, kind] of kinds.entries()) {
        const took = (
          await timedFetch(new URL(`/v1/threads/bench_warm_${suffix}_${k}/turns`, kind.base), {
            method: "POST",
            headers: { ...headers, authorization: `Bearer ${kind.key}` },
            body: JSON.stringify({ input: `Benchmark question number ${i}, please answer.` }),
          })
        ).ms;
        if (i >= 10) samples[k]?.push(took);
      }
    }
    const baseTurn = median(samples[0] ?? []);

    const seconds = (performance.now() - t0) / 1000;
    const report = [
      "# Spindle webhooks benchmark",
      "",
      `Local run, ${cpus().length} cores (${cpus()[0]?.model.trim() ?? "unknown CPU"}), Node ${process.version}, ${startedAt.toISOString()}, ${Math.round(seconds)} s in all, load average ${loadBefore.map((l) => l.toFixed(2)).join(" ")} before and ${loadavg()
        .map((l) => l.toFixed(2))
        .join(
          " ",
        )} after. Every request is an HTTP exchange over 127.0.0.1 with wrangler's local runtime (as \`npm start\` runs it: the queue and its consumer included), the instant local model; simulator numbers, for comparing runs.`,
      "",
      "## Inbound: the 202 of a signed delivery against a plain read (interleaved)",
      "",
      table(
        ["request", "samples", "p50", "p99", "p50 ÷ GET p50"],
        [
          [
            "`GET /v1/threads/{id}` (bearer key)",
            count(inbound.get.length),
            ms(median(inbound.get)),
            ms(percentile(inbound.get, 99)),
            "1.00×",
          ],
          [
            "`POST /hooks/…` (Standard Webhooks, 202)",
            count(inbound.deliver.length),
            ms(median(inbound.deliver)),
            ms(percentile(inbound.deliver, 99)),
            ratio(median(inbound.deliver), median(inbound.get)),
          ],
        ],
      ),
      "",
      `## A burst: ${count(BURST)} deliveries over ${BURST_THREADS} threads, one in ten a redelivery, ${BURST_CONCURRENCY} at a time`,
      "",
      table(
        ["measure", "value"],
        [
          [
            "answered",
            `${count(BURST)} in ${burstSeconds.toFixed(1)} s: ${Math.round(BURST / burstSeconds)} deliveries/s`,
          ],
          [
            "202 accepted / 200 duplicate / other",
            `${count(answers.accepted)} / ${count(answers.duplicate)} / ${count(answers.other)}`,
          ],
          ["distinct deliveries", count(distinct)],
          ["distinct turn ids answered", count(turnIds.size)],
          [
            "turns the threads ran",
            `${count(burstTurns)} (${ratio(burstTurns, distinct)} per distinct delivery)`,
          ],
          ["all turns ended after", `${drainedSeconds.toFixed(1)} s`],
        ],
      ),
      "",
      `## Outbound: ${count(OUTBOUND_TURNS)} turns, \`turn.completed\` to two endpoints, the receiver failing ${Math.round(FAIL_SHARE * 100)}% of attempts`,
      "",
      table(
        [
          "endpoint",
          "events received (2xx, distinct webhook-id)",
          "delivered in its record",
          "pending",
          "failed",
        ],
        endpoints.map((e, i) => [
          e.path,
          count(receiver.delivered.get(e.path)?.size ?? 0),
          count(records[i]?.get("delivered") ?? 0),
          count(records[i]?.get("pending") ?? 0),
          count(records[i]?.get("failed") ?? 0),
        ]),
      ),
      "",
      `Attempts per event: ${attemptsPerEvent.toFixed(2)} (mean; the most for one event ${Math.max(...attempts)}; a 30% failure rate gives 1.43 on average). Every event delivered (or, after 8 failed attempts, failed) within ${outSeconds.toFixed(1)} s of the first turn, retries at once (the schedule compressed).`,
      "",
      "## Warm turns: a tenant with no hooks or endpoints against the release before webhooks (interleaved)",
      "",
      table(
        ["worker / tenant", "samples", "p50", "p99", "p50 ÷ before"],
        kinds.map((kind, k) => {
          const s = samples[k] ?? [];
          return [
            kind.label,
            count(s.length),
            ms(median(s)),
            ms(percentile(s, 99)),
            ratio(median(s), baseTurn),
          ];
        }),
      ),
      "",
    ].join("\n");
    process.stdout.write(`${report}\n`);
    writeFileSync(`${ROOT}bench/results-webhooks.md`, report);
    log("wrote bench/results-webhooks.md");
  } finally {
    for (const worker of workers) await worker.dispose().catch(() => {});
    receiver.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}

await main();
