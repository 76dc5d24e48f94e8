import { describe, expect, it } from "vitest";
import { queryOf } from "../../../worker/query.ts";
import { API_ROUTES, type RouteSpec } from "../../../worker/routes.ts";
import { breakingStream } from "../../helpers/streams.ts";
import { problemOf, setup, thread } from "./fake-thread.ts";

const anyMessage = expect.any(String);

/** The problem for a validation failure with these field errors. */
function invalid(where: string, errors: { path: string; message: unknown }[]) {
  return {
    type: "/problems/invalid_request",
    title: "The request is invalid",
    status: 400,
    detail: `The ${where} is invalid.`,
    code: "invalid_request",
    errors,
  };
}

describe("request bodies", () => {
  it("each failing field of a thread config is reported by its JSON Pointer", async () => {
    const { json, fake } = setup();
    const res = await json("/v1/threads", {
      id: "t1",
      model: 5,
      tools: [{ name: "has space" }],
      permissions: { sandbox: "everything", approval_policy: "never" },
    });
    expect(res.status).toBe(400);
    expect(await problemOf(res)).toEqual(
      invalid("request body", [
        { path: "/model", message: anyMessage },
        { path: "/permissions/sandbox", message: anyMessage },
        { path: "/tools/0/name", message: "tool names are 1-64 chars of [A-Za-z0-9_-]" },
      ]),
    );
    expect(fake.calls).toEqual([]);
  });

  it("unknown fields are rejected one by one", async () => {
    const { json } = setup();
    const res = await json("/v1/threads", { id: "t1", modle: "x", "a/b~c": 1 });
    expect(await problemOf(res)).toEqual(
      invalid("request body", [
        { path: "/modle", message: "Unknown field" },
        { path: "/a~1b~0c", message: "Unknown field" },
      ]),
    );
  });

  it("a body that is not an object is reported at the root", async () => {
    const { json } = setup();
    const res = await json("/v1/threads", [1, 2]);
    expect(await problemOf(res)).toEqual(
      invalid("request body", [{ path: "", message: anyMessage }]),
    );
  });

  it("a thread id in the body must be a valid id", async () => {
    const { json } = setup();
    const res = await json("/v1/threads", { id: "A:t1" });
    expect(await problemOf(res)).toEqual(
      invalid("request body", [
        { path: "/id", message: "thread ids are 1-64 characters of [A-Za-z0-9_-]" },
      ]),
    );
  });

  it("a turn without input is reported at /input", async () => {
    const { json } = setup();
    const res = await json("/v1/threads/t1/turns", {});
    expect(await problemOf(res)).toEqual(
      invalid("request body", [{ path: "/input", message: anyMessage }]),
    );
  });

  it("an input of the wrong type names the accepted types", async () => {
    const { json } = setup();
    const res = await json("/v1/threads/t1/turns", { input: 42 });
    expect(await problemOf(res)).toEqual(
      invalid("request body", [
        { path: "/input", message: "Invalid input: expected string or array" },
      ]),
    );
  });

  it("an error inside an input item points at the field inside the item", async () => {
    const { json } = setup();
    const res = await json("/v1/threads/t1/turns", {
      input: [
        { type: "message", role: "user", content: [{ type: "input_text", text: "ok" }] },
        { type: "message", role: "user", content: [{ type: "input_text", text: 3 }] },
      ],
    });
    expect(await problemOf(res)).toEqual(
      invalid("request body", [{ path: "/input/1/content/0/text", message: anyMessage }]),
    );
  });

  it("input items are user messages of input_text and input_image parts only", async () => {
    const { json } = setup();
    const res = await json("/v1/threads/t1/turns", {
      input: [
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "x" }] },
        { type: "message", role: "user", content: [] },
        {
          type: "message",
          role: "user",
          content: [{ type: "input_image", image_url: "file:///x" }],
        },
      ],
    });
    expect(await problemOf(res)).toEqual(
      invalid("request body", [
        { path: "/input/0/role", message: anyMessage },
        { path: "/input/0/content/0/type", message: anyMessage },
        { path: "/input/1/content", message: anyMessage },
        {
          path: "/input/2/content/0/image_url",
          message: "image_url must be an http(s) URL or a data:image/ URL",
        },
      ]),
    );
  });

  it("bad overrides and on_busy are reported under their own paths", async () => {
    const { json } = setup();
    const res = await json("/v1/threads/t1/turns", {
      input: "hi",
      overrides: { truncation: { tokens: -1 }, agents_md: { text: "x" } },
      on_busy: "wait",
    });
    expect(await problemOf(res)).toEqual(
      invalid("request body", [
        { path: "/overrides/agents_md/directory", message: anyMessage },
        { path: "/overrides/truncation/tokens", message: anyMessage },
        { path: "/on_busy", message: anyMessage },
      ]),
    );
  });

  it("malformed JSON is a 400 invalid_request without field errors", async () => {
    const { request, fake } = setup();
    const res = await request("/v1/threads", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"id": "t1",',
    });
    expect(res.status).toBe(400);
    expect(await problemOf(res)).toEqual({
      type: "/problems/invalid_request",
      title: "The request is invalid",
      status: 400,
      detail: "The request body is not valid JSON.",
      code: "invalid_request",
    });
    expect(fake.calls).toEqual([]);
  });

  it("a body that is not declared JSON is refused with a hint", async () => {
    const { request } = setup();
    for (const contentType of ["application/x-www-form-urlencoded", "text/plain;charset=UTF-8"]) {
      const res = await request("/v1/threads/t1/turns", {
        method: "POST",
        headers: { "content-type": contentType },
        body: JSON.stringify({ input: "hi" }),
      });
      expect(await problemOf(res)).toMatchObject({
        status: 400,
        detail: "Send the body as JSON with `Content-Type: application/json`.",
      });
    }
  });

  it("a +json media type with parameters is accepted", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await request("/v1/threads/t1/turns", {
      method: "POST",
      headers: { "content-type": "application/vnd.spindle+json; charset=utf-8" },
      body: JSON.stringify({ input: "hi" }),
    });
    expect(res.status).toBe(200);
  });
});

describe("path and query parameters", () => {
  it("a thread id that is too long or has other characters is reported as `id`", async () => {
    const { request, fake } = setup();
    for (const id of ["x".repeat(65), "a.b", "a%20b"]) {
      const res = await request(`/v1/threads/${id}`);
      expect(await problemOf(res)).toEqual(
        invalid("path", [
          { path: "id", message: "thread ids are 1-64 characters of [A-Za-z0-9_-]" },
        ]),
      );
    }
    expect(fake.calls).toEqual([]);
  });

  it("a malformed turn id is reported as `turn`", async () => {
    const { request } = setup();
    const res = await request("/v1/threads/t1/turns/bad.turn");
    expect(await problemOf(res)).toEqual(
      invalid("path", [{ path: "turn", message: "turn ids are 1-64 characters of [A-Za-z0-9_-]" }]),
    );
  });

  it("history limits outside 1-1000 or not integers are reported as `limit`", async () => {
    const { request, fake } = setup();
    for (const limit of ["0", "1001", "abc", "2.5", ""]) {
      const res = await request(`/v1/threads/t1/history?limit=${limit}`);
      expect(await problemOf(res)).toEqual(
        invalid("query", [{ path: "limit", message: anyMessage }]),
      );
    }
    expect(fake.calls).toEqual([]);
  });
});

describe("JSON nesting", () => {
  /** A create body whose tool parameters hold `levels` nested arrays, as text. */
  const deepCreate = (levels: number) =>
    `{"id":"t1","tools":[{"name":"t","parameters":{"x":${"[".repeat(levels)}${"]".repeat(levels)}}}]}`;
  const deepProblem = (path: string) => ({
    type: "/problems/invalid_request",
    title: "The request is invalid",
    status: 400,
    detail: "The request body nests deeper than 64 levels.",
    code: "invalid_request",
    errors: [{ path, message: "Nested deeper than 64 levels" }],
  });

  it("a body nested deeper than 64 levels is refused at the first level past them, whatever its depth", async () => {
    const { request, fake } = setup();
    // body, tools, tool, parameters and x hold the first five levels.
    const path = `/tools/0/parameters/x${"/0".repeat(60)}`;
    for (const levels of [61, 1_900, 2_000, 2_500, 100_000]) {
      const res = await request("/v1/threads", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: deepCreate(levels),
      });
      expect(await problemOf(res)).toEqual(deepProblem(path));
    }
    expect(fake.calls).toEqual([]);
  });

  it("turn overrides and tool outputs are bounded the same way", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const deep = `${"[".repeat(3_000)}${"]".repeat(3_000)}`;
    const turn = await request("/v1/threads/t1/turns", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: `{"input":"hi","overrides":{"tools":[{"name":"t","parameters":{"x":${deep}}}]}}`,
    });
    expect(await problemOf(turn)).toEqual(
      deepProblem(`/overrides/tools/0/parameters/x${"/0".repeat(59)}`),
    );
    const outputs = await request("/v1/threads/t1/turns/turn_1/outputs", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: `{"items":[{"type":"function_call_output","call_id":"c","output":${deep}}]}`,
    });
    expect(await problemOf(outputs)).toEqual(deepProblem(`/items/0/output${"/0".repeat(61)}`));
    expect(fake.calls).toEqual([]);
  });

  it("a tool's parameters may nest 32 levels, not 33", async () => {
    const { json, fake } = setup();
    const nested = (levels: number): unknown =>
      levels === 1 ? {} : { type: "object", properties: { a: nested(levels - 1) } };
    // Each nested schema adds two levels, itself and its `properties`: nested(16) has 31.
    const within = await json("/v1/threads", {
      id: "t1",
      tools: [{ name: "t", parameters: { wrap: nested(16) } }],
    });
    expect(within.status).toBe(201);
    const beyond = await json("/v1/threads", {
      id: "t2",
      tools: [{ name: "t", parameters: { wrap: { deeper: nested(16) } } }],
    });
    expect(await problemOf(beyond)).toEqual(
      invalid("request body", [
        {
          path: `/tools/0/parameters/wrap/deeper${"/properties/a".repeat(15)}`,
          message: "parameters nests deeper than 32 levels",
        },
      ]),
    );
    expect(fake.calls.map((c) => c.name)).toEqual(["A:t1"]);
  });
});

describe("numeric query parameters", () => {
  it("a history limit must be decimal digits: hex, exponents, decimals, signs and spaces are refused", async () => {
    const { request, fake } = setup();
    for (const limit of ["0x10", "1e3", "1.0", "%205", "+5", "-1", "5%20", "0b1", "Infinity"]) {
      const res = await request(`/v1/threads/t1/history?limit=${limit}`);
      expect(await problemOf(res)).toEqual(
        invalid("query", [{ path: "limit", message: "1-1000 items, in decimal digits only" }]),
      );
    }
    expect(fake.calls).toEqual([]);
  });

  it("leading zeros are still decimal", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    await request("/v1/threads/t1/history?limit=0010");
    expect(fake.calls.map((c) => c.args)).toEqual([[{ limit: 10 }]]);
  });
});

describe("bodies that break off", () => {
  const brokenProblem = {
    type: "/problems/invalid_request",
    title: "The request is invalid",
    status: 400,
    detail: "The request body broke off before its end.",
    code: "invalid_request",
  };

  it("is a 400, chunked or with a Content-Length, and reaches no thread", async () => {
    const { request, fake } = setup();
    for (const headers of [{}, { "content-length": "40" }]) {
      const res = await request("/v1/threads", {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: breakingStream('{"id":"t1","cwd":"/re'),
        duplex: "half",
      } as RequestInit);
      expect(await problemOf(res)).toEqual(brokenProblem);
    }
    expect(fake.calls).toEqual([]);
  });
});

describe("query parameters", () => {
  const params = (search: string) => new URLSearchParams(search);

  it("folds `name[key]=value` into an object without a prototype, beside plain parameters", () => {
    const query = queryOf(params("limit=5&metadata[team]=core&metadata[__proto__]=x&status=idle"));
    expect(query).toEqual({
      limit: "5",
      metadata: Object.fromEntries([
        ["team", "core"],
        ["__proto__", "x"],
      ]),
      status: "idle",
    });
    expect(Object.getPrototypeOf(query)).toBe(null);
    expect(Object.getPrototypeOf(query.metadata)).toBe(null);
  });

  it("refuses a parameter sent twice, nested or stray brackets, each at its name as sent", () => {
    const refused = (search: string) => {
      try {
        queryOf(params(search));
      } catch (error) {
        return (error as { code: string; errors: unknown }).errors;
      }
      throw new Error(`${search} was read`);
    };
    expect(refused("limit=5&limit=6&limit=7")).toEqual([
      { path: "limit", message: "Sent more than once" },
    ]);
    expect(refused("metadata[team]=a&metadata[team]=b")).toEqual([
      { path: "metadata[team]", message: "Sent more than once" },
    ]);
    expect(refused("metadata[a][b]=c&metadata[=x&]=y&[k]=v")).toEqual([
      { path: "metadata[a][b]", message: "Brackets hold one key: name[key]=value" },
      { path: "metadata[", message: "Brackets hold one key: name[key]=value" },
      { path: "]", message: "Brackets hold one key: name[key]=value" },
      { path: "[k]", message: "Brackets hold one key: name[key]=value" },
    ]);
    expect(refused("metadata=x&metadata[a]=b")).toEqual([
      { path: "metadata[a]", message: "Sent beside metadata=" },
    ]);
    expect(refused("metadata[a]=b&metadata=x")).toEqual([
      { path: "metadata", message: "Sent beside metadata[key]=" },
    ]);
  });

  it("every route's query refuses a parameter it does not know", () => {
    const routes = Object.entries(API_ROUTES as Record<string, RouteSpec>).filter(
      ([, route]) => route.query !== undefined,
    );
    expect(routes.map(([id]) => id)).toContain("listThreads");
    for (const [id, route] of routes) {
      const parsed = route.query?.safeParse(Object.assign(Object.create(null), { zz: "1" }));
      expect({ id, issues: parsed?.error?.issues.map((i) => i.code) }).toEqual({
        id,
        issues: ["unrecognized_keys"],
      });
    }
  });

  it("a listing refuses what it cannot filter on, with the failing parameter, reaching no tenant", async () => {
    const { request, fake } = setup();
    const reserved = "a metadata key may not be constructor or prototype";
    const cases: [string, { path: string; message: unknown }[]][] = [
      [
        "metadata[__proto__]=x",
        [{ path: "metadata[__proto__]", message: "__proto__ cannot be a key" }],
      ],
      ["metadata[constructor]=x", [{ path: "metadata[constructor]", message: reserved }]],
      ["metadata[prototype]=x", [{ path: "metadata[prototype]", message: reserved }]],
      ["metadata[]=x", [{ path: "metadata[]", message: "a metadata key is 1-64 characters" }]],
      [
        `metadata[${"k".repeat(65)}]=x`,
        [{ path: `metadata[${"k".repeat(65)}]`, message: "a metadata key is 1-64 characters" }],
      ],
      [
        `metadata[team]=${"v".repeat(513)}`,
        [{ path: "metadata[team]", message: "a metadata value is at most 512 characters" }],
      ],
      ["metadata=x", [{ path: "metadata", message: anyMessage }]],
      ["state=idle", [{ path: "state", message: "Unknown field" }]],
      ["__proto__=x", [{ path: "__proto__", message: "Unknown field" }]],
    ];
    for (const [search, errors] of cases) {
      const res = await request(`/v1/threads?${search}`);
      expect({ search, problem: await problemOf(res) }).toEqual({
        search,
        problem: invalid("query", errors),
      });
    }
    const nested = await request("/v1/threads?metadata[a][b]=c");
    expect(await problemOf(nested)).toEqual({
      ...invalid("query", [
        { path: "metadata[a][b]", message: "Brackets hold one key: name[key]=value" },
      ]),
      detail: "The query is invalid.",
    });
    const twice = await request("/v1/threads?status=idle&status=running");
    expect(await problemOf(twice)).toMatchObject({
      code: "invalid_request",
      errors: [{ path: "status", message: "Sent more than once" }],
    });
    const many = Array.from({ length: 17 }, (_, i) => `metadata[k${i}]=v`).join("&");
    expect(await problemOf(await request(`/v1/threads?${many}`))).toEqual(
      invalid("query", [{ path: "metadata", message: "at most 16 metadata filters" }]),
    );
    expect(fake.calls).toEqual([]);
  });

  it("the other lists refuse an unknown or repeated parameter too", async () => {
    const { request, fake } = setup();
    for (const path of ["/v1/threads/t1/history", "/v1/keys", "/v1/usage", "/v1/hooks"]) {
      const unknown = await request(`${path}?limit=5&zz=1`);
      expect(await problemOf(unknown)).toEqual(
        invalid("query", [{ path: "zz", message: "Unknown field" }]),
      );
      const twice = await request(`${path}?limit=5&limit=5`);
      expect(await problemOf(twice)).toMatchObject({
        code: "invalid_request",
        errors: [{ path: "limit", message: "Sent more than once" }],
      });
    }
    expect(fake.calls).toEqual([]);
  });
});

describe("metadata keys a request sets", () => {
  it("a create, a fork and a patch refuse the reserved names, __proto__ included", async () => {
    const { json, request, fake } = setup();
    const reserved = "a metadata key may not be constructor or prototype";
    for (const key of ["__proto__", "constructor", "prototype"]) {
      const metadata = `{"${key}":"x"}`;
      const sends = [
        json("/v1/threads", undefined, { body: `{"id":"t1","metadata":${metadata}}` }),
        json("/v1/threads/t1/fork", undefined, { body: `{"metadata":${metadata}}` }),
        request("/v1/threads/t1", {
          method: "PATCH",
          headers: { "content-type": "application/merge-patch+json" },
          body: `{"metadata":${metadata}}`,
        }),
      ];
      for (const res of await Promise.all(sends)) {
        expect(await problemOf(res)).toEqual(
          invalid("request body", [
            {
              path: `/metadata/${key}`,
              message: key === "__proto__" ? "__proto__ cannot be a key" : reserved,
            },
          ]),
        );
      }
    }
    expect(fake.calls).toEqual([]);
  });
});
