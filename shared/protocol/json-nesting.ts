import * as z from "../zod/index.ts";

/**
 * Bounds on JSON nesting (levels of objects and arrays; the outermost object is level 1).
 *
 * Every JSON text that enters from outside (a request body, an imported rollout line, a provider
 * event) nests at most `MAX_JSON_DEPTH` levels, and the free-form values inside it have tighter
 * bounds of their own, so that every line Spindle writes from what it accepted is itself within
 * `MAX_JSON_DEPTH`: what was accepted always decodes again. The code that later reads, copies,
 * encodes and fingerprints these values (zod, `structuredClone`, `JSON.stringify`, merge patches)
 * recurses, so it is only ever given bounded depth; the bounds themselves are measured without
 * recursion, whatever the depth of the input.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * A history item (a `ResponseItem`): a compacted line's replacement history holds items four
 * levels down, so an item keeps well clear of the line's own bound.
 */
export const MAX_ITEM_DEPTH = 48;

/** A tool's `parameters` (a JSON Schema): written one level deeper than a create body has it. */
export const MAX_TOOL_PARAMETERS_DEPTH = 32;

/** A path into a JSON value: object keys and array indices. */
export type JsonPath = (string | number)[];

interface Frame {
  value: object;
  depth: number;
  parent: Frame | undefined;
  key: string | number;
}

/**
 * The path of the first object or array (in document order) that lies deeper than `maxDepth`
 * levels in `value`, or undefined when none does. Iterative: any depth is measured.
 */
export function pathBeyondDepth(value: unknown, maxDepth: number): JsonPath | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const stack: Frame[] = [{ value, depth: 1, parent: undefined, key: "" }];
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    if (frame.depth > maxDepth) return pathOf(frame);
    const members = Array.isArray(frame.value)
      ? frame.value.map((member, index): [number, unknown] => [index, member])
      : Object.entries(frame.value);
    // Pushed last to first, so the first member is looked at first.
    for (let i = members.length - 1; i >= 0; i--) {
      const [key, member] = members[i] as [string | number, unknown];
      if (typeof member === "object" && member !== null) {
        stack.push({ value: member, depth: frame.depth + 1, parent: frame, key });
      }
    }
  }
  return undefined;
}

function pathOf(frame: Frame): JsonPath {
  const path: JsonPath = [];
  for (let at: Frame | undefined = frame; at?.parent !== undefined; at = at.parent) {
    path.push(at.key);
  }
  return path.reverse();
}

/** RFC 6901: each key after a `/`, with `~` written `~0` and `/` written `~1`. */
export function jsonPointer(path: readonly PropertyKey[]): string {
  return path.map((key) => `/${String(key).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

/** JSON nested deeper than allowed; `path` is where the first level past the bound begins. */
export class JsonNestingError extends Error {
  constructor(
    readonly path: JsonPath,
    readonly maxDepth: number,
  ) {
    super(`nested deeper than ${maxDepth} levels (at ${jsonPointer(path) || "/"})`);
    this.name = "JsonNestingError";
  }
}

/**
 * `JSON.parse` of text from outside, refused (`JsonNestingError`) when it nests deeper than
 * `maxDepth`. V8's parser is iterative, so parsing first is safe at any depth; the bound is then
 * measured on the value. A syntax error throws `SyntaxError` as `JSON.parse` does.
 */
export function parseJsonWithin(text: string, maxDepth = MAX_JSON_DEPTH): unknown {
  const value: unknown = JSON.parse(text);
  const path = pathBeyondDepth(value, maxDepth);
  if (path !== undefined) throw new JsonNestingError(path, maxDepth);
  return value;
}

/** A zod check: the value nests at most `maxDepth` levels; the issue points at the first excess. */
export function nestedWithin(maxDepth: number, what: string) {
  return z.superRefine((value: unknown, ctx) => {
    const path = pathBeyondDepth(value, maxDepth);
    if (path !== undefined) {
      ctx.addIssue({
        code: "custom",
        path,
        message: `${what} nests deeper than ${maxDepth} levels`,
      });
    }
  });
}
