/**
 * `npm run bench:tenancy`: what the tenancy layer (design §11) costs, over a loopback socket to
 * the worker under wrangler's test harness. Numbers are printed (and written to
 * bench/results-tenancy.md), never asserted. Three measurements:
 *
 * 1. Authentication: the same request (`GET /v1/nope`: authenticated, then 404 with no Durable
 *    Object call) with a static key of `SPINDLE_API_KEYS` and with a tenant key (verified once by
 *    its tenant's object, then from the isolate's cache), interleaved, p50 side by side.
 * 2. Warm turns on tenants with and without quotas, against a warm turn on a tenant of the static
 *    keys (no quota: the turn asks its tenant's object nothing; index and ledger pushes run in
 *    every one, off the response path), interleaved. With a turn quota, a thread's admission is
 *    a 30 s lease, so its warm turns ask nothing; the last row is the contended case: two threads
 *    take turns on one slot (`max_running_turns: 1`), so every turn asks its tenant, which asks
 *    the other thread for the slot first.
 * 3. Listing: a tenant with BENCH_LIST_THREADS threads, read in pages of 100, newest first, and
 *    the same with a metadata filter that one thread in ten matches.
 *
 * Knobs (environment): BENCH_AUTH_SAMPLES (400), BENCH_TURN_SAMPLES (60), BENCH_LIST_THREADS
 * (10000), BENCH_LIST_CONCURRENCY (threads created at once while seeding, 8).
 */
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { startRuntime, timedFetch } from "./harness.ts";
import { count, median, ms, percentile, positiveInt, ratio, table } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const AUTH_SAMPLES = positiveInt(process.env.BENCH_AUTH_SAMPLES, 400);
const TURN_SAMPLES = positiveInt(process.env.BENCH_TURN_SAMPLES, 60);
const LIST_THREADS = positiveInt(process.env.BENCH_LIST_THREADS, 10_000);
const LIST_CONCURRENCY = positiveInt(process.env.BENCH_LIST_CONCURRENCY, 8);
const PAGE = 100;
const WARMUP = 20;

const STATIC_KEY = "sk-local-dev";
const ADMIN_KEY = "sk-local-admin";

function log(message: string): void {
  process.stderr.write(`[bench:tenancy] ${message}\n`);
}

const headers = (key: string) => ({
  authorization: `Bearer ${key}`,
  "content-type": "application/json",
});

async function main(): Promise<void> {
  const startedAt = new Date();
  const loadBefore = loadavg();
  const t0 = performance.now();
  const runtime = await startRuntime({
    configPath: `${ROOT}wrangler.toml`,
    vars: { SPINDLE_ENV: "development" },
    doDir: "spindle-Thread",
    warmUp: async (url) => {
      await timedFetch(
        new URL("/v1/threads", url),
        { method: "POST", headers: headers(STATIC_KEY), body: JSON.stringify({ id: "warmup" }) },
        201,
      );
    },
  });
  const request = async (
    key: string,
    method: string,
    path: string,
    body?: unknown,
    status = 200,
  ): Promise<{ ms: number; body: string }> =>
    timedFetch(
      new URL(path, runtime.url),
      {
        method,
        headers: headers(key),
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      },
      status,
    );
  try {
    const suffix = crypto.randomUUID().slice(0, 8);
    const newTenant = async (id: string, quotas: Record<string, number> = {}) => {
      await request(ADMIN_KEY, "POST", "/v1/admin/tenants", { id, quotas }, 201);
      const { body } = await request(ADMIN_KEY, "POST", `/v1/admin/tenants/${id}/keys`, {}, 201);
      return (JSON.parse(body) as { key: string }).key;
    };

    // 1. Authentication.
    log("authentication…");
    const plainKey = await newTenant(`bench_auth_${suffix}`);
    const auth = { static: [] as number[], tenant: [] as number[] };
    for (let i = 0; i < WARMUP + AUTH_SAMPLES; i++) {
      const a = await request(STATIC_KEY, "GET", "/v1/nope", undefined, 404);
      const b = await request(plainKey, "GET", "/v1/nope", undefined, 404);
      if (i >= WARMUP) {
        auth.static.push(a.ms);
        auth.tenant.push(b.ms);
      }
    }

    // 2. Warm turns: one thread per kind of tenant, their turns interleaved.
    log("warm turns…");
    const HIGH = 1_000_000_000_000;
    const kinds: { label: string; key: string; threads?: number }[] = [
      { label: "static key, no quota", key: STATIC_KEY },
      { label: "managed, no quota", key: await newTenant(`bench_noquota_${suffix}`) },
      {
        label: "managed, max_thread_bytes (no call)",
        key: await newTenant(`bench_bytes_${suffix}`, { max_thread_bytes: HIGH }),
      },
      {
        label: "managed, tokens_per_day (leased)",
        key: await newTenant(`bench_tokens_${suffix}`, { tokens_per_day: HIGH }),
      },
      {
        label: "managed, max_running_turns (leased)",
        key: await newTenant(`bench_running_${suffix}`, { max_running_turns: 1_000 }),
      },
      {
        label: "managed, every quota set (leased)",
        key: await newTenant(`bench_quota_${suffix}`, {
          max_threads: 1_000_000,
          max_running_turns: 1_000,
          tokens_per_day: HIGH,
          max_thread_bytes: HIGH,
        }),
      },
      {
        label:
          "contended: 2 threads alternate on max_running_turns 1 (each turn asks; slot handed back)",
        key: await newTenant(`bench_contended_${suffix}`, { max_running_turns: 1 }),
        threads: 2,
      },
    ];
    const threadOf = (k: number, i: number) =>
      `bench_turns_${suffix}_${k}_${i % (kinds[k]?.threads ?? 1)}`;
    const turnSamples = kinds.map(() => [] as number[]);
    for (const [k, kind] of kinds.entries()) {
      for (let t = 0; t < (kind.threads ?? 1); t++) {
        await request(kind.key, "POST", "/v1/threads", { id: threadOf(k, t) }, 201);
      }
    }
    for (let i = 0; i < 10 + TURN_SAMPLES; i++) {
      const input = { input: `Benchmark question number ${i}, please answer.` };
      for (const [k, kind] of kinds.entries()) {
        const path = `/v1/threads/${threadOf(k, i)}/turns`;
        const took = (await request(kind.key, "POST", path, input)).ms;
        if (i >= 10) turnSamples[k]?.push(took);
      }
    }
    const baseTurn = median(turnSamples[0] ?? []);

    // 3. Listing.
    log(`seeding ${count(LIST_THREADS)} threads…`);
    const listKey = await newTenant(`bench_list_${suffix}`);
    const seedStart = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: LIST_CONCURRENCY }, async () => {
        for (let n = next++; n < LIST_THREADS; n = next++) {
          const metadata = { group: String(n % 10), n: String(n) };
          await request(listKey, "POST", "/v1/threads", { metadata }, 201);
          if ((n + 1) % 1000 === 0) log(`  ${count(n + 1)} created`);
        }
      }),
    );
    const seedSeconds = (performance.now() - seedStart) / 1000;
    // The index follows within moments: wait until it holds every thread.
    const walk = async (query: string) => {
      const pages: number[] = [];
      let seen = 0;
      let cursor: string | null = null;
      do {
        const after: string = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`;
        const { ms: took, body } = await request(
          listKey,
          "GET",
          `/v1/threads?limit=${PAGE}${query}${after}`,
        );
        const page = JSON.parse(body) as { data: unknown[]; next_cursor: string | null };
        pages.push(took);
        seen += page.data.length;
        cursor = page.next_cursor;
      } while (cursor !== null);
      return { pages, seen };
    };
    for (let tries = 0; ; tries++) {
      const { seen } = await walk("");
      if (seen === LIST_THREADS || tries > 50) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const unfiltered = await walk("");
    const filtered = await walk("&metadata[group]=3");

    const seconds = (performance.now() - t0) / 1000;
    const report = [
      "# Spindle tenancy benchmark",
      "",
      `Local run, ${cpus().length} cores (${cpus()[0]?.model.trim() ?? "unknown CPU"}), Node ${process.version}, ${startedAt.toISOString()}, ${Math.round(seconds)} s in all, load average ${loadBefore.map((l) => l.toFixed(2)).join(" ")} before and ${loadavg()
        .map((l) => l.toFixed(2))
        .join(
          " ",
        )} after. Every request is an HTTP exchange over 127.0.0.1 with wrangler's test harness; simulator numbers, for comparing runs.`,
      "",
      "## Authentication (`GET /v1/nope`: authenticated, then 404; no Durable Object call)",
      "",
      table(
        ["key", "samples", "p50", "p99", "p50 − static p50"],
        [
          [
            "static (`SPINDLE_API_KEYS`)",
            count(auth.static.length),
            ms(median(auth.static)),
            ms(percentile(auth.static, 99)),
            "—",
          ],
          [
            "tenant key (isolate cache)",
            count(auth.tenant.length),
            ms(median(auth.tenant)),
            ms(percentile(auth.tenant, 99)),
            ms(median(auth.tenant) - median(auth.static)),
          ],
        ],
      ),
      "",
      "## Warm turns (interleaved, same machine minute)",
      "",
      table(
        ["tenant", "samples", "p50", "p99", "p50 ÷ static tenant"],
        kinds.map((kind, k) => {
          const samples = turnSamples[k] ?? [];
          return [
            kind.label,
            count(samples.length),
            ms(median(samples)),
            ms(percentile(samples, 99)),
            ratio(median(samples), baseTurn),
          ];
        }),
      ),
      "",
      `## Listing ${count(LIST_THREADS)} threads in pages of ${PAGE}`,
      "",
      table(
        ["listing", "pages", "threads", "page p50", "page p99"],
        [
          [
            "newest first",
            count(unfiltered.pages.length),
            count(unfiltered.seen),
            ms(median(unfiltered.pages)),
            ms(percentile(unfiltered.pages, 99)),
          ],
          [
            "`metadata[group]=3` (1 in 10)",
            count(filtered.pages.length),
            count(filtered.seen),
            ms(median(filtered.pages)),
            ms(percentile(filtered.pages, 99)),
          ],
        ],
      ),
      "",
      `Seeding: ${count(LIST_THREADS)} creates, ${LIST_CONCURRENCY} at a time, in ${seedSeconds.toFixed(1)} s (${((seedSeconds * 1000) / LIST_THREADS).toFixed(2)} ms each on average).`,
      "",
    ].join("\n");
    process.stdout.write(`${report}\n`);
    writeFileSync(`${ROOT}bench/results-tenancy.md`, report);
    log("wrote bench/results-tenancy.md");
  } finally {
    await runtime.close();
  }
}

await main();
