#!/usr/bin/env node
// Bundles the MCP SDK's client parts (shared/mcp/sdk/entry.ts) into shared/mcp/sdk/bundle.js, one
// self-contained ES module the worker loads on first use. Run on install (postinstall); the
// output is not committed.
import { build } from "esbuild";

await build({
  entryPoints: [new URL("../shared/mcp/sdk/entry.ts", import.meta.url).pathname],
  outfile: new URL("../shared/mcp/sdk/bundle.js", import.meta.url).pathname,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  conditions: ["workerd", "worker", "browser"],
  minify: true,
  legalComments: "none",
  logLevel: "warning",
});
