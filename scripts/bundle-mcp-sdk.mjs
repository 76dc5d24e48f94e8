#!/usr/bin/env node
// Bundles the MCP SDK's client parts (shared/mcp/sdk/entry.ts) into shared/mcp/sdk/bundle.js, one
// self-contained ES module the worker loads on first use. Run on install (postinstall); the
// output is not committed.
import { build } from "esbuild";

/**
 * The SDK's Client imports its Ajv validator for when no `jsonSchemaValidator` is given; the
 * worker always gives `CfWorkerJsonSchemaValidator` (shared/mcp/connection.ts), so Ajv and its
 * dependencies (about 130 KiB minified) would only be dead weight in the deploy bundle.
 */
const withoutAjv = {
  name: "without-ajv",
  setup(b) {
    b.onResolve({ filter: /\/validation\/ajv-provider\.js$/ }, () => ({
      path: "ajv-provider",
      namespace: "without-ajv",
    }));
    b.onLoad({ filter: /.*/, namespace: "without-ajv" }, () => ({
      contents: `export class AjvJsonSchemaValidator {
  constructor() { throw new Error("Spindle's MCP client passes its own jsonSchemaValidator"); }
}`,
      loader: "js",
    }));
  },
};

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
  plugins: [withoutAjv],
});
