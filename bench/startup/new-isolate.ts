/**
 * A new isolate in workerd: a deploy bundle compiled, its global scope run, its first request
 * served. workerd evaluates a worker's own module while the runtime starts, before the inspector
 * can attach, so the bundle is instead loaded by a small loader Worker in a runtime of its own:
 * its `GET /import` imports the bundle (compiling it and running its top level), and any other
 * path imports it and hands the request to the bundle's `fetch` (with the loader's bindings,
 * none), inside a request that is timed from outside and can be profiled.
 */
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CpuProfile } from "../cpu-profile.ts";
import { quietLoop, timedFetch } from "../harness.ts";
import type { Bundle } from "../production/bundle.ts";
import { Runtime } from "../production/runtime.ts";

/** The module name the loader imports; profiles name its positions with it. */
export const BUNDLE_MODULE = "bundle.js";

const LOADER = `let imported;
export default {
  async fetch(request, env, ctx) {
    const path = new URL(request.url).pathname;
    if (path === "/") return new Response("loader");
    imported ??= await import("./${BUNDLE_MODULE}");
    if (path === "/import") return new Response(Object.keys(imported).sort().join(","));
    return imported.default.fetch(request, env, ctx);
  },
};
`;

// The bundle runs with the flags the measured workers have (wrangler.toml, bench/bare).
const CONFIG = `name = "spindle-bench-loader"
main = "loader.js"
compatibility_date = "2026-08-01"
compatibility_flags = ["nodejs_compat"]
no_bundle = true
find_additional_modules = true
rules = [{ type = "ESModule", globs = ["*.js"] }]
`;

export interface Evaluation {
  /** The timed request from send to the last byte (`/import`: the compile and top level), ms. */
  ms: number;
  /** The plain request right after it, for the cost of a request alone, ms. */
  requestMs: number;
  /** The body of the answer (`/import`: the names the bundle exports). */
  body: string;
  /** A V8 CPU profile of the timed request, when asked for. */
  profile?: CpuProfile;
}

/**
 * One sample: a new runtime, one plain request to warm the loader, then the timed request for
 * `path` (`/import`, or a path of the worker's own, its first request after the import).
 */
export async function newIsolate(
  bundle: Bundle,
  path: string,
  profile = false,
): Promise<Evaluation> {
  const dir = mkdtempSync(join(tmpdir(), "spindle-loader-"));
  writeFileSync(join(dir, "loader.js"), LOADER);
  writeFileSync(join(dir, "wrangler.toml"), CONFIG);
  copyFileSync(bundle.path, join(dir, BUNDLE_MODULE));
  const runtime = await Runtime.start(
    {
      script: "spindle-bench-loader",
      className: "none",
      config: join(dir, "wrangler.toml"),
      direct: true,
    },
    join(dir, "state"),
  );
  try {
    const get = (path: string) => timedFetch(new URL(path, runtime.url), { method: "GET" });
    await quietLoop();
    await get("/");
    let timed: { ms: number; body: string };
    let cpu: CpuProfile | undefined;
    if (profile) {
      const profiled = await runtime.profile(() => get(path));
      timed = profiled.result;
      cpu = profiled.profile as CpuProfile;
    } else {
      timed = await get(path);
    }
    const after = await get("/");
    return {
      ms: timed.ms,
      requestMs: after.ms,
      body: timed.body,
      ...(cpu ? { profile: cpu } : {}),
    };
  } finally {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The bundle's source map, written beside it by `wrangler deploy --outdir`, if any. */
export function sourceMapOf(bundle: Bundle): string | undefined {
  const map = `${bundle.path}.map`;
  return existsSync(map) ? map : undefined;
}
