import { defineConfig } from "vitest/config";

// Unit tests of the pure core (shared/) run in plain Node: fast, no workerd.
export default defineConfig({
  test: {
    include: ["test/unit/**/*.test.ts"],
    environment: "node",
    setupFiles: ["test/unit/setup/workerd-globals.ts"],
  },
});
