import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

// Integration tests run inside workerd with the real DO and R2 simulators.
export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      // wrangler.toml deploys as production; tests may use the local development key.
      miniflare: { bindings: { SPINDLE_ENV: "development" } },
    }),
  ],
  test: {
    include: ["test/workers/**/*.test.ts"],
  },
});
