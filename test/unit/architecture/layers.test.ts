/**
 * The dependency rule (docs/architecture.md): `worker → durable-objects → shared`, never
 * backwards. Imports are read with the TypeScript compiler's own pre-processor (the compiler the
 * project already pins, so no extra tool), and resolved as paths.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../..");

type Layer = "shared" | "durable-objects" | "worker" | "env";

/** What each layer may import from the repository (packages are always allowed, except below). */
const ALLOWED: Record<Layer, readonly Layer[]> = {
  shared: ["shared"],
  "durable-objects": ["shared", "durable-objects", "env"],
  worker: ["shared", "durable-objects", "worker", "env"],
  env: [],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

function layerOf(path: string): Layer | "outside" {
  if (path === "env.ts") return "env";
  const top = path.split("/")[0];
  return top === "shared" || top === "durable-objects" || top === "worker" ? top : "outside";
}

interface Import {
  from: string;
  specifier: string;
  /** The imported file, relative to the root; undefined for a package or a runtime module. */
  target: string | undefined;
}

function importsOf(file: string): Import[] {
  const info = ts.preProcessFile(readFileSync(join(ROOT, file), "utf8"), true, true);
  return info.importedFiles.map(({ fileName }) => ({
    from: file,
    specifier: fileName,
    target: fileName.startsWith(".")
      ? relative(ROOT, resolve(ROOT, dirname(file), fileName))
      : undefined,
  }));
}

const FILES = [
  ...sourceFiles("shared"),
  ...sourceFiles("durable-objects"),
  ...sourceFiles("worker"),
  "env.ts",
];
const IMPORTS = FILES.flatMap(importsOf);

describe("the dependency rule", () => {
  it("finds the layers' files and their imports", () => {
    expect(FILES.filter((f) => layerOf(f) === "shared").length).toBeGreaterThan(50);
    expect(
      IMPORTS.some((i) => i.from.startsWith("worker/") && i.target?.startsWith("shared/api/")),
    ).toBe(true);
  });

  it("no layer imports one above it", () => {
    const upward = IMPORTS.filter((i) => {
      if (i.target === undefined) return false;
      const from = layerOf(i.from) as Layer;
      const to = layerOf(i.target);
      return to === "outside" || !ALLOWED[from].includes(to);
    }).map((i) => `${i.from} → ${i.specifier}`);
    expect(upward).toEqual([]);
  });

  it("the core imports no Cloudflare runtime module", () => {
    const runtime = IMPORTS.filter(
      (i) => layerOf(i.from) === "shared" && /^(cloudflare:|hono|@cloudflare\/)/.test(i.specifier),
    ).map((i) => `${i.from} → ${i.specifier}`);
    expect(runtime).toEqual([]);
  });

  it("a module of the core imports another one only through its index.ts", () => {
    const moduleOf = (path: string) => path.split("/")[1];
    const intoInternals = IMPORTS.filter(
      (i) =>
        i.target?.startsWith("shared/") &&
        layerOf(i.from) === "shared" &&
        moduleOf(i.from) !== moduleOf(i.target) &&
        !i.target.endsWith("/index.ts"),
    ).map((i) => `${i.from} → ${i.specifier}`);
    expect(intoInternals).toEqual([]);
  });

  it("the edge and the objects reach the core only through module entry files", () => {
    const intoInternals = IMPORTS.filter(
      (i) =>
        i.target?.startsWith("shared/") &&
        layerOf(i.from) !== "shared" &&
        !/^shared\/[^/]+\/index\.ts$/.test(i.target),
    ).map((i) => `${i.from} → ${i.specifier}`);
    expect(intoInternals).toEqual([]);
  });
});
