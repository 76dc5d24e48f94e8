/**
 * Run by `bundle.ts` in a fresh Node process: imports one built Worker bundle and prints how long
 * the import took (reading, compiling and evaluating its top level), in ms, as JSON. `cloudflare:*`
 * modules resolve to small stand-ins with the exports a bundle's top level may touch.
 */
import { registerHooks } from "node:module";
import { pathToFileURL } from "node:url";

const SHIM = [
  "export class DurableObject { constructor(ctx, env) { this.ctx = ctx; this.env = env; } }",
  "export class WorkerEntrypoint extends DurableObject {}",
  "export class WorkflowEntrypoint extends DurableObject {}",
  "export class RpcTarget {}",
  "export const env = {};",
].join("\n");

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (!specifier.startsWith("cloudflare:")) return nextResolve(specifier, context);
    return { url: `data:text/javascript,${encodeURIComponent(SHIM)}`, shortCircuit: true };
  },
});

const bundle = process.argv[2];
if (!bundle) throw new Error("usage: evaluate.ts <bundle.js>");
const start = performance.now();
const module = (await import(pathToFileURL(bundle).href)) as Record<string, unknown>;
const ms = performance.now() - start;
process.stdout.write(`${JSON.stringify({ ms, exports: Object.keys(module).sort() })}\n`);
