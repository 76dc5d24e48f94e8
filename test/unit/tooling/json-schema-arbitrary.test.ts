import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  CreateThreadBodySchema,
  EmptyBodySchema,
  ForkBodySchema,
  InjectBodySchema,
  RollbackBodySchema,
  StartTurnBodySchema,
  SteerBodySchema,
  SubmitOutputsBodySchema,
} from "../../../shared/api/index.ts";
import type * as z from "../../../shared/zod/index.ts";
import { buildOpenApiDocument } from "../../../worker/openapi.ts";
import { arbitraryOf, type JsonSchema } from "../../helpers/json-schema-arbitrary.ts";

const document = buildOpenApiDocument();
const components = document.components.schemas as Record<string, JsonSchema>;

/** Checks JSON Schema cannot express, given values that pass them. */
const hints = (property: string) => {
  if (property === "image_url") return fc.constant("https://example.test/cat.png");
  if (property === "call_id") return fc.uuid();
  return undefined;
};

const BODIES: [string, z.ZodMiniType][] = [
  ["CreateThreadBody", CreateThreadBodySchema],
  ["StartTurnBody", StartTurnBodySchema],
  ["SubmitOutputsBody", SubmitOutputsBodySchema],
  ["SteerBody", SteerBodySchema],
  ["EmptyBody", EmptyBodySchema],
  ["RollbackBody", RollbackBodySchema],
  ["ForkBody", ForkBodySchema],
  ["InjectBody", InjectBodySchema],
];

describe("arbitraries from the OpenAPI document's request schemas", () => {
  it.each(BODIES)(
    "every %s generated from the document parses with the worker's schema",
    (name, schema) => {
      const component = components[name];
      if (component === undefined) throw new Error(`no component ${name}`);
      fc.assert(
        fc.property(arbitraryOf(component, { components, hints }), (value) => {
          const parsed = schema.safeParse(value);
          expect(parsed.error?.issues ?? []).toEqual([]);
        }),
        { numRuns: 200 },
      );
    },
  );
});
