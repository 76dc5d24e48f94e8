import { describe, expect, it } from "vitest";
import { PROBLEM_CODES } from "../../../shared/api/index.ts";
import { WEBHOOK_EVENT_TYPES } from "../../../shared/webhooks/index.ts";
import * as z from "../../../shared/zod/index.ts";
import { createApp } from "../../../worker/app.ts";
import { buildOpenApiDocument, type OpenApiDocument } from "../../../worker/openapi.ts";
import { API_ROUTES, type RouteSpec } from "../../../worker/routes.ts";
import { setup } from "./fake-thread.ts";

const doc = buildOpenApiDocument();
const routes = Object.entries(API_ROUTES as Record<string, RouteSpec>);
/** The OpenAI-compatible surface (design §17): its errors are OpenAI's shape, not problems. */
const openAIOperations = new Set(
  routes
    .filter(([, route]) => route.dialect === "openai")
    .map(([, route]) => `${route.method.toUpperCase()} ${route.path}`),
);
const isOpenAI = (method: string, path: string) =>
  openAIOperations.has(`${method.toUpperCase()} ${path}`);

type Operation = Record<string, unknown> & {
  operationId: string;
  parameters?: { name?: string; in?: string; required?: boolean; $ref?: string }[];
  requestBody?: { required: boolean; content: Record<string, { schema: { $ref?: string } }> };
  responses: Record<string, { content?: Record<string, { schema: Record<string, unknown> }> }>;
  security?: unknown[];
};

function operations(document: OpenApiDocument): [string, string, Operation][] {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]): [string, string, Operation] => [
      path,
      method,
      op as Operation,
    ]),
  );
}

/** Every `$ref` anywhere in a JSON value. */
function refsIn(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(refsIn);
  if (typeof value !== "object" || value === null) return [];
  return Object.entries(value).flatMap(([key, inner]) =>
    key === "$ref" && typeof inner === "string" ? [inner] : refsIn(inner),
  );
}

const component = (name: string) => doc.components.schemas[name] as Record<string, unknown>;

describe("the OpenAPI document", () => {
  it("is OpenAPI 3.1", () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info.version).toBe("1");
  });

  it("documents every route the app serves, with its method, and nothing else", () => {
    const app = createApp();
    const served = new Set(
      app.routes
        .filter((route) => route.method !== "ALL")
        .map((route) => `${route.method} ${route.path.replace(/:(\w+)/g, "{$1}")}`),
    );
    const documented = new Set(
      operations(doc).map(([path, method]) => `${method.toUpperCase()} ${path}`),
    );
    expect(documented).toEqual(served);
    // The design §7 table, plus restore (an operator route from the DO work); the OpenAI
    // surface's routes are its own tests' business.
    expect([...documented].filter((op) => !openAIOperations.has(op)).sort()).toEqual(
      [
        "GET /healthz",
        "GET /openapi.json",
        "POST /v1/threads",
        "POST /v1/threads/import",
        "GET /v1/threads/{id}",
        "DELETE /v1/threads/{id}",
        "POST /v1/threads/{id}/turns",
        "GET /v1/threads/{id}/turns",
        "GET /v1/threads/{id}/turns/{turn}",
        "GET /v1/threads/{id}/turns/{turn}/requests",
        "POST /v1/threads/{id}/turns/{turn}/outputs",
        "POST /v1/threads/{id}/turns/{turn}/steer",
        "POST /v1/threads/{id}/turns/{turn}/interrupt",
        "GET /v1/threads/{id}/events",
        "POST /v1/threads/{id}/rollback",
        "POST /v1/threads/{id}/fork",
        "POST /v1/threads/{id}/compact",
        "POST /v1/threads/{id}/inject",
        "GET /v1/threads/{id}/history",
        "GET /v1/threads/{id}/prompt",
        "GET /v1/threads/{id}/rollout",
        "POST /v1/threads/{id}/restore",
        "GET /v1/threads",
        "PATCH /v1/threads/{id}",
        "GET /v1/usage",
        "POST /v1/keys",
        "GET /v1/keys",
        "DELETE /v1/keys/{key_id}",
        "POST /v1/admin/tenants",
        "GET /v1/admin/tenants",
        "GET /v1/admin/tenants/{tenant}",
        "PATCH /v1/admin/tenants/{tenant}",
        "DELETE /v1/admin/tenants/{tenant}",
        "POST /v1/admin/tenants/{tenant}/keys",
        "GET /v1/admin/tenants/{tenant}/keys",
        "DELETE /v1/admin/tenants/{tenant}/keys/{key_id}",
        "POST /v1/hooks",
        "GET /v1/hooks",
        "GET /v1/hooks/{id}",
        "DELETE /v1/hooks/{id}",
        "POST /v1/hooks/{id}/rotate-secret",
        "GET /v1/hooks/{id}/deliveries",
        "POST /hooks/{tenant}/{hook}",
        "POST /v1/webhook-endpoints",
        "GET /v1/webhook-endpoints",
        "GET /v1/webhook-endpoints/{id}",
        "PATCH /v1/webhook-endpoints/{id}",
        "DELETE /v1/webhook-endpoints/{id}",
        "POST /v1/webhook-endpoints/{id}/rotate-secret",
        "POST /v1/webhook-endpoints/{id}/test",
        "GET /v1/webhook-endpoints/{id}/deliveries",
        "POST /v1/mcp-servers",
        "GET /v1/mcp-servers",
        "GET /v1/mcp-servers/{label}",
        "PATCH /v1/mcp-servers/{label}",
        "DELETE /v1/mcp-servers/{label}",
      ].sort(),
    );
  });

  it("every $ref points at a component that exists", () => {
    const refs = refsIn(doc);
    expect(refs.length).toBeGreaterThan(30);
    const missing = refs.filter((ref) => {
      const [, kind, name] = /^#\/components\/(schemas|parameters|headers)\/(.+)$/.exec(ref) ?? [];
      if (kind === undefined || name === undefined) return true;
      return !(name in doc.components[kind as "schemas" | "parameters" | "headers"]);
    });
    expect(missing).toEqual([]);
  });

  it("operation ids are unique and each path parameter is declared, required", () => {
    const ids = operations(doc).map(([, , op]) => op.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const [path, , op] of operations(doc)) {
      const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      const declared = (op.parameters ?? []).filter((p) => p.in === "path");
      expect(declared.map((p) => p.name)).toEqual(inPath);
      expect(declared.every((p) => p.required)).toBe(true);
    }
  });

  it("every operation has a success response and problem responses whose codes are known", () => {
    for (const [path, method, op] of operations(doc)) {
      const statuses = Object.keys(op.responses);
      expect(
        statuses.some((s) => s.startsWith("2")),
        `${method} ${path}`,
      ).toBe(true);
      expect(statuses).toContain("500");
      if (isOpenAI(method, path)) {
        for (const status of statuses.filter((s) => Number(s) >= 400)) {
          const body = op.responses[status]?.content?.["application/json"]?.schema;
          const [ref, codes] = (body?.allOf ?? []) as [
            { $ref: string },
            { properties: { error: { properties: { code: { enum: string[] } } } } },
          ];
          expect(ref.$ref).toBe("#/components/schemas/OpenAIError");
          expect(PROBLEM_CODES).toEqual(
            expect.arrayContaining(codes.properties.error.properties.code.enum),
          );
        }
        continue;
      }
      for (const status of statuses.filter((s) => Number(s) >= 400)) {
        const problem = op.responses[status]?.content?.["application/problem+json"]?.schema;
        const [ref, codes] = (problem?.allOf ?? []) as [
          { $ref: string },
          { properties: { code: { enum: string[] } } },
        ];
        expect(ref.$ref).toBe("#/components/schemas/Problem");
        expect(PROBLEM_CODES).toEqual(expect.arrayContaining(codes.properties.code.enum));
      }
    }
    expect((component("Problem").properties as Record<string, unknown>).code).toEqual({
      type: "string",
      enum: [...PROBLEM_CODES],
    });
  });

  it("each operation names its key: none, an admin key, or a tenant key with the scope it needs", () => {
    expect(doc.security).toEqual([{ apiKey: [] }]);
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: "http", scheme: "bearer" });
    expect(doc.components.securitySchemes.adminKey).toMatchObject({
      type: "http",
      scheme: "bearer",
    });
    const byKey = new Map<string, string[]>();
    for (const [path, method, op] of operations(doc)) {
      const name = JSON.stringify(op.security);
      byKey.set(name, [...(byKey.get(name) ?? []), `${method.toUpperCase()} ${path}`]);
    }
    // The hook's sender signs its delivery instead.
    expect(byKey.get("[]")).toEqual([
      "GET /healthz",
      "GET /openapi.json",
      "POST /hooks/{tenant}/{hook}",
    ]);
    expect(byKey.get(JSON.stringify([{ adminKey: [] }]))).toEqual([
      "POST /v1/admin/tenants",
      "GET /v1/admin/tenants",
      "GET /v1/admin/tenants/{tenant}",
      "PATCH /v1/admin/tenants/{tenant}",
      "DELETE /v1/admin/tenants/{tenant}",
      "POST /v1/admin/tenants/{tenant}/keys",
      "GET /v1/admin/tenants/{tenant}/keys",
      "DELETE /v1/admin/tenants/{tenant}/keys/{key_id}",
    ]);
    expect(byKey.get(JSON.stringify([{ apiKey: ["usage"] }]))).toEqual(["GET /v1/usage"]);
    expect(byKey.get(JSON.stringify([{ apiKey: ["keys"] }]))).toEqual([
      "POST /v1/keys",
      "GET /v1/keys",
      "DELETE /v1/keys/{key_id}",
    ]);
    const threads = (byKey.get(JSON.stringify([{ apiKey: ["threads"] }])) ?? []).filter(
      (op) => !openAIOperations.has(op),
    );
    expect(threads).toHaveLength(22);
    expect(threads.every((op) => op.includes(" /v1/threads"))).toBe(true);
    const hooks = byKey.get(JSON.stringify([{ apiKey: ["hooks"] }])) ?? [];
    expect(hooks).toHaveLength(14);
    expect(hooks.every((op) => /^\S+ \/v1\/(hooks|webhook-endpoints)/.test(op))).toBe(true);
    expect(byKey.get(JSON.stringify([{ apiKey: ["tools"] }]))).toEqual([
      "POST /v1/mcp-servers",
      "GET /v1/mcp-servers",
      "GET /v1/mcp-servers/{label}",
      "PATCH /v1/mcp-servers/{label}",
      "DELETE /v1/mcp-servers/{label}",
    ]);
    expect([...byKey.keys()]).toHaveLength(7);
  });

  it("documents each outbound event under webhooks, with the Standard Webhooks headers", () => {
    const events = Object.keys(doc.webhooks).sort();
    expect(events).toEqual([...WEBHOOK_EVENT_TYPES].sort());
    const completed = doc.webhooks["turn.completed"]?.post as Operation;
    expect(completed.parameters?.map((p) => [p.name, p.in, p.required])).toEqual([
      ["webhook-id", "header", true],
      ["webhook-timestamp", "header", true],
      ["webhook-signature", "header", true],
    ]);
    expect(completed.requestBody?.content["application/json"]?.schema).toEqual({
      $ref: "#/components/schemas/WebhookEvent",
    });
  });

  it("the metadata filter of the listing is a deep-object query parameter", () => {
    const list = doc.paths["/v1/threads"]?.get as Operation;
    expect(list.parameters?.find((p) => p.name === "metadata")).toMatchObject({
      in: "query",
      required: false,
      style: "deepObject",
      explode: true,
      schema: { type: "object", additionalProperties: { type: "string", maxLength: 512 } },
    });
  });

  it("each route's own error codes are documented under their status", () => {
    const steer = doc.paths["/v1/threads/{id}/turns/{turn}/steer"]?.post as Operation;
    const conflict = steer.responses["409"]?.content?.["application/problem+json"]?.schema;
    expect(conflict?.allOf).toEqual([
      { $ref: "#/components/schemas/Problem" },
      {
        type: "object",
        properties: {
          code: { enum: ["turn_mismatch", "turn_not_steerable", "idempotency_key_in_use"] },
        },
      },
    ]);
    const imports = doc.paths["/v1/threads/import"]?.post as Operation;
    expect(Object.keys(imports.responses)).toEqual([
      "201",
      "400",
      "401",
      "403",
      "404",
      "409",
      "413",
      "415",
      "422",
      "429",
      "500",
    ]);
    expect(imports.responses["415"]).toMatchObject({
      headers: { "Accept-Post": expect.anything() },
    });
  });

  it("request bodies are the schemas that validate them, by their input side", () => {
    for (const [, route] of routes) {
      if (route.body?.kind !== "json") continue;
      const op = doc.paths[route.path]?.[route.method] as Operation;
      const ref = op.requestBody?.content["application/json"]?.schema.$ref ?? "";
      const documented = component(ref.replace("#/components/schemas/", ""));
      const schema = route.body.schema as z.ZodMiniObject;
      expect(Object.keys(documented.properties as object)).toEqual(Object.keys(schema.shape));
      // A body that may be empty is optional; one with a required field is not.
      expect(op.requestBody?.required).toBe(!schema.safeParse({}).success);
    }
    // Defaults make a field optional for the client.
    expect(component("StartTurnBody").required).toEqual(["input"]);
    expect(component("InjectBody").oneOf).toEqual([
      { required: ["text"] },
      { required: ["items"] },
    ]);
  });

  it("query and header parameters come from the validating schemas", () => {
    const events = doc.paths["/v1/threads/{id}/events"]?.get as Operation;
    expect(
      events.parameters
        ?.filter((p) => p.name !== undefined)
        .map(({ name, in: where, required }) => [name, where, required]),
    ).toEqual([
      ["id", "path", true],
      ["after", "query", false],
      ["last-event-id", "header", false],
    ]);
    const history = doc.paths["/v1/threads/{id}/history"]?.get as Operation;
    expect(history.parameters?.find((p) => p.name === "limit")).toMatchObject({
      required: false,
      description: "Items per page: 1-1000, in decimal digits; default 100.",
      schema: { type: "integer", pattern: "^[0-9]{1,4}$", default: 100, minimum: 1, maximum: 1000 },
    });
    const turns = doc.paths["/v1/threads/{id}/turns"]?.get as Operation;
    expect(turns.parameters?.find((p) => p.name === "limit")).toMatchObject({
      required: false,
      schema: { type: "integer", default: 20, minimum: 1, maximum: 100 },
    });
  });

  it("documents each field of a turn summary", () => {
    const summary = doc.components.schemas.TurnSummary as {
      properties: Record<string, { description?: string }>;
    };
    const undocumented = Object.entries(summary.properties)
      .filter(([name, field]) => !["object", "id", "status"].includes(name) && !field.description)
      .map(([name]) => name);
    expect(undocumented).toEqual([]);
  });

  it("a number in the query or a header is an integer, with the digits pattern it is checked by", () => {
    const events = doc.paths["/v1/threads/{id}/events"]?.get as Operation;
    const schemas = Object.fromEntries(
      (events.parameters ?? []).map((p) => [p.name, (p as { schema?: unknown }).schema]),
    );
    expect(schemas.after).toEqual({ type: "integer", pattern: "^[0-9]{1,15}$" });
    expect(schemas["last-event-id"]).toEqual({ type: "integer", pattern: "^[0-9]{1,15}$" });
    // No parameter anywhere is left a string of digits.
    for (const [path, method, op] of operations(doc)) {
      for (const parameter of op.parameters ?? []) {
        const schema = (parameter as { schema?: { type?: string; pattern?: string } }).schema;
        if (schema?.pattern?.startsWith("^[0-9]")) {
          expect(schema.type, `${method} ${path} ${parameter.name}`).toBe("integer");
        }
      }
    }
  });

  it("no request schema requires a field that has a default", () => {
    const offenders: string[] = [];
    // The request bodies' components and every component they refer to.
    const queue = routes.flatMap(([, route]) => {
      if (route.body?.kind !== "json") return [];
      const op = doc.paths[route.path]?.[route.method] as Operation;
      return [op.requestBody?.content["application/json"]?.schema.$ref ?? ""];
    });
    const seen = new Set<string>();
    const visit = (value: unknown, where: string) => {
      if (typeof value !== "object" || value === null) return;
      const { properties, required, $ref } = value as {
        properties?: Record<string, { default?: unknown }>;
        required?: string[];
        $ref?: string;
      };
      if (typeof $ref === "string") queue.push($ref);
      for (const name of required ?? []) {
        if (properties?.[name]?.default !== undefined) offenders.push(`${where}.${name}`);
      }
      for (const [key, inner] of Object.entries(value)) visit(inner, `${where}/${key}`);
    };
    for (let ref = queue.pop(); ref !== undefined; ref = queue.pop()) {
      if (seen.has(ref)) continue;
      seen.add(ref);
      const name = ref.replace("#/components/schemas/", "");
      visit(component(name), name);
    }
    expect(seen).toContain("#/components/schemas/ThreadConfig");
    expect(offenders).toEqual([]);
    const onBusy = (component("StartTurnBody").properties as Record<string, unknown>).on_busy;
    expect(onBusy).toMatchObject({ default: "reject" });
  });

  it("every operation takes and every answer carries x-request-id, as the edge does", async () => {
    const { parameters, headers } = doc.components;
    expect(parameters.RequestId).toMatchObject({ name: "x-request-id", in: "header" });
    const schema = headers.RequestId?.schema as { pattern?: string } | undefined;
    const pattern = new RegExp(String(schema?.pattern));
    for (const [path, method, op] of operations(doc)) {
      const where = `${method} ${path}`;
      expect(refsIn(op.parameters), where).toContain("#/components/parameters/RequestId");
      for (const [status, response] of Object.entries(op.responses)) {
        const answer = response as { headers?: Record<string, { $ref?: string }> };
        expect(answer.headers?.["x-request-id"]?.$ref, `${where} ${status}`).toBe(
          "#/components/headers/RequestId",
        );
      }
    }
    // What the edge answers fits the documented pattern, whether it made the id or kept the client's.
    const { app, env } = setup();
    const made = await app.request("/healthz", {}, env);
    expect(made.headers.get("x-request-id")).toMatch(pattern);
    const kept = await app.request("/healthz", { headers: { "x-request-id": "trace:42" } }, env);
    expect(kept.headers.get("x-request-id")).toBe("trace:42");
    const refused = await app.request("/healthz", { headers: { "x-request-id": "a b" } }, env);
    expect(refused.headers.get("x-request-id")).not.toBe("a b");
    expect(refused.headers.get("x-request-id")).toMatch(pattern);
  });

  it("a response item is documented as parsed: compaction, and other for unknown types", () => {
    const branches = JSON.stringify(component("ResponseItem"));
    expect(branches).toContain('"const":"other"');
    expect(branches).toContain('"const":"compaction"');
    expect(branches).not.toContain("compaction_summary");
    // Response objects stay open to new fields.
    expect(component("Thread").additionalProperties).toBeUndefined();
  });

  it("streams are documented by the schema of each event or line", () => {
    const turns = doc.paths["/v1/threads/{id}/turns"]?.post as Operation;
    expect(turns.responses["200"]?.content).toEqual({
      "application/json": { schema: { $ref: "#/components/schemas/Turn" } },
      "text/event-stream": { schema: { $ref: "#/components/schemas/ThreadEvent" } },
    });
    const rollout = doc.paths["/v1/threads/{id}/rollout"]?.get as Operation;
    expect(rollout.responses["200"]?.content).toEqual({
      "application/x-ndjson": { schema: { $ref: "#/components/schemas/RolloutLine" } },
    });
    const types = (
      component("ThreadEvent").oneOf as { properties: { type: { const: string } } }[]
    ).map((branch) => branch.properties.type.const);
    expect(types).toEqual([
      "turn.started",
      "item.completed",
      "item.delta",
      "token_count",
      "turn.warning",
      "turn.completed",
      "turn.requires_action",
      "turn.interrupted",
      "turn.failed",
    ]);
  });

  it("a route whose schema has no component name cannot be documented", () => {
    const unnamed: RouteSpec = {
      method: "post",
      path: "/v1/x",
      access: "threads",
      summary: "x",
      body: { kind: "json", schema: z.strictObject({ a: z.string() }), maxBytes: 10 },
      responses: { 200: { description: "x" } },
      errors: [],
    };
    expect(() => buildOpenApiDocument({ unnamed })).toThrow(
      "A request body schema has no component name.",
    );
  });

  it("GET /openapi.json serves the document without an API key", async () => {
    const { request } = setup();
    const res = await request("/openapi.json", { key: "" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toEqual(JSON.parse(JSON.stringify(doc)));
  });
});
