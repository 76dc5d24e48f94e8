/**
 * `npm run bench:cache`: a scripted day of bursty use on each provider's stand-in (Responses,
 * Chat Completions, Messages API), with and without idle compaction, and the tokens it sent.
 *
 * The stand-ins simulate a prompt cache that expires `TTL_S` after its last use, and the catalog
 * gives each model the same `prompt_cache_ttl_s`, so a real-time run of a few minutes stands for
 * a day whose bursts are separated by gaps longer than the provider's cache: each gap here is
 * `GAP_MS`, past the lifetime, as a lunch break is past OpenAI's or Anthropic's five minutes.
 * Token counts are the stand-ins' (about one per four bytes of prompt), as Spindle parsed them
 * from each wire into the thread's usage.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { call, startLocalWorker } from "../test/e2e/local-worker.ts";
import { startAnthropicStandIn } from "../test/helpers/anthropic-stand-in.ts";
import { startChatStandIn } from "../test/helpers/chat-stand-in.ts";
import { startResponsesStandIn } from "../test/helpers/responses-stand-in.ts";
import { parseSse } from "../test/helpers/sse.ts";
import { sleep } from "./harness.ts";
import { count, positiveInt, table } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const TTL_S = positiveInt(process.env.BENCH_CACHE_TTL_S, 3);
const GAP_MS = TTL_S * 1000 + 2_000;
const BURSTS = positiveInt(process.env.BENCH_CACHE_BURSTS, 5);
const TURNS_PER_BURST = positiveInt(process.env.BENCH_CACHE_TURNS, 3);
const IDLE = { after_idle_s: 1, min_context_tokens: 1_000 };

const responses = await startResponsesStandIn({ cacheTtlMs: TTL_S * 1000 });
const chat = await startChatStandIn({ cacheTtlMs: TTL_S * 1000 });
const anthropic = await startAnthropicStandIn({ cacheTtlMs: TTL_S * 1000 });
const model = (slug: string) => ({
  slug,
  model: "stand-in",
  context_window: 200_000,
  max_output_tokens: 1_000,
  prompt_cache_ttl_s: TTL_S,
});
const PROVIDERS = [
  { name: "openai (Responses)", slug: "bench-responses" },
  { name: "openai-chat (Chat Completions)", slug: "bench-chat" },
  { name: "anthropic (Messages)", slug: "bench-anthropic" },
] as const;

interface Usage {
  input_tokens: number;
  cached_input_tokens: number;
  requests: number;
  turns: number;
}

/** A turn's input: a few hundred bytes of its own, so the context grows as a working day's. */
const message = (burst: number, turn: number) =>
  `Burst ${burst}, message ${turn}: ${"here is more of the task at hand, in detail. ".repeat(40)}`;

/** How many of the turns' requests each break reason (or `held`) named, as their events said. */
type Breaks = Map<string, number>;

/** The break reasons of the cache reports a streamed turn's `token_count` events carried. */
function breaksOf(sse: string, breaks: Breaks): void {
  for (const frame of parseSse(sse)) {
    if (frame.event !== "token_count") continue;
    type Event = { data: { cache: { break_reason: string | null } | null } };
    const cache = (JSON.parse(frame.data) as Event).data.cache;
    const key = cache === null ? "unknown" : (cache.break_reason ?? "held");
    breaks.set(key, (breaks.get(key) ?? 0) + 1);
  }
}

async function day(
  base: URL,
  slug: string,
  idle: boolean,
): Promise<Usage & { compactions: number; breaks: Breaks }> {
  const breaks: Breaks = new Map();
  const id = `bench-cache-${slug}-${idle ? "idle" : "plain"}-${Date.now()}`;
  const created = await call(base, "POST", "/v1/threads", {
    id,
    model: slug,
    ...(idle ? { idle_compaction: IDLE } : {}),
  });
  if (created.status !== 201) throw new Error(`create: ${created.status} ${await created.text()}`);
  for (let burst = 0; burst < BURSTS; burst++) {
    if (burst > 0) await sleep(GAP_MS);
    for (let turn = 0; turn < TURNS_PER_BURST; turn++) {
      const res = await call(base, "POST", `/v1/threads/${id}/turns`, {
        input: message(burst, turn),
        stream: true,
      });
      if (res.status !== 200) throw new Error(`turn: ${res.status} ${await res.text()}`);
      breaksOf(await res.text(), breaks);
    }
  }
  // The last burst's idle compaction, if any, counts too: the day ends after it.
  await sleep(GAP_MS);
  const thread = (await (await call(base, "GET", `/v1/threads/${id}`)).json()) as {
    usage: Usage;
  };
  const turns = (await (await call(base, "GET", `/v1/threads/${id}/turns?limit=100`)).json()) as {
    data: { kind: string; trigger?: string }[];
  };
  const compactions = turns.data.filter((t) => t.kind === "compaction" && t.trigger === "idle");
  return { ...thread.usage, compactions: compactions.length, breaks };
}

const persist = mkdtempSync(join(tmpdir(), "spindle-bench-cache-"));
const worker = await startLocalWorker(persist, {
  OPENAI_BASE_URL: responses.url,
  OPENAI_API_KEY: "local",
  SPINDLE_OPENAI_MODELS: JSON.stringify([model("bench-responses")]),
  OPENAI_CHAT_BASE_URL: chat.url,
  OPENAI_CHAT_API_KEY: "local",
  SPINDLE_OPENAI_CHAT_MODELS: JSON.stringify([model("bench-chat")]),
  ANTHROPIC_BASE_URL: anthropic.url,
  ANTHROPIC_API_KEY: "local",
  SPINDLE_ANTHROPIC_MODELS: JSON.stringify([model("bench-anthropic")]),
});
const started = Date.now();
try {
  const rows: string[][] = [];
  for (const provider of PROVIDERS) {
    // One after the other: the Chat stand-in's cache is the previous request's prompt, which
    // two threads at once would keep replacing.
    const runs = [
      await day(worker.url, provider.slug, false),
      await day(worker.url, provider.slug, true),
    ];
    const uncachedWithout =
      (runs[0] as Usage).input_tokens - (runs[0] as Usage).cached_input_tokens;
    for (const [i, run] of runs.entries()) {
      const uncached = run.input_tokens - run.cached_input_tokens;
      rows.push([
        provider.name,
        i === 0 ? "without" : `with (${run.compactions} idle compactions)`,
        count(run.requests),
        count(run.input_tokens),
        count(run.cached_input_tokens),
        `${((100 * run.cached_input_tokens) / Math.max(1, run.input_tokens)).toFixed(1)}%`,
        count(uncached),
        i === 0 ? "" : `${((100 * (uncachedWithout - uncached)) / uncachedWithout).toFixed(1)}%`,
        [...run.breaks].map(([reason, n]) => `${reason} ${n}`).join(", "),
      ]);
    }
  }
  const report = [
    "# Prompt-cache economics: a bursty day, with and without idle compaction",
    "",
    `\`npm run bench:cache\` on ${cpus().length} cores (load ${loadavg()[0]?.toFixed(2)}), ${new Date().toISOString()}, ${Math.round((Date.now() - started) / 1000)} s. The worker as \`npm start\` runs it, each provider against its local stand-in.`,
    "",
    `A day: ${BURSTS} bursts of ${TURNS_PER_BURST} turns (each input about 1.9 KB), separated by ${GAP_MS / 1000} s of quiet, on a prompt cache that lives ${TTL_S} s after its last use (the stand-ins' simulation; the catalog's \`prompt_cache_ttl_s\` is ${TTL_S} too). With idle compaction the thread has \`idle_compaction ${JSON.stringify(IDLE)}\`, so after each burst it is compacted ${TTL_S * 100} ms before the cache expires, reading the warm prefix, and the next burst starts from the short summary. Tokens are the stand-ins' (about four bytes each), as Spindle parsed them into the thread's \`usage\`; the Messages API's input counts its cache reads and writes. The last column counts the user turns' requests by the \`break_reason\` of the cache report their \`token_count\` events carried (\`held\`: none; the idle compactions' own requests are not in it): without idle compaction each burst after the first opens on an \`expired\` prefix, with it on the \`compaction\` that replaced it.`,
    "",
    table(
      [
        "provider",
        "idle compaction",
        "requests",
        "input tokens",
        "cached",
        "cached share",
        "uncached input",
        "uncached saved",
        "turns' requests, by cache break (live)",
      ],
      rows,
    ),
    "",
  ].join("\n");
  console.log(report);
  writeFileSync(`${ROOT}bench/results-cache.md`, report);
} finally {
  await worker.dispose();
  await Promise.all([responses.close(), chat.close(), anthropic.close()]);
  rmSync(persist, { recursive: true, force: true });
}
