import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";

/**
 * A hook's templates (design §12): literal text with `{{body.path.to.field}}` and
 * `{{headers.name}}` placeholders over a delivery. A path walks objects by key and arrays by
 * index; `{{body}}` is the whole body. A string value is inserted as it is, anything else as
 * JSON.
 */
export type TemplatePart = string | { root: "body" | "headers"; path: string[] };

export interface Template {
  parts: TemplatePart[];
}

export class TemplateError extends Error {
  override readonly name = "TemplateError";
}

/** What a template reads: the parsed body and the headers by lowercase name. */
export interface TemplateScope {
  body: unknown;
  headers: Readonly<Record<string, string>>;
}

const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;
const SEGMENT = /^[A-Za-z0-9_-]+$/;

/** Parses `source`; throws `TemplateError` naming the first placeholder it cannot read. */
export function parseTemplate(source: string): Template {
  const parts: TemplatePart[] = [];
  let last = 0;
  for (const match of source.matchAll(PLACEHOLDER)) {
    const literal = source.slice(last, match.index);
    if (literal.includes("{{") || literal.includes("}}")) {
      throw new TemplateError(`an unclosed placeholder before "${match[0]}"`);
    }
    if (literal !== "") parts.push(literal);
    parts.push(placeholder(match[1] ?? ""));
    last = match.index + match[0].length;
  }
  const rest = source.slice(last);
  if (rest.includes("{{") || rest.includes("}}")) {
    throw new TemplateError("an unclosed placeholder");
  }
  if (rest !== "") parts.push(rest);
  return { parts };
}

function placeholder(inner: string): TemplatePart {
  const [root, ...path] = inner.split(".");
  if (root !== "body" && root !== "headers") {
    throw new TemplateError(`"{{${inner}}}" reads neither body nor headers`);
  }
  if (path.some((segment) => !SEGMENT.test(segment))) {
    throw new TemplateError(`"{{${inner}}}" has an empty or unreadable path segment`);
  }
  if (root === "headers" && path.length !== 1) {
    throw new TemplateError(`"{{${inner}}}" names one header, as {{headers.name}}`);
  }
  return root === "headers" ? { root, path: [(path[0] ?? "").toLowerCase()] } : { root, path };
}

/** The value at `path` under `value`, or undefined when a step is missing. */
function valueAt(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const segment of path) {
    if (Array.isArray(current) && /^\d+$/.test(segment)) current = current[Number(segment)];
    else if (current !== null && typeof current === "object" && Object.hasOwn(current, segment)) {
      current = (current as Record<string, unknown>)[segment];
    } else return undefined;
  }
  return current;
}

function text(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/**
 * The template over `scope`. With `required`, a placeholder whose value is missing (or null)
 * makes the result undefined, naming the first such placeholder; otherwise it renders as "".
 */
export function renderTemplate(
  template: Template,
  scope: TemplateScope,
  required = false,
): { text: string; missing?: undefined } | { text?: undefined; missing: string } {
  let out = "";
  for (const part of template.parts) {
    if (typeof part === "string") {
      out += part;
      continue;
    }
    const value =
      part.root === "body" ? valueAt(scope.body, part.path) : scope.headers[part.path[0] ?? ""];
    if (value === undefined || value === null) {
      if (required) return { missing: `{{${[part.root, ...part.path].join(".")}}}` };
      continue;
    }
    out += text(value);
  }
  return { text: out };
}

/** A thread id a template renders is at most this long. */
const ID_MAX_CHARS = 64;
/** A long id keeps this much of its start, then `_` and a digest of the whole. */
const KEPT_PREFIX = 40;

/**
 * A thread id from rendered text, within the id rules (1-64 of `[A-Za-z0-9_-]`): each other
 * character becomes `_`; a longer result keeps its first 40 characters, then `_` and 23 hex
 * characters of the SHA-256 of the rendered text, so long ids that share a start stay apart.
 * Undefined for an empty text.
 */
export function safeThreadId(rendered: string): string | undefined {
  if (rendered === "") return undefined;
  const safe = rendered.replace(/[^A-Za-z0-9_-]/gu, "_");
  if (safe.length <= ID_MAX_CHARS) return safe;
  const digest = bytesToHex(sha256(utf8ToBytes(rendered))).slice(0, ID_MAX_CHARS - KEPT_PREFIX - 1);
  return `${safe.slice(0, KEPT_PREFIX)}_${digest}`;
}
