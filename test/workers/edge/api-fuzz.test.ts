/**
 * A fuzz test of the whole API (fast-check): requests generated from the request schemas of the
 * OpenAPI document the worker serves, and near misses and malicious variants of them (wrong
 * types, unknown fields, JSON nested thousands of levels deep, large strings, unicode edge cases,
 * invalid UTF-8, bad percent-encoding, odd headers and keys), over every route and two tenants.
 * Every answer must be below 500, every 4xx a problem document of its code, and no request may
 * succeed on a thread only the other tenant has; afterwards every thread the run touched must
 * still take a turn, export its rollout, and import that export again.
 *
 * CI runs `DEFAULT_RUNS` requests; `SPINDLE_FUZZ_RUNS=5000 npx vitest run --config
 * vitest.workers.config.ts test/workers/edge/api-fuzz.test.ts` runs more (the seed of a failure is
 * printed, with the request).
 */
import { env, exports } from "cloudflare:workers";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  isProblemCode,
  PROBLEM_CONTENT_TYPE,
  problemStatus,
  problemTitle,
  problemType,
} from "../../../shared/api/index.ts";
import { isOpenAIPath } from "../../../worker/openai-routes.ts";
import { arbitraryOf, type JsonSchema } from "../../helpers/json-schema-arbitrary.ts";
import { ACME_KEY, BASE, GLOBEX_KEY, newThreadId } from "../helpers/api.ts";
import { answerEvents, responsesStream } from "../helpers/openai.ts";

const DEFAULT_RUNS = 1_000;
const RUNS = Number(env.SPINDLE_FUZZ_RUNS) || DEFAULT_RUNS;

interface Parameter {
  name: string;
  in: "path" | "query" | "header";
  schema: JsonSchema;
}

interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  /** The JSON body's component, or "rollout" for the JSONL import. */
  body: string | "rollout" | undefined;
}

interface FuzzRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | Uint8Array | undefined;
  /** The tenant whose key it carries, if a valid one. */
  tenant: Tenant | undefined;
}

type Tenant = "acme" | "globex";
const KEYS: Record<Tenant, string> = { acme: ACME_KEY, globex: GLOBEX_KEY };

/** What the run knows exists, per tenant: threads (alive), turns and pending call ids. */
const known = {
  threads: { acme: new Set<string>(), globex: new Set<string>() },
  deleted: { acme: new Set<string>(), globex: new Set<string>() },
  turns: new Set<string>(),
  callIds: new Set<string>(),
  exports: [] as string[],
};

/** One of `values` chosen by index, read at generation time (the pools grow during the run). */
const pick = (values: () => readonly string[], fallback: string) =>
  fc.nat().map((i) => {
    const all = values();
    return all.length === 0 ? fallback : (all[i % all.length] as string);
  });

const TOOL = { name: "lookup", description: "search", parameters: { type: "object" } };

const NEAR_MISS_NUMBERS = ["0x10", "1e3", "1.0", " 5", "-1", "", "+5", "99999999999999999999"];
const ODD_SEGMENTS = [
  "%zz",
  "%",
  "%E2%82",
  "a%2Fb",
  "..",
  "%00",
  "thr_%C3%A9",
  "x".repeat(65),
  "a b",
];
const UNICODE_EDGES = [
  "\ud800",
  "\udfff",
  "\u0000",
  "\ufeff",
  "\u202e",
  "😀",
  "a\u0301",
  "\uffff",
  "\u2028",
];

const deepText = (levels: number, open = "[", close = "]") =>
  `${open.repeat(levels)}${close.repeat(levels)}`;

/** Stands in a value for nested arrays spliced into its JSON text (too deep to stringify). */
const DEEP_MARK = "\u0001deep\u0001";
const spliceDeep = (text: string, levels: number) =>
  text.replace(JSON.stringify(DEEP_MARK), deepText(levels));

/** JSON texts that are not what any route wants. */
const RAW_BODIES = [
  "{",
  '{"input":',
  "[]",
  "null",
  '"text"',
  "1e999",
  deepText(3_000),
  `${'{"a":'.repeat(2_500)}1${"}".repeat(2_500)}`,
  '{"input":"\\ud800"}',
  '{"__proto__":{"input":"x"}}',
  '{"input":"x","input":"y"}',
  "\ufeff{}",
];

let document: { paths: unknown; components: { schemas: Record<string, JsonSchema> } };

function operationsOf(doc: typeof document): Operation[] {
  const paths = doc.paths as Record<string, Record<string, Record<string, unknown>>>;
  return Object.entries(paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => {
      const content = (op.requestBody as { content?: Record<string, { schema: JsonSchema }> })
        ?.content;
      const json = content?.["application/json"]?.schema.$ref as string | undefined;
      return {
        method: method.toUpperCase(),
        path,
        parameters: (op.parameters ?? []) as Parameter[],
        body: json ? json.split("/").at(-1) : content ? "rollout" : undefined,
      };
    }),
  );
}

/** Values worth trying for properties of these names, mixed with the schema's. */
function hints(tenant: Tenant) {
  const threads = () => [...known.threads[tenant]];
  return (property: string, fromSchema: fc.Arbitrary<unknown>) => {
    const mix = (...values: fc.Arbitrary<unknown>[]) =>
      fc.oneof({ weight: 3, arbitrary: fc.oneof(...values) }, { weight: 1, arbitrary: fromSchema });
    switch (property) {
      case "model":
        return mix(fc.constantFrom("spindle-local", "spindle-local-lite", "gpt-test", "nope"));
      case "provider":
        return mix(fc.constantFrom("local", "openai", "nope"));
      case "timezone":
        return mix(fc.constantFrom("UTC", "Europe/Paris", "Asia/Calcutta", "Not/AZone"));
      case "input":
      case "text":
        return mix(fc.constantFrom("hello", "/call lookup {}", '/call lookup {"q":[1]}'));
      case "id":
        return mix(
          fc.constant(null).map(() => newThreadId()),
          pick(threads, "none"),
        );
      case "before_turn":
      case "expected_turn_id":
        return mix(pick(() => [...known.turns], "turn_none"));
      case "call_id":
        return mix(pick(() => [...known.callIds], "call_none"));
      case "image_url":
        return mix(fc.constantFrom("https://example.test/a.png", "data:image/png;base64,AAAA"));
      case "tools":
        return mix(fc.constant([TOOL]));
      case "turns":
        return mix(fc.integer({ min: 1, max: 3 }));
      default:
        return undefined;
    }
  };
}

/** Every path inside a JSON value, as keys and indices. */
function pathsOf(value: unknown): (string | number)[][] {
  const out: (string | number)[][] = [[]];
  const stack: [unknown, (string | number)[]][] = [[value, []]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [node, path] = next;
    if (typeof node !== "object" || node === null) continue;
    for (const [key, member] of Object.entries(node)) {
      const at = [...path, Array.isArray(node) ? Number(key) : key];
      out.push(at);
      stack.push([member, at]);
    }
  }
  return out;
}

type Mutation =
  | { kind: "delete" }
  | { kind: "unknown" }
  | { kind: "replace"; value: unknown }
  | { kind: "deep"; levels: number }
  | { kind: "huge"; bytes: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.constant({ kind: "delete" as const }),
  fc.constant({ kind: "unknown" as const }),
  fc.record({
    kind: fc.constant("replace" as const),
    value: fc.oneof(
      fc.jsonValue({ maxDepth: 2 }),
      fc.constantFrom(...UNICODE_EDGES),
      fc.constantFrom(1e308, -0, 2 ** 53 + 1, -1, 0, ""),
    ),
  }),
  fc.record({ kind: fc.constant("deep" as const), levels: fc.integer({ min: 30, max: 3_000 }) }),
  fc.record({
    kind: fc.constant("huge" as const),
    bytes: fc.constantFrom(100_000, 1_100_000),
  }),
);

/** `value` as JSON text with `mutation` applied at the `at`-th of its paths. */
function mutated(value: unknown, change: Mutation, at: number): string {
  const paths = pathsOf(value);
  const path = paths[at % paths.length] ?? [];
  const copy = structuredClone(value);
  const parent = path.slice(0, -1).reduce<unknown>((node, key) => (node as never)[key], copy);
  const key = path.at(-1);
  const set = (v: unknown) => {
    if (key === undefined) return v;
    (parent as Record<string | number, unknown>)[key] = v;
    return copy;
  };
  let root: unknown = copy;
  switch (change.kind) {
    case "delete":
      if (key !== undefined && Array.isArray(parent)) parent.splice(Number(key), 1);
      else if (key !== undefined) delete (parent as Record<string, unknown>)[key];
      break;
    case "unknown":
      if (typeof parent === "object" && parent !== null && !Array.isArray(parent)) {
        (parent as Record<string, unknown>).zz_unknown = true;
      }
      break;
    case "replace":
      root = set(change.value);
      break;
    case "deep":
      root = set(DEEP_MARK);
      break;
    case "huge":
      root = set("h".repeat(change.bytes));
      break;
  }
  const text = JSON.stringify(root) ?? "null";
  return change.kind === "deep" ? spliceDeep(text, change.levels) : text;
}

/** Depths around the bounds (32 for tool parameters, 64 for a body) and far past them. */
const DEPTHS = [31, 33, 61, 1_900, 2_000, 2_300, 2_500, 5_000];

/**
 * A body otherwise valid whose one free-form value, a tool's parameters, nests `levels` deep: in
 * a create body, or in a turn's overrides.
 */
function withDeepParameters(body: unknown, component: string, levels: number): string {
  const tools = [{ name: "lookup", parameters: { type: "object", x: DEEP_MARK } }];
  const value = body as Record<string, unknown>;
  const withTools =
    component === "StartTurnBody"
      ? { ...value, overrides: { ...(value.overrides as object), tools } }
      : { ...value, tools };
  return spliceDeep(JSON.stringify(withTools), levels - 1);
}

/** An import body: a known export, as it is or damaged. */
function rolloutBody(): fc.Arbitrary<string | Uint8Array> {
  const base = pick(() => known.exports, "");
  return fc.oneof(
    base,
    fc.tuple(base, fc.nat()).map(([text, at]) => text.slice(0, at % (text.length + 1))),
    base.map((text) => text.split("\n").slice(1).join("\n")),
    base.map((text) => `\ufeff${text.replaceAll("\n", "\r\n")}`),
    fc
      .tuple(base, fc.nat(), fc.constantFrom(deepText(2_000), "{}", "not json", `{"timestamp":1}`))
      .map(([text, at, line]) => {
        const lines = text.split("\n");
        lines[at % lines.length] = line;
        return lines.join("\n");
      }),
    base.map(
      (text) =>
        `${text}{"timestamp":"2026-01-01T00:00:00Z","type":"future","payload":"${"p".repeat(1_100_000)}"}\n`,
    ),
    base.map((text) => {
      const bytes = new TextEncoder().encode(text);
      return new Uint8Array([...bytes.slice(0, 200), 0xff, 0xfe, ...bytes.slice(200)]);
    }),
    fc.constant(""),
  );
}

/** A JSON body for `component`: valid, a near miss, deep parameters, or not JSON at all. */
function jsonBodyOf(
  component: string,
  owner: Tenant,
  components: Record<string, JsonSchema>,
): fc.Arbitrary<string | Uint8Array> {
  const valid = arbitraryOf(components[component] ?? {}, { components, hints: hints(owner) });
  const configured = component === "CreateThreadBody" || component === "StartTurnBody";
  return fc.oneof(
    { weight: 6, arbitrary: valid.map((v) => JSON.stringify(v)) },
    {
      weight: 3,
      arbitrary: fc
        .tuple(valid, mutation, fc.nat())
        .map(([v, change, at]) => mutated(v, change, at)),
    },
    {
      weight: configured ? 3 : 0,
      arbitrary: fc
        .tuple(valid, fc.constantFrom(...DEPTHS))
        .map(([v, levels]) => withDeepParameters(v, component, levels)),
    },
    { weight: 1, arbitrary: fc.constantFrom(...RAW_BODIES) },
    // `{"i` and two bytes that are not UTF-8.
    {
      weight: 1,
      arbitrary: fc.constant(new Uint8Array([0x7b, 0x22, 0x69, 0xff, 0xfe, 0x22, 0x7d])),
    },
    { weight: 1, arbitrary: fc.constant("") },
  );
}

const JSON_TYPES = fc.oneof(
  { weight: 8, arbitrary: fc.constant("application/json") },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "application/json; charset=utf-8",
      "APPLICATION/JSON",
      "application/merge-patch+json",
      "text/plain",
      "",
      "multipart/form-data; boundary=x",
    ),
  },
);
const ROLLOUT_TYPES = fc.constantFrom(
  "application/x-ndjson",
  "application/jsonl",
  "text/plain",
  "application/json",
);
const ACCEPTS = fc.option(
  fc.constantFrom(
    "text/event-stream",
    "*/*",
    "text/event-stream;q=0",
    "application/json, text/event-stream;q=0.5",
    "%%%",
  ),
  { nil: undefined },
);
const BAD_AUTHORIZATIONS = fc.constantFrom(
  "",
  "Bearer sk-wrong",
  "Basic eA==",
  `Bearer ${"k".repeat(600)}`,
);

function requestOf(
  op: Operation,
  components: Record<string, JsonSchema>,
): fc.Arbitrary<FuzzRequest> {
  return fc.constantFrom<Tenant>("acme", "globex").chain((owner) => {
    const other: Tenant = owner === "acme" ? "globex" : "acme";
    const fromSchema = (schema: JsonSchema) =>
      arbitraryOf(schema, { components }) as fc.Arbitrary<string>;
    // Mostly what exists (the caller's threads and turns), sometimes another tenant's or junk.
    const segment = (p: Parameter) =>
      fc.oneof(
        {
          weight: 6,
          arbitrary:
            p.name === "turn"
              ? pick(() => [...known.turns], "turn_none")
              : pick(() => [...known.threads[owner]], "none"),
        },
        { weight: 1, arbitrary: pick(() => [...known.threads[other]], "none") },
        { weight: 2, arbitrary: fromSchema(p.schema) },
        { weight: 1, arbitrary: fc.constantFrom(...ODD_SEGMENTS) },
      );
    const value = (p: Parameter) =>
      fc.option(
        fc.oneof(
          { weight: 3, arbitrary: fromSchema(p.schema).map(encodeURIComponent) },
          { weight: 1, arbitrary: fc.constantFrom(...NEAR_MISS_NUMBERS, "%zz", "%") },
        ),
        { nil: undefined },
      );
    const each = (where: Parameter["in"], of: (p: Parameter) => fc.Arbitrary<unknown>) =>
      fc.record(
        Object.fromEntries(op.parameters.filter((p) => p.in === where).map((p) => [p.name, of(p)])),
      );
    const body =
      op.body === "rollout"
        ? rolloutBody()
        : op.body === undefined
          ? fc.constant(undefined)
          : jsonBodyOf(op.body, owner, components);
    const valid = `Bearer ${KEYS[owner]}`;
    return fc
      .record({
        path: each("path", segment),
        query: each("query", value),
        headers: each("header", value),
        auth: fc.oneof({ weight: 20, arbitrary: fc.constant(valid) }, BAD_AUTHORIZATIONS),
        accept: ACCEPTS,
        body,
        contentType: op.body === "rollout" ? ROLLOUT_TYPES : JSON_TYPES,
      })
      .map((r) => {
        let url = op.path.replace(/\{(\w+)\}/g, (_, name: string) => asText(r.path[name]));
        const search = Object.entries(r.query)
          .filter(([, v]) => v !== undefined)
          .map(([k, v]) => `${k}=${asText(v)}`)
          .join("&");
        if (search !== "") url += `?${search}`;
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(r.headers)) {
          if (v !== undefined) headers[k] = decodeSafely(asText(v));
        }
        if (r.auth !== "") headers.authorization = r.auth;
        if (r.accept !== undefined) headers.accept = r.accept;
        if (r.body !== undefined && r.contentType !== "") headers["content-type"] = r.contentType;
        return {
          method: op.method,
          url: `${BASE}${url}`,
          headers,
          body: r.body,
          tenant: r.auth === valid ? owner : undefined,
        };
      });
  });
}

/**
 * A generated parameter value as the text a request carries. An object (a schema may allow one)
 * is sent as its JSON: `String` throws on one generated without a prototype.
 */
function asText(value: unknown): string {
  return typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
}

/** Header values must be Latin-1; a query-style encoded value is decoded back where it can be. */
function decodeSafely(value: string): string {
  try {
    const decoded = decodeURIComponent(value);
    return /^[\x20-\x7e]*$/.test(decoded) ? decoded : value;
  } catch {
    return value;
  }
}

/** Reads an SSE answer until its turn's terminal event (or its end), then lets go: what it read. */
async function drainEvents(res: Response, untilTerminal: boolean): Promise<string> {
  const reader = res.body?.pipeThrough(new TextDecoderStream()).getReader();
  if (!reader || !untilTerminal) {
    await reader?.cancel();
    return "";
  }
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += value;
    if (/event: (turn\.(completed|requires_action|interrupted|failed)|error)\n/.test(text)) {
      await reader.cancel();
      return text;
    }
  }
}

/** No answer, streamed or not, carries an `internal` failure: a turn's or an `error` event's. */
const INTERNAL = /"code":"internal"/;

/** Whether the request names, in its path, a thread only the other tenant has. */
function isForeign(req: FuzzRequest): boolean {
  if (req.tenant === undefined) return false;
  const [, v1, threads, id] = new URL(req.url).pathname.split("/");
  if (v1 !== "v1" || threads !== "threads" || id === undefined || id === "import") return false;
  const other: Tenant = req.tenant === "acme" ? "globex" : "acme";
  return known.threads[other].has(id) && !known.threads[req.tenant].has(id);
}

/** The answer's invariants; records what it revealed (threads, turns, calls). */
async function check(req: FuzzRequest, res: Response): Promise<void> {
  const type = res.headers.get("content-type") ?? "";
  const where = `${req.method} ${req.url} → ${res.status}`;
  expect(res.status, where).toBeLessThan(500);
  if (isForeign(req))
    expect(res.status, `${where}: another tenant's thread`).toBeGreaterThanOrEqual(400);
  if (type.startsWith("text/event-stream")) {
    expect(res.status, where).toBe(200);
    const streamed = await drainEvents(res, !req.url.includes("/events"));
    expect(streamed, where).not.toMatch(INTERNAL);
    return;
  }
  const text = new TextDecoder().decode(await res.arrayBuffer());
  if (res.status >= 400 && isOpenAIPath(new URL(req.url).pathname)) {
    // The OpenAI-compatible routes answer OpenAI's error body, `code` the problem code.
    expect(type, where).toMatch(/^application\/json/);
    const { error } = JSON.parse(text) as { error: Record<string, unknown> };
    expect(error, where).toEqual({
      message: expect.any(String),
      type: expect.any(String),
      param: error.param === null ? null : expect.any(String),
      code: expect.any(String),
    });
    expect(isProblemCode(error.code) && problemStatus(error.code), `${where}: ${text}`).toBe(
      res.status,
    );
    return;
  }
  if (res.status >= 400) {
    expect(type, where).toBe(PROBLEM_CONTENT_TYPE);
    const problem = JSON.parse(text) as Record<string, unknown>;
    const code = String(problem.code);
    expect(isProblemCode(code), `${where}: ${text}`).toBe(true);
    if (!isProblemCode(code)) return;
    expect(problem, where).toMatchObject({
      type: problemType(code),
      title: problemTitle(code),
      status: res.status,
      detail: expect.any(String),
    });
    expect(problemStatus(code), where).toBe(res.status);
    for (const error of (problem.errors ?? []) as unknown[]) {
      expect(error, where).toEqual({ path: expect.any(String), message: expect.any(String) });
    }
    return;
  }
  expect(text, where).not.toMatch(INTERNAL);
  learn(req, res, text);
}

function learn(req: FuzzRequest, res: Response, text: string): void {
  if (req.tenant === undefined) return;
  const threads = known.threads[req.tenant];
  const location = res.headers.get("location");
  // Only threads: hooks, endpoints and tenants have ids and locations of their own.
  if (res.status === 201 && location?.startsWith("/v1/threads/")) {
    const id = location.split("/").at(-1) ?? "";
    threads.add(id);
    known.deleted[req.tenant].delete(id);
  }
  // The router takes a trailing slash as none (`…/items/..` normalizes to `/v1/conversations/{id}/`).
  const path = new URL(req.url).pathname.replace(/\/+$/, "");
  // A conversation is a thread: deleting one deletes the thread (200, OpenAI's answer).
  const conversation = /^\/v1\/conversations\/[^/]+$/.test(path);
  if (req.method === "DELETE" && res.status === 200 && conversation) {
    const id = path.split("/").at(-1) ?? "";
    threads.delete(id);
    known.deleted[req.tenant].add(id);
  }
  if (req.method === "DELETE" && res.status === 204 && path.startsWith("/v1/threads/")) {
    const id = path.split("/").at(-1) ?? "";
    threads.delete(id);
    known.deleted[req.tenant].add(id);
  }
  if (!(res.headers.get("content-type") ?? "").startsWith("application/json")) return;
  const value = JSON.parse(text) as {
    object?: string;
    id?: string;
    pending_calls?: { call_id: string }[];
  };
  if (value.object === "turn" && value.id) known.turns.add(value.id);
  for (const call of value.pending_calls ?? []) known.callIds.add(call.call_id);
}

async function send(req: FuzzRequest): Promise<Response> {
  return exports.default.fetch(req.url, {
    method: req.method,
    headers: req.headers,
    ...(req.body === undefined || req.method === "GET" || req.method === "DELETE"
      ? {}
      : { body: req.body }),
  });
}

const call = (tenant: Tenant, method: string, path: string, body?: unknown) =>
  exports.default.fetch(`${BASE}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEYS[tenant]}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

beforeAll(async () => {
  // The openai provider's model (`gpt-test`) is answered by a stand-in, not the network.
  const realFetch = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (!url.startsWith("https://openai.test/")) return realFetch(input, init);
    return new Response(responsesStream(answerEvents("from upstream")), {
      headers: { "content-type": "text/event-stream" },
    });
  });
  const res = await exports.default.fetch(`${BASE}/openapi.json`);
  document = (await res.json()) as typeof document;
  for (const tenant of ["acme", "globex"] as const) {
    for (const config of [{}, { tools: [TOOL], cwd: "/repo" }, { model: "gpt-test" }]) {
      const id = newThreadId();
      expect((await call(tenant, "POST", "/v1/threads", { id, ...config })).status).toBe(201);
      known.threads[tenant].add(id);
      const turn = (await (
        await call(tenant, "POST", `/v1/threads/${id}/turns`, {
          input: "tools" in config ? "/call lookup {}" : "hello",
        })
      ).json()) as { id: string; pending_calls: { call_id: string }[] };
      known.turns.add(turn.id);
      for (const c of turn.pending_calls) known.callIds.add(c.call_id);
      const exported = await call(tenant, "GET", `/v1/threads/${id}/rollout`);
      known.exports.push(new TextDecoder().decode(await exported.arrayBuffer()));
    }
  }
});

afterAll(() => {
  vi.restoreAllMocks();
});

describe("the API under fuzzed requests", () => {
  it(`answers ${RUNS} generated requests below 500, every 4xx a problem document, no tenant reaching another`, async () => {
    const statuses = new Map<number, number>();
    const operations = operationsOf(document);
    expect(operations.length).toBeGreaterThan(15);
    const components = document.components.schemas;
    const request = fc.constantFrom(...operations).chain((op) => requestOf(op, components));
    await fc.assert(
      fc.asyncProperty(request, async (req) => {
        const res = await send(req);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        await check(req, res);
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
    const counts = [...statuses].sort(([a], [b]) => a - b).map(([status, n]) => `${status}: ${n}`);
    console.log(`api fuzz: ${RUNS} requests by status, ${counts.join(", ")}`);
  }, 120_000);

  it("leaves every thread it touched able to take a turn and export", async () => {
    for (const tenant of ["acme", "globex"] as const) {
      for (const id of known.threads[tenant]) {
        const turn = await call(tenant, "POST", `/v1/threads/${id}/turns`, {
          input: "still there?",
          on_busy: "interrupt",
        });
        const body = await turn.text();
        expect([id, turn.status, (JSON.parse(body) as { status?: string }).status], body).toEqual([
          id,
          200,
          "completed",
        ]);
        const exported = await call(tenant, "GET", `/v1/threads/${id}/rollout`);
        expect([id, exported.status]).toEqual([id, 200]);
        // What it exports imports again: no line it wrote is unreadable.
        const copy = await exports.default.fetch(`${BASE}/v1/threads/import?id=${newThreadId()}`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${KEYS[tenant]}`,
            "content-type": "application/x-ndjson",
          },
          body: await exported.arrayBuffer(),
        });
        expect([id, copy.status, await copy.text()]).toEqual([id, 201, expect.any(String)]);
      }
      for (const id of known.deleted[tenant]) {
        expect((await call(tenant, "GET", `/v1/threads/${id}`)).status).toBe(404);
      }
    }
  }, 60_000);
});
