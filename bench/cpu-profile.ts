/**
 * Reading V8 CPU profiles taken over the inspector (`Profiler.stop`): the time each sample counts
 * for, and self time grouped by any key (a function, a source file read through a source map).
 */
import { readFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { dirname, relative, resolve } from "node:path";

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Nodes that are no JavaScript of the worker: the sampler's idle time and its root. */
export const isIdle = (node: ProfileNode) => node.callFrame.functionName === "(idle)";

/**
 * Milliseconds per sampled node. A sample counts for at most `maxGapUs`: a gap far past the
 * interval means the sampler was not scheduled (a busy machine), not that the sampled function
 * ran that long (a long call is sampled many times).
 */
export function sampledTimes(profile: CpuProfile, maxGapUs: number): Map<number, number> {
  const sampled = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    const gap = Math.min(profile.timeDeltas[i] ?? 0, maxGapUs);
    sampled.set(id, (sampled.get(id) ?? 0) + gap / 1000);
  });
  return sampled;
}

/** Self time (ms) of the non-idle samples, summed by `keyOf` of the sampled node. */
export function selfTimeBy(
  profile: CpuProfile,
  maxGapUs: number,
  keyOf: (node: ProfileNode) => string,
): Map<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const out = new Map<string, number>();
  for (const [id, time] of sampledTimes(profile, maxGapUs)) {
    const node = byId.get(id);
    if (!node || isIdle(node)) continue;
    const key = keyOf(node);
    out.set(key, (out.get(key) ?? 0) + time);
  }
  return out;
}

/**
 * The original source file of a node's position in a bundle, through the bundle's source map, as
 * a path relative to `root`; V8's own entries (`(program)`, `(garbage collector)`) and the
 * runtime's modules keep their name.
 */
export function sourceFileOf(bundleName: string, sourceMapPath: string, root: string) {
  const map = new SourceMap(JSON.parse(readFileSync(sourceMapPath, "utf8")));
  return (node: ProfileNode): string => {
    const { url, functionName, lineNumber, columnNumber } = node.callFrame;
    if (!url.endsWith(bundleName)) return url === "" ? functionName : url;
    const entry = map.findEntry(lineNumber, columnNumber) as { originalSource?: string };
    // A sample in a module's top level is charged to the module function, which starts at the
    // bundle's first byte, before any mapping.
    if (entry.originalSource === undefined) return `${bundleName} (top level)`;
    return relative(root, resolve(dirname(sourceMapPath), entry.originalSource));
  };
}
