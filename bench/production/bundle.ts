/**
 * The deploy bundle of a worker and the time to evaluate its global scope. The bundle is what
 * `wrangler deploy --dry-run --outdir` writes (its "Total Upload" line gives the sizes Cloudflare
 * counts); the global scope is timed by importing that bundle in fresh Node processes
 * (`evaluate.ts`), one process per sample, so no sample reuses another's compiled code. esbuild's
 * metafile gives how many bytes of the bundle each input (a source file, a package's module) takes.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const run = promisify(execFile);
const BUILD_TIMEOUT_MS = 120_000;
const EVALUATE_TIMEOUT_MS = 30_000;

export interface Bundle {
  /** The entry module wrangler wrote. */
  path: string;
  /** wrangler's "Total Upload" figures, KiB (undefined when it printed none). */
  uploadKiB: number | undefined;
  uploadGzipKiB: number | undefined;
  /** Bytes of the modules written (source maps excluded), and of their gzip. */
  bytes: number;
  gzipBytes: number;
  /** Bytes of the entry module per input file (relative to the repository), from the metafile. */
  inputs: Map<string, number>;
}

interface Metafile {
  outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }>;
}

export async function buildBundle(config: string): Promise<Bundle> {
  const outdir = mkdtempSync(join(tmpdir(), "spindle-bundle-"));
  const { stdout } = await run(
    process.execPath,
    [
      join(ROOT, "node_modules/wrangler/bin/wrangler.js"),
      "deploy",
      "--dry-run",
      "--outdir",
      outdir,
      "--metafile",
      "--config",
      config,
    ],
    {
      cwd: ROOT,
      timeout: BUILD_TIMEOUT_MS,
      env: { ...process.env, CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_SEND_METRICS: "false" },
    },
  );
  // The bundle is an ES module: said so, Node compiles it once as one, where it would otherwise
  // first try it as CommonJS (Node 22's syntax detection) and compile it again.
  writeFileSync(join(outdir, "package.json"), '{ "type": "module" }\n');
  const upload = /Total Upload: ([\d.]+) KiB \/ gzip: ([\d.]+) KiB/.exec(stdout);
  const modules = readdirSync(outdir).filter((f) => /\.(m?js|wasm)$/.test(f));
  const entry = modules.find((f) => f === "index.js") ?? modules[0];
  if (!entry) throw new Error(`wrangler wrote no module to ${outdir}`);
  let bytes = 0;
  let gzipBytes = 0;
  for (const file of modules) {
    const content = readFileSync(join(outdir, file));
    bytes += statSync(join(outdir, file)).size;
    gzipBytes += gzipSync(content).length;
  }
  const metafile = JSON.parse(readFileSync(join(outdir, "bundle-meta.json"), "utf8")) as Metafile;
  const output = Object.entries(metafile.outputs).find(([file]) => file.endsWith(`/${entry}`));
  const inputs = new Map(
    Object.entries(output?.[1].inputs ?? {}).map(([file, { bytesInOutput }]) => [
      relative(ROOT, resolve(ROOT, file)),
      bytesInOutput,
    ]),
  );
  return {
    path: join(outdir, entry),
    uploadKiB: upload?.[1] === undefined ? undefined : Number(upload[1]),
    uploadGzipKiB: upload?.[2] === undefined ? undefined : Number(upload[2]),
    bytes,
    gzipBytes,
    inputs,
  };
}

/** One sample: a fresh Node process imports the bundle; the import's duration in ms. */
export async function evaluateOnce(bundle: Bundle): Promise<number> {
  const { stdout } = await run(
    process.execPath,
    [
      "--experimental-strip-types",
      "--no-warnings",
      join(ROOT, "bench/production/evaluate.ts"),
      bundle.path,
    ],
    { cwd: ROOT, timeout: EVALUATE_TIMEOUT_MS },
  );
  return (JSON.parse(stdout) as { ms: number }).ms;
}
