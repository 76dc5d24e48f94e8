import { defineConfig } from "vitest/config";

// End-to-end tests run in plain Node and drive a real workerd process over a loopback socket.
export default defineConfig({
  test: {
    include: ["test/e2e/**/*.test.ts"],
    // Every request and task writes a JSON log line: shown for failing tests only.
    silent: "passed-only",
    environment: "node",
    env: { CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_SEND_METRICS: "false" },
    // Starting workerd (bundling included) takes about a second; each bound is far above that.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // One runtime at a time: the files share the machine's two cores and loopback ports.
    fileParallelism: false,
  },
});
