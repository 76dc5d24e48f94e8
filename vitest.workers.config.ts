import { createHash } from "node:crypto";
import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

// Integration tests run inside workerd with the real DO and R2 simulators.
export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./test/workers/wrangler.toml" },
      // The test worker (test/workers/wrangler.toml); tests may use the local development key.
      miniflare: {
        bindings: {
          SPINDLE_ENV: "development",
          // Two test tenants, for isolation tests (keys in test/workers/helpers/api.ts).
          SPINDLE_API_KEYS: JSON.stringify({
            [sha256("sk-test-acme")]: "acme",
            [sha256("sk-test-globex")]: "globex",
          }),
          // Small, so that the suites take and use checkpoints.
          SPINDLE_CHECKPOINT_EVERY_LINES: "40",
          SPINDLE_CHECKPOINT_GROUP_ITEMS: "8",
          // The openai provider, pointed at a host the tests answer by replacing fetch.
          OPENAI_BASE_URL: "https://openai.test/v1",
          OPENAI_API_KEY: "sk-test-openai",
          SPINDLE_OPENAI_MODELS: JSON.stringify([
            { slug: "gpt-test", context_window: 128_000 },
            {
              slug: "gpt-think",
              model: "gpt-5.4",
              context_window: 272_000,
              reasoning: { effort: "medium" },
              verbosity: "low",
            },
            // A host whose prompt cache has no known lifetime: idle compaction never fires.
            { slug: "gpt-uncached", context_window: 128_000, prompt_cache_ttl_s: null },
          ]),
          // The anthropic provider, likewise.
          ANTHROPIC_BASE_URL: "https://anthropic.test/v1",
          ANTHROPIC_API_KEY: "sk-test-anthropic",
          SPINDLE_ANTHROPIC_MODELS: JSON.stringify([
            { slug: "claude-test", context_window: 200_000, max_output_tokens: 8192 },
            {
              slug: "claude-think",
              model: "claude-thinker-1",
              context_window: 200_000,
              reasoning: { effort: "low" },
            },
          ]),
          // The openai-chat provider, likewise (a fetch spy answers the host).
          OPENAI_CHAT_BASE_URL: "https://chat.test/v1",
          OPENAI_CHAT_API_KEY: "sk-test-chat",
          SPINDLE_OPENAI_CHAT_MODELS: JSON.stringify([
            {
              slug: "chat-test",
              model: "qwen3-test",
              context_window: 32_000,
              max_output_tokens: 4_096,
              chat: { developer_role: "user" },
            },
          ]),
          // Workers AI models; the tests that use them put a stand-in `AI` binding on env.
          SPINDLE_WORKERS_AI_MODELS: JSON.stringify([
            { slug: "wai-test", model: "@cf/qwen/qwen3.8-27b", context_window: 32_000 },
          ]),
          // Outbound webhooks: retries at once, and a short bound on an attempt.
          SPINDLE_WEBHOOK_RETRY_SCALE: "0",
          SPINDLE_WEBHOOK_TIMEOUT_MS: "1000",
          // Requests of the API fuzz test (test/workers/edge/api-fuzz.test.ts); empty: its default.
          SPINDLE_FUZZ_RUNS: process.env.SPINDLE_FUZZ_RUNS ?? "",
        },
        // The webhook queues of test/workers/wrangler.toml, batching within 50 ms.
        queueConsumers: {
          "spindle-webhooks": {
            maxBatchSize: 25,
            maxBatchTimeout: 0.05,
            maxRetries: 7,
            deadLetterQueue: "spindle-webhooks-dlq",
          },
          "spindle-webhooks-dlq": { maxBatchSize: 25, maxBatchTimeout: 0.05 },
        },
      },
    }),
  ],
  test: {
    include: ["test/workers/**/*.test.ts"],
    // Every request and task writes a JSON log line: shown for failing tests only.
    silent: "passed-only",
    // Test files share one isolate: a spy on a binding (fault injection) would leak into
    // another file's Durable Objects if files ran at the same time.
    fileParallelism: false,
  },
});

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
