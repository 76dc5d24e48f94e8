import { defineConfig } from "vitest/config";

// Browser tests: plain Node drives a real workerd process (as the e2e tests do) and a headless
// Chromium that loads the inspector page from it (test/browser/chromium.ts).
export default defineConfig({
  test: {
    include: ["test/browser/**/*.test.ts"],
    silent: "passed-only",
    environment: "node",
    env: { CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_SEND_METRICS: "false" },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // One runtime and one browser at a time: the machine's two cores are shared.
    fileParallelism: false,
  },
});
