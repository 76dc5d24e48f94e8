/**
 * Input that used to poison a thread or answer 5xx, through the running service: JSON nested
 * thousands of levels deep, imports with very long lines or no line end at all, request bodies
 * that break off mid-upload, and settings that were accepted and then failed every turn. Each is
 * refused at the door with a 4xx and leaves nothing stored, or is taken and keeps working.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import app from "../../../worker/index.ts";
import { breakingStream } from "../../helpers/streams.ts";
import { api, BASE, DEV_KEY, importRollout, json, newThreadId, post } from "../helpers/api.ts";
import { ADMIN_KEY } from "../helpers/tenancy.ts";

interface Thread {
  id: string;
  config: { tools: unknown[]; context_sections: Record<string, unknown> };
  turn_count: number;
}

interface Problem {
  status: number;
  code: string;
  detail: string;
  errors?: { path: string; message: string }[];
}

/** The status, code and field errors of a problem answer (it must be problem+json). */
async function problem(res: Response) {
  expect(res.headers.get("content-type")).toBe("application/problem+json");
  const body = (await res.json()) as Problem;
  return { status: res.status, code: body.code, errors: body.errors };
}

/** A POST of raw JSON text (a deep value cannot be built as an object and serialized). */
function postText(path: string, text: string): Promise<Response> {
  return exports.default.fetch(`${BASE}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEV_KEY}`, "content-type": "application/json" },
    body: text,
  });
}

const arrays = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;
const toolsWithParameters = (parameters: string) =>
  `[{"name":"lookup","parameters":{"type":"object","x":${parameters}}}]`;

async function expectNoThread(id: string): Promise<void> {
  expect((await api("GET", `/v1/threads/${id}`)).status).toBe(404);
}

const exportOf = async (id: string) => {
  const res = await api("GET", `/v1/threads/${id}/rollout`);
  expect(res.status).toBe(200);
  return new TextDecoder().decode(await res.arrayBuffer());
};

/** The lines of an export after its `session_meta`, which an import writes anew. */
const afterMeta = (jsonl: string) => jsonl.split("\n").slice(1);

let logged: unknown[][] = [];
afterEach(() => {
  vi.restoreAllMocks();
  logged = [];
});
/** Collects what the worker logs as errors (every 500 is logged). */
function watchErrors(): void {
  vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
    logged.push(args);
  });
}

describe("deeply nested JSON is refused at the door, and nothing is stored", () => {
  it("tool parameters thousands of levels deep in a create body: 400 naming the path, no thread", async () => {
    watchErrors();
    // ~1,900: once accepted, with a line that no longer decoded; 2,000 (a 4 KB body) and
    // 2,300-2,500: once a 500, the last ones with the thread stored anyway.
    for (const levels of [1_900, 2_000, 2_300, 2_500]) {
      const id = newThreadId();
      const body = `{"id":"${id}","tools":${toolsWithParameters(arrays(levels))}}`;
      expect(await problem(await postText("/v1/threads", body))).toEqual({
        status: 400,
        code: "invalid_request",
        errors: [
          {
            path: `/tools/0/parameters/x${"/0".repeat(60)}`,
            message: "Nested deeper than 64 levels",
          },
        ],
      });
      await expectNoThread(id);
    }
    expect(logged).toEqual([]);
  });

  it("parameters deeper than 32 levels but within the body's 64: 400, no thread", async () => {
    const id = newThreadId();
    const body = `{"id":"${id}","tools":${toolsWithParameters(arrays(40))}}`;
    expect(await problem(await postText("/v1/threads", body))).toEqual({
      status: 400,
      code: "invalid_request",
      errors: [
        {
          path: `/tools/0/parameters/x${"/0".repeat(31)}`,
          message: "parameters nests deeper than 32 levels",
        },
      ],
    });
    await expectNoThread(id);
  });

  it("the same in a turn's overrides: 400, and the thread, its config and rollout are unchanged", async () => {
    watchErrors();
    const id = newThreadId();
    const created = await json<Thread>(await post("/v1/threads", { id }), 201);
    const before = await exportOf(id);
    for (const levels of [40, 2_000, 2_500]) {
      const body = `{"input":"hi","overrides":{"tools":${toolsWithParameters(arrays(levels))}}}`;
      const answer = await problem(await postText(`/v1/threads/${id}/turns`, body));
      expect([answer.status, answer.errors?.[0]?.path.startsWith("/overrides/tools/0/")]).toEqual([
        400,
        true,
      ]);
    }
    expect(await json<Thread>(await api("GET", `/v1/threads/${id}`))).toEqual(created);
    expect(await exportOf(id)).toBe(before);
    expect(logged).toEqual([]);
  });

  it("parameters 32 levels deep work everywhere: turn, export, import, restore", async () => {
    const id = newThreadId();
    const body = `{"id":"${id}","tools":${toolsWithParameters(arrays(30))}}`;
    const created = await json<Thread>(await postText("/v1/threads", body), 201);
    await json(await post(`/v1/threads/${id}/turns`, { input: "hi" }));
    const exported = await exportOf(id);
    const copy = newThreadId();
    const imported = await json<Thread>(await importRollout(copy, exported), 201);
    expect(imported.config).toEqual(created.config);
    expect(afterMeta(await exportOf(copy))).toEqual(afterMeta(exported));
    const restored = await json<Thread>(await post(`/v1/threads/${id}/restore`));
    expect(restored.config).toEqual(created.config);
  });

  it("an imported line nested deeper than 64 levels: 400 naming the line, no thread", async () => {
    const id = newThreadId();
    const meta = '{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s"}}';
    const deep = `{"timestamp":"2026-01-01T00:00:01Z","type":"future_line","payload":${arrays(2_000)}}`;
    const res = await importRollout(id, `${meta}\n${deep}\n`);
    expect(await problem(res)).toEqual({
      status: 400,
      code: "invalid_request",
      errors: [
        {
          path: "/line/2",
          message: `nested deeper than 64 levels (at /payload${"/0".repeat(63)})`,
        },
      ],
    });
    await expectNoThread(id);
  });

  it("an imported item nested past an item's 48 levels stays a line of its own, out of history", async () => {
    const id = newThreadId();
    const meta = '{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s"}}';
    const item = (text: string, extra: string) =>
      `{"timestamp":"2026-01-01T00:00:01Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"${text}","extra":${extra}}]}}`;
    const lines = [meta, item("kept", arrays(40)), item("too deep", arrays(55))];
    await json(await importRollout(id, `${lines.join("\n")}\n`), 201);
    const history = await json<{ data: { content: { text: string }[] }[] }>(
      await api("GET", `/v1/threads/${id}/history`),
    );
    expect(history.data.map((i) => i.content[0]?.text)).toEqual(["kept"]);
    // The lines as they came, then the configuration the import resolved.
    const exported = afterMeta(await exportOf(id));
    expect(exported.slice(0, 2)).toEqual(lines.slice(1));
    expect(exported.slice(2).map((l) => (l === "" ? "" : JSON.parse(l).type))).toEqual([
      "spindle_config",
      "",
    ]);
    // A compaction writes the kept item into its replacement history: still a readable line.
    await json(await post(`/v1/threads/${id}/compact`));
    const copy = newThreadId();
    await json(await importRollout(copy, await exportOf(id)), 201);
  });
});

describe("imports: linear in line length, size limits enforced while streaming", () => {
  const meta = '{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s"}}';
  const userLine = (text: string) =>
    `{"timestamp":"2026-01-01T00:00:01Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"${text}"}]}}`;

  /** A body streamed in 64 KiB chunks, as a network upload arrives. */
  function streamed(text: string): ReadableStream<Uint8Array> {
    const bytes = new TextEncoder().encode(text);
    let offset = 0;
    return new ReadableStream<Uint8Array>({
      pull(controller) {
        if (offset >= bytes.length) return controller.close();
        controller.enqueue(bytes.slice(offset, offset + 64 * 1024));
        offset += 64 * 1024;
      },
    });
  }
  const upload = (id: string, body: ReadableStream<Uint8Array> | string) =>
    exports.default.fetch(`${BASE}/v1/threads/import?id=${id}`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEV_KEY}`, "content-type": "application/x-ndjson" },
      body,
      duplex: "half",
    } as RequestInit);

  it("one 16 MB line imports, whole (time printed, not asserted)", async () => {
    const id = newThreadId();
    const text = "q".repeat(16_000_000);
    const started = performance.now();
    const res = await upload(id, streamed(`${meta}\n${userLine(text)}\n`));
    const ms = performance.now() - started;
    await json(res, 201);
    console.log(`import of one 16 MB line, streamed in 64 KiB chunks: ${ms.toFixed(0)} ms`);
    const history = await json<{ data: { content: { text: string }[] }[] }>(
      await api("GET", `/v1/threads/${id}/history`),
    );
    expect(history.data.map((i) => i.content[0]?.text.length)).toEqual([16_000_000]);
  });

  it("66 MiB without a line end: 413 at the line limit, long before the body's end", async () => {
    const id = newThreadId();
    const started = performance.now();
    const res = await upload(id, streamed(`${meta}\n${"x".repeat(66 * 1024 * 1024)}`));
    expect(await problem(res)).toEqual({
      status: 413,
      code: "payload_too_large",
      errors: [{ path: "/line/2", message: "the line is longer than 33554432 bytes" }],
    });
    console.log(
      `66 MiB with no line end refused after ${(performance.now() - started).toFixed(0)} ms`,
    );
    await expectNoThread(id);
  });

  it("66 MiB of short lines: 413 at the body limit while streaming", async () => {
    const id = newThreadId();
    const blank = `${" ".repeat(1024 * 1024 - 1)}\n`;
    const res = await upload(id, streamed(`${meta}\n${blank.repeat(66)}`));
    expect(await problem(res)).toEqual({
      status: 413,
      code: "payload_too_large",
      errors: undefined,
    });
    await expectNoThread(id);
  });

  it("an export of a thread with an 8 MiB turn imports again, line for line", async () => {
    const id = newThreadId();
    await json(await post("/v1/threads", { id }), 201);
    // An inline image, so that the turn is 8 MiB and still fits the model's window.
    const image = `data:image/png;base64,${"A".repeat(8 * 1024 * 1024 - 256)}`;
    const content = [
      { type: "input_text", text: "look" },
      { type: "input_image", image_url: image },
    ];
    await json(
      await post(`/v1/threads/${id}/turns`, {
        input: [{ type: "message", role: "user", content }],
      }),
    );
    const exported = await exportOf(id);
    const copy = newThreadId();
    const started = performance.now();
    await json(await upload(copy, exported), 201);
    console.log(
      `re-import of an export with an 8 MiB turn (${exported.length} bytes): ${(performance.now() - started).toFixed(0)} ms`,
    );
    expect(afterMeta(await exportOf(copy))).toEqual(afterMeta(exported));
  });
});

describe("a request body that breaks off is the client's failure: 400, nothing stored, nothing logged", () => {
  /** The worker's own fetch handler, given the broken stream directly (a service call would end it cleanly). */
  async function send(
    path: string,
    type: string,
    body: ReadableStream<Uint8Array>,
    length?: number,
  ) {
    const ctx = createExecutionContext();
    const res = await app.fetch(
      new Request(`${BASE}${path}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${DEV_KEY}`,
          "content-type": type,
          ...(length === undefined ? {} : { "content-length": String(length) }),
        },
        body,
        duplex: "half",
      } as RequestInit),
      env,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    return res;
  }

  const broken = { status: 400, code: "invalid_request", errors: undefined };

  it("a JSON body, chunked or with a Content-Length", async () => {
    watchErrors();
    for (const length of [undefined, 64]) {
      const id = newThreadId();
      const res = await send(
        "/v1/threads",
        "application/json",
        breakingStream(`{"id":"${id}","cw`),
        length,
      );
      expect(await problem(res)).toEqual(broken);
      await expectNoThread(id);
    }
    expect(logged).toEqual([]);
  });

  it("an import, mid-line", async () => {
    watchErrors();
    const id = newThreadId();
    const meta = '{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s"}}';
    const res = await send(
      `/v1/threads/import?id=${id}`,
      "application/x-ndjson",
      breakingStream(`${meta}\n{"timestamp":"2026-01-01T00:00:01Z","ty`),
    );
    expect(await problem(res)).toEqual(broken);
    await expectNoThread(id);
    expect(logged).toEqual([]);
  });
});

describe("settings that could never work are refused at the door", () => {
  it("an unknown provider, on create and in a turn's overrides", async () => {
    const id = newThreadId();
    const message =
      'provider "nope" is not configured; available here: local, openai, anthropic, openai-chat';
    expect(await problem(await post("/v1/threads", { id, provider: "nope" }))).toEqual({
      status: 400,
      code: "invalid_request",
      errors: [{ path: "/provider", message }],
    });
    await expectNoThread(id);
    await json(await post("/v1/threads", { id }), 201);
    const turn = await post(`/v1/threads/${id}/turns`, {
      input: "hi",
      overrides: { provider: "nope" },
    });
    expect(await problem(turn)).toEqual({
      status: 400,
      code: "invalid_request",
      errors: [{ path: "/overrides/provider", message }],
    });
    expect((await json<Thread>(await api("GET", `/v1/threads/${id}`))).turn_count).toBe(0);
  });

  it("instructions that alone overflow the model's window, which no turn could run with", async () => {
    const id = newThreadId();
    const body = { id, model: "spindle-local-lite", base_instructions: "x".repeat(100_000) };
    expect(await problem(await post("/v1/threads", body))).toEqual({
      status: 400,
      code: "context_window_exceeded",
      errors: undefined,
    });
    await expectNoThread(id);
  });

  it("a context section id __proto__, which a JavaScript object would drop", async () => {
    const id = newThreadId();
    const body = `{"id":"${id}","context_sections":{"__proto__":{"role":"user","text":"x"}}}`;
    expect(await problem(await postText("/v1/threads", body))).toEqual({
      status: 400,
      code: "invalid_request",
      errors: [{ path: "/context_sections/__proto__", message: "__proto__ cannot be a key" }],
    });
    await expectNoThread(id);
  });

  it("section ids named like Object.prototype members are ordinary ids", async () => {
    const id = newThreadId();
    const sections = {
      constructor: { role: "user", text: "one" },
      toString: { role: "developer", text: "two" },
    };
    const created = await json<Thread>(
      await post("/v1/threads", { id, context_sections: sections }),
      201,
    );
    expect(created.config.context_sections).toEqual(sections);
    await json(await post(`/v1/threads/${id}/turns`, { input: "hi" }));
    const prompt = await (await api("GET", `/v1/threads/${id}/prompt`)).text();
    expect([prompt.includes('id=\\"constructor\\"'), prompt.includes('id=\\"toString\\"')]).toEqual(
      [true, true],
    );
  });

  it("a history limit that is not decimal digits", async () => {
    const id = newThreadId();
    await json(await post("/v1/threads", { id }), 201);
    for (const limit of ["0x10", "1e3", "1.0", "%205"]) {
      expect(await problem(await api("GET", `/v1/threads/${id}/history?limit=${limit}`))).toEqual({
        status: 400,
        code: "invalid_request",
        errors: [{ path: "limit", message: "1-1000 items, in decimal digits only" }],
      });
    }
  });

  it("a list's page size that is not decimal digits, on every list", async () => {
    const lists = [
      { path: "/v1/threads", key: DEV_KEY, max: 100 },
      { path: "/v1/usage", key: DEV_KEY, max: 1000 },
      { path: "/v1/admin/tenants", key: ADMIN_KEY, max: 100 },
    ];
    for (const { path, key, max } of lists) {
      for (const limit of ["0x10", "1e1", "1.0", "%205", "+5"]) {
        expect(await problem(await api("GET", `${path}?limit=${limit}`, undefined, key))).toEqual({
          status: 400,
          code: "invalid_request",
          errors: [{ path: "limit", message: `1-${max} items, in decimal digits only` }],
        });
      }
      expect((await api("GET", `${path}?limit=05`, undefined, key)).status).toBe(200);
    }
  });
});
