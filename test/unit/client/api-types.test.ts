/**
 * The CI drift check: the checked-in client types are exactly what the generator makes from the
 * code's own document now. Nothing here names a route, so a new one needs only a rerun.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import {
  CLIENT_TYPES_PATH,
  GENERATE_COMMAND,
  generateClientTypes,
} from "../../../scripts/generate-client-types.ts";
import { buildOpenApiDocument } from "../../../worker/openapi.ts";

const ROOT = resolve(import.meta.dirname, "../../..");

describe("shared/client/api-types.ts", () => {
  it("is what the generator makes from buildOpenApiDocument()", async () => {
    const generated = await generateClientTypes(buildOpenApiDocument());
    const checkedIn = readFileSync(resolve(ROOT, CLIENT_TYPES_PATH), "utf8");
    // One boolean first: a 400 kB diff would bury the message.
    expect(
      checkedIn === generated,
      `${CLIENT_TYPES_PATH} is out of date with the OpenAPI document: run \`${GENERATE_COMMAND}\` and commit the result`,
    ).toBe(true);
  });

  it("says it is generated and by which command", () => {
    const head = readFileSync(resolve(ROOT, CLIENT_TYPES_PATH), "utf8").slice(0, 400);
    expect(head).toContain("GENERATED FILE");
    expect(head).toContain(GENERATE_COMMAND);
  });
});
