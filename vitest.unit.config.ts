import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// Unit tests of the pure core (shared/) and of the worker's modules run in plain Node: fast, no
// workerd. The one runtime module the objects' face pulls in is mapped to a stand-in.
export default defineConfig({
  resolve: {
    alias: {
      "cloudflare:workers": fileURLToPath(
        new URL("./test/unit/setup/cloudflare-workers.ts", import.meta.url),
      ),
    },
  },
  test: {
    include: ["test/unit/**/*.test.ts"],
    // Every request and task writes a JSON log line: shown for failing tests only.
    silent: "passed-only",
    environment: "node",
    setupFiles: ["test/unit/setup/workerd-globals.ts"],
  },
});
