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

/** The room of a file under `durable-objects/` (`thread`, `tenant`, `common`, or the face). */
function roomOf(path: string): string | undefined {
  const [top, room] = path.split("/");
  if (top !== "durable-objects" || room === undefined) return undefined;
  return room.endsWith(".ts") ? "face" : room;
}

/** The import cycles among `files` (type-only imports count): each cycle's files, in order. */
function cyclesAmong(files: readonly string[], imports: readonly Import[]): string[][] {
  const edges = new Map<string, string[]>(files.map((f) => [f, []]));
  for (const i of imports) {
    if (i.target && edges.has(i.from) && edges.has(i.target)) edges.get(i.from)?.push(i.target);
  }
  const cycles: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (file: string) => {
    state.set(file, "open");
    path.push(file);
    for (const next of edges.get(file) ?? []) {
      if (state.get(next) === "open") cycles.push(path.slice(path.indexOf(next)));
      else if (state.get(next) === undefined) visit(next);
    }
    path.pop();
    state.set(file, "done");
  };
  for (const file of files) if (state.get(file) === undefined) visit(file);
  return cycles;
}

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

  it("the Thread's and the Tenant's rooms never import each other, and the floor neither", () => {
    const crossing = IMPORTS.filter((i) => {
      const from = roomOf(i.from);
      const to = i.target && roomOf(i.target);
      if (from === undefined || to === undefined || from === to) return false;
      return (
        from === "common" ||
        (from === "thread" && to === "tenant") ||
        (from === "tenant" && to === "thread")
      );
    }).map((i) => `${i.from} → ${i.specifier}`);
    expect(
      IMPORTS.some((i) => roomOf(i.from) === "thread" && roomOf(i.target ?? "") === "common"),
    ).toBe(true);
    expect(crossing).toEqual([]);
  });

  it("the worker reaches the Durable Objects only through their face, durable-objects/index.ts", () => {
    const past = IMPORTS.filter(
      (i) =>
        layerOf(i.from) === "worker" &&
        i.target?.startsWith("durable-objects/") &&
        i.target !== "durable-objects/index.ts",
    ).map((i) => `${i.from} → ${i.specifier}`);
    expect(IMPORTS.some((i) => i.target === "durable-objects/index.ts")).toBe(true);
    expect(past).toEqual([]);
  });

  it("no import cycle inside durable-objects/ (type-only imports count)", () => {
    const files = FILES.filter((f) => layerOf(f) === "durable-objects");
    expect(
      cyclesAmong(
        ["a.ts", "b.ts"],
        [
          { from: "a.ts", specifier: "./b.ts", target: "b.ts" },
          { from: "b.ts", specifier: "./a.ts", target: "a.ts" },
        ],
      ),
    ).toEqual([["a.ts", "b.ts"]]);
    expect(cyclesAmong(files, IMPORTS).map((c) => c.join(" → "))).toEqual([]);
  });
});
