/**
 * fast-check arbitraries from JSON Schema 2020-12, as the OpenAPI document writes its request
 * schemas (`type`, `properties`/`required`/`additionalProperties`, `propertyNames`, `items` with
 * `minItems`/`maxItems`, `pattern`, `minLength`/`maxLength`, `enum`, `const`, numeric bounds,
 * `anyOf`/`oneOf`, and `$ref` into `#/components/schemas`). Values are small: arrays hold at most
 * three items unless the schema needs more, strings are short, so a fuzz run stays fast; the
 * caller adds the large and malformed variants.
 */
import fc from "fast-check";

export type JsonSchema = Record<string, unknown>;

export interface SchemaArbitraryOptions {
  /** Named schemas that `$ref`s point at (`#/components/schemas/NAME`). */
  components: Record<string, JsonSchema>;
  /**
   * The arbitrary of a property of this name, given the one its schema implies: to mix in values
   * worth trying (known model slugs, ids that exist, near misses) or to replace it where the
   * schema cannot say what is valid (a refinement). Undefined keeps the schema's.
   */
  hints?: (
    property: string,
    fromSchema: fc.Arbitrary<unknown>,
  ) => fc.Arbitrary<unknown> | undefined;
}

const REF_PREFIX = "#/components/schemas/";

/** An arbitrary of values the schema describes (with the hints mixed in). */
export function arbitraryOf(
  schema: JsonSchema,
  options: SchemaArbitraryOptions,
): fc.Arbitrary<unknown> {
  return build(schema, options, 0);
}

function build(
  schema: JsonSchema,
  options: SchemaArbitraryOptions,
  depth: number,
): fc.Arbitrary<unknown> {
  if (typeof schema.$ref === "string") {
    const name = schema.$ref.slice(REF_PREFIX.length);
    const target = options.components[name];
    if (!schema.$ref.startsWith(REF_PREFIX) || target === undefined) {
      throw new Error(`unresolved $ref ${schema.$ref}`);
    }
    return build(target, options, depth + 1);
  }
  if ("const" in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  const branches = (schema.anyOf ?? (schema.type === undefined ? schema.oneOf : undefined)) as
    | JsonSchema[]
    | undefined;
  if (branches !== undefined) return fc.oneof(...branches.map((b) => build(b, options, depth + 1)));
  if (Array.isArray(schema.type)) {
    return fc.oneof(...schema.type.map((type) => build({ ...schema, type }, options, depth + 1)));
  }
  switch (schema.type) {
    case "object":
      return objectOf(schema, options, depth);
    case "array":
      return arrayOf(schema, options, depth);
    case "string":
      return stringOf(schema);
    case "integer":
    case "number":
      return numberOf(schema);
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    case undefined:
      // `{}`: any JSON value, kept shallow.
      return fc.jsonValue({ maxDepth: 3 });
    default:
      throw new Error(`unsupported schema type ${String(schema.type)}`);
  }
}

function objectOf(schema: JsonSchema, options: SchemaArbitraryOptions, depth: number) {
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  // `oneOf: [{required: [a]}, {required: [b]}]`: exactly one of the alternatives is required.
  const alternatives = ((schema.oneOf ?? []) as JsonSchema[]).map(
    (branch) => (branch.required ?? []) as string[],
  );
  const required = new Set((schema.required ?? []) as string[]);
  const member = (name: string, property: JsonSchema) => {
    const fromSchema = build(property, options, depth + 1);
    return options.hints?.(name, fromSchema) ?? fromSchema;
  };
  const fixed = Object.entries(properties).filter(([name]) =>
    alternatives.every((alt) => !alt.includes(name)),
  );
  const record = fc.record(
    Object.fromEntries(fixed.map(([name, property]) => [name, member(name, property)])),
    { requiredKeys: fixed.map(([name]) => name).filter((name) => required.has(name)) },
  );
  const extra =
    typeof schema.additionalProperties === "object" && schema.additionalProperties !== null
      ? fc.dictionary(
          // The schemas refuse a `__proto__` key (and metadata `constructor` and `prototype`),
          // which the document's JSON Schema does not say.
          stringOf((schema.propertyNames ?? { type: "string" }) as JsonSchema).filter(
            (key) => !RESERVED_KEYS.has(key),
          ),
          build(schema.additionalProperties as JsonSchema, options, depth + 1),
          { maxKeys: 3 },
        )
      : fc.constant({});
  const chosen =
    alternatives.length === 0
      ? fc.constant({})
      : fc
          .constantFrom(...alternatives)
          .chain((names) =>
            fc.record(
              Object.fromEntries(names.map((name) => [name, member(name, properties[name] ?? {})])),
            ),
          );
  return fc
    .tuple(record, extra, chosen)
    .map(([known, more, one]) => ({ ...more, ...known, ...one }) as Record<string, unknown>);
}

function arrayOf(schema: JsonSchema, options: SchemaArbitraryOptions, depth: number) {
  const minLength = Number(schema.minItems ?? 0);
  const maxLength = Math.min(Number(schema.maxItems ?? Number.POSITIVE_INFINITY), minLength + 3);
  const items = (schema.items ?? {}) as JsonSchema;
  return fc.array(build(items, options, depth + 1), { minLength, maxLength });
}

const RESERVED_KEYS: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);

function stringOf(schema: JsonSchema): fc.Arbitrary<string> {
  if (typeof schema.pattern === "string") return fc.stringMatching(new RegExp(schema.pattern));
  const minLength = Number(schema.minLength ?? 0);
  const maxLength = Math.min(Number(schema.maxLength ?? Number.POSITIVE_INFINITY), minLength + 24);
  return fc.string({ minLength, maxLength, unit: "grapheme" });
}

function numberOf(schema: JsonSchema): fc.Arbitrary<number> {
  const integer = schema.type === "integer";
  const exclusive = schema.exclusiveMinimum as number | undefined;
  const min =
    (schema.minimum as number | undefined) ?? (exclusive === undefined ? -1e6 : exclusive);
  const max = Math.min((schema.maximum as number | undefined) ?? 1e6, 1e6);
  if (integer) {
    const low = exclusive === undefined ? Math.ceil(min) : Math.floor(exclusive) + 1;
    return fc.integer({ min: low, max: Math.max(low, Math.floor(max)) });
  }
  return fc
    .double({
      min,
      max,
      noNaN: true,
      noDefaultInfinity: true,
      minExcluded: exclusive !== undefined,
    })
    .filter((n) => exclusive === undefined || n > exclusive);
}
