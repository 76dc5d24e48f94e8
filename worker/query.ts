import type { FieldError } from "../shared/api/index.ts";
import { ApiError } from "./errors.ts";

/** `name[key]`: one level of a deep object (OpenAPI `style: deepObject`, `metadata[team]`). */
const DEEP_NAME = /^([A-Za-z_]+)\[([^[\]]*)\]$/;

type Folded = Record<string, string | Record<string, string>>;

/**
 * A request's query parameters as a route's schema reads them: `name=value`, and
 * `name[key]=value` folded into `{name: {key: value}}`. The objects have no prototype, so no
 * parameter reaches Object.prototype; the schema refuses names it does not know. Refused here,
 * each at its name as sent: a parameter sent twice (or both as `name` and `name[key]`), and
 * brackets other than one `name[key]` (`metadata[a][b]`, `metadata[`).
 */
export function queryOf(params: URLSearchParams): Folded {
  const query: Folded = Object.create(null);
  const errors: FieldError[] = [];
  const refuse = (path: string, message: string) => {
    if (!errors.some((e) => e.path === path)) errors.push({ path, message });
  };
  const seen = new Set<string>();
  for (const [name, value] of params) {
    if (seen.has(name)) {
      refuse(name, "Sent more than once");
      continue;
    }
    seen.add(name);
    const [, outer, key] = DEEP_NAME.exec(name) ?? [];
    if (outer !== undefined && key !== undefined) {
      query[outer] ??= Object.create(null) as Record<string, string>;
      const object = query[outer];
      // Without a prototype, `__proto__` is an own key like any other (the schema refuses it).
      if (typeof object === "string") refuse(name, `Sent beside ${outer}=`);
      else object[key] = value;
    } else if (/[[\]]/.test(name)) {
      refuse(name, "Brackets hold one key: name[key]=value");
    } else if (typeof query[name] === "object") {
      refuse(name, `Sent beside ${name}[key]=`);
    } else {
      query[name] = value;
    }
  }
  if (errors.length > 0) {
    throw new ApiError("invalid_request", "The query is invalid.", { errors });
  }
  return query;
}
