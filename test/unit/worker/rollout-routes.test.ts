import { describe, expect, it, vi } from "vitest";
import { importBodyMaxBytes } from "../../../shared/api/index.ts";
import { createApp } from "../../../worker/app.ts";
import { breakingStream } from "../../helpers/streams.ts";
import { apiKeys, FakeThreads, keyA, problemOf, setup, thread } from "./fake-thread.ts";

const rollout = [
  '{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"x"}}',
  '{"timestamp":"2026-01-01T00:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}',
].join("\n");

/** An app whose imports stop at `importMaxBytes`, over a fresh fake. */
function importSetup(importMaxBytes?: number) {
  const fake = new FakeThreads();
  const app = createApp({
    newThreadId: () => "thr_new",
    ...(importMaxBytes === undefined ? {} : { importMaxBytes }),
  });
  const env = fake.env({ SPINDLE_ENV: "production", SPINDLE_API_KEYS: apiKeys });
  const upload = (
    body: BodyInit | null,
    contentType: string | undefined,
    path = "/v1/threads/import",
    headers: Record<string, string> = {},
  ) =>
    app.request(
      new Request(`http://spindle.test${path}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${keyA}`,
          ...(contentType === undefined ? {} : { "content-type": contentType }),
          ...headers,
        },
        body,
        duplex: "half",
      } as RequestInit),
      undefined,
      env,
    );
  return { fake, upload };
}

/** A chunked body of `totalBytes` bytes in 1 KiB chunks that counts how many chunks were read. */
function countedBody(totalBytes: number) {
  const chunkBytes = 1024;
  const state = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      const sent = state.pulled * chunkBytes;
      if (sent >= totalBytes) return controller.close();
      state.pulled++;
      controller.enqueue(new Uint8Array(Math.min(chunkBytes, totalBytes - sent)).fill(0x20));
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { stream, state };
}

describe("POST /v1/threads/{id}/fork", () => {
  it("reads the source through forkSource, then creates the target in the same tenant", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await json("/v1/threads/t1/fork", { id: "t2", before_turn: "u3" });
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe("/v1/threads/t2");
    expect(await res.json()).toEqual({ ...thread("t2"), forked_from: "t1" });
    expect(fake.calls).toEqual([
      { name: "A:t1", method: "forkSource", args: [{ borrower: "t2", beforeTurn: "u3" }] },
      {
        name: "A:t2",
        method: "createFromRollout",
        args: [
          {
            tenant: "A",
            threadId: "t2",
            lines: expect.any(ReadableStream),
            forkedFrom: "t1",
            warnings: [],
            source: "fork",
          },
        ],
      },
    ]);
    // The target got the source's lines as they were.
    expect(fake.received.get("A:t2")).toBe(fake.rolloutText);
  });

  it("without an id the fork gets a new one, and without before_turn the DO picks the end", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await request("/v1/threads/t1/fork", { method: "POST" });
    expect(res.headers.get("location")).toBe("/v1/threads/thr_generated");
    expect(fake.calls.map((c) => [c.name, c.method])).toEqual([
      ["A:t1", "forkSource"],
      ["A:thr_generated", "createFromRollout"],
    ]);
    expect(fake.calls[0]?.args).toEqual([{ borrower: "thr_generated" }]);
  });

  it("passes the segments the source lends on to the fork; SPINDLE_FORKS=copy borrows none", async () => {
    const segment = {
      r2_key: "threads/A/t1/segments/1-9",
      first_seq: 2,
      last_seq: 9,
      bytes: 9,
      sha256: "s",
    };
    for (const [vars, shared] of [
      [{}, [segment]],
      [{ SPINDLE_FORKS: "copy" }, undefined],
    ] as const) {
      const { json, fake } = setup(vars);
      fake.threads.set("A:t1", thread("t1"));
      fake.sharedSegments = [segment];
      expect((await json("/v1/threads/t1/fork", { id: "t2" })).status).toBe(201);
      const [source, target] = fake.calls;
      expect(source?.args).toEqual([shared ? { borrower: "t2" } : {}]);
      expect((target?.args[0] as { shared?: unknown } | undefined)?.shared).toEqual(shared);
    }
  });

  it("a target that exists is 409 thread_exists and the source's stream is released", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    fake.threads.set("A:t2", thread("t2"));
    const cancel = vi.spyOn(ReadableStream.prototype, "cancel");
    try {
      const res = await json("/v1/threads/t1/fork", { id: "t2" });
      expect(await problemOf(res)).toMatchObject({ status: 409, code: "thread_exists" });
      expect(cancel).toHaveBeenCalled();
    } finally {
      cancel.mockRestore();
    }
    expect(fake.received.has("A:t2")).toBe(false);
  });

  it("a missing source is 404 and no target is addressed", async () => {
    const { json, fake } = setup();
    const res = await json("/v1/threads/t1/fork", { id: "t2" });
    expect(res.status).toBe(404);
    expect(fake.names).toEqual(["A:t1"]);
  });

  it("an unknown before_turn is the DO's turn_not_found; bad ids are 400", async () => {
    const { json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    fake.failures.set("forkSource", { code: "turn_not_found", detail: "No turn u9." });
    expect(await problemOf(await json("/v1/threads/t1/fork", { before_turn: "u9" }))).toMatchObject(
      { status: 404, code: "turn_not_found" },
    );
    const bad = await json("/v1/threads/t1/fork", { id: "B:t2", before_turn: "" });
    expect(await problemOf(bad)).toMatchObject({
      code: "invalid_request",
      errors: [
        { path: "/id", message: "thread ids are 1-64 characters of [A-Za-z0-9_-]" },
        { path: "/before_turn", message: "turn ids are 1-64 characters of [A-Za-z0-9_-]" },
      ],
    });
  });
});

describe("POST /v1/threads/import", () => {
  it("streams a JSONL body to createFromRollout on the new thread and answers 201", async () => {
    const { upload, fake } = importSetup();
    const res = await upload(rollout, "application/x-ndjson", "/v1/threads/import?id=imp1");
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe("/v1/threads/imp1");
    expect(await res.json()).toEqual(thread("imp1"));
    expect(fake.calls).toEqual([
      {
        name: "A:imp1",
        method: "createFromRollout",
        args: [
          { tenant: "A", threadId: "imp1", lines: expect.any(ReadableStream), source: "import" },
        ],
      },
    ]);
    expect(fake.received.get("A:imp1")).toBe(rollout);
  });

  it("with an Idempotency-Key and no id, names the thread after the key and passes the key on", async () => {
    const { upload, fake } = importSetup();
    const key = { "idempotency-key": "imp-k" };
    await upload(rollout, "application/x-ndjson", "/v1/threads/import", key);
    await upload(rollout, "application/x-ndjson", "/v1/threads/import", key);
    await upload(rollout, "application/x-ndjson", "/v1/threads/import?id=imp2", key);
    const names = fake.calls.map((c) => c.name);
    expect(names[0]).toMatch(/^A:thr_[0-9a-f]{40}$/);
    expect(names.slice(1)).toEqual([names[0], "A:imp2"]);
    const keys = fake.calls.map(
      (c) => (c.args[0] as { idempotency?: { key: string; fingerprint: string } }).idempotency,
    );
    expect(keys.map((k) => k?.key)).toEqual(["imp-k", "imp-k", "imp-k"]);
    // The query is part of the request; the body's digest is added by the DO.
    expect(keys[1]?.fingerprint).toBe(keys[0]?.fingerprint);
    expect(keys[2]?.fingerprint).not.toBe(keys[0]?.fingerprint);
  });

  it("accepts the JSONL media types and text/plain, with parameters, in any case", async () => {
    for (const type of [
      "application/x-ndjson",
      "application/jsonl",
      "text/plain",
      "Text/Plain; charset=utf-8",
    ]) {
      const { upload } = importSetup();
      expect((await upload(rollout, type)).status).toBe(201);
    }
  });

  it("other media types, or none, are 415 with Accept-Post, before the DO is called", async () => {
    for (const type of ["application/json", "application/x-www-form-urlencoded", undefined]) {
      const { upload, fake } = importSetup();
      const res = await upload(new Blob([rollout]), type);
      expect(res.status).toBe(415);
      expect(res.headers.get("accept-post")).toBe(
        "application/x-ndjson, application/jsonl, text/plain",
      );
      expect(await problemOf(res)).toEqual({
        type: "/problems/unsupported_media_type",
        title: "The request body's media type is not accepted",
        status: 415,
        detail:
          "Send the rollout as JSONL, with Content-Type application/x-ndjson or application/jsonl or text/plain.",
        code: "unsupported_media_type",
      });
      expect(fake.calls).toEqual([]);
    }
  });

  it("a body over the limit is 413 while streaming, stops being read, and creates nothing", async () => {
    const { upload, fake } = importSetup(64 * 1024);
    const body = countedBody(1024 * 1024);
    const res = await upload(body.stream, "application/x-ndjson");
    expect(res.status).toBe(413);
    expect(await problemOf(res)).toMatchObject({
      code: "payload_too_large",
      detail: "The request body is larger than 65536 bytes.",
    });
    // The DO was called and started reading: the limit was hit mid-stream, not up front.
    expect(fake.calls.map((c) => c.method)).toEqual(["createFromRollout"]);
    expect(body.state.cancelled).toBe(true);
    expect(body.state.pulled).toBeLessThan(80);
    expect(fake.threads.size).toBe(0);
  });

  it("a body of exactly the limit is accepted", async () => {
    const { upload, fake } = importSetup(64 * 1024);
    const res = await upload(countedBody(64 * 1024).stream, "application/x-ndjson");
    expect(res.status).toBe(201);
    expect(fake.received.get("A:thr_new")).toHaveLength(64 * 1024);
  });

  it("a declared Content-Length over the limit is 413 without calling the DO", async () => {
    const { upload, fake } = importSetup(1024);
    const res = await upload("x".repeat(2048), "text/plain", undefined, {
      "content-length": "2048",
    });
    expect(res.status).toBe(413);
    expect(fake.calls).toEqual([]);
  });

  it("a body that breaks off mid-upload is 400, and nothing is created", async () => {
    const { upload, fake } = importSetup();
    const res = await upload(breakingStream(`${rollout}\n{"timest`), "application/x-ndjson");
    expect(await problemOf(res)).toEqual({
      type: "/problems/invalid_request",
      title: "The request is invalid",
      status: 400,
      detail: "The request body broke off before its end.",
      code: "invalid_request",
    });
    expect(fake.threads.size).toBe(0);
  });

  it("the default limit is 64 MiB", () => {
    expect(importBodyMaxBytes).toBe(64 * 1024 * 1024);
  });

  it("a DO that fails on the broken upload by rejecting still gives 413", async () => {
    const { upload, fake } = importSetup(1024);
    fake.failures.set("createFromRollout", new Error("stream errored"));
    // The fake throws before reading: make it read first, as a real DO would.
    const real = fake.namespace.getByName;
    fake.namespace.getByName = (name: string) => {
      const stub = real(name);
      return {
        ...stub,
        createFromRollout: async (req) => {
          await new Response(req.lines).text();
          return stub.createFromRollout(req);
        },
      };
    };
    const res = await upload(countedBody(8 * 1024).stream, "text/plain");
    expect(res.status).toBe(413);
  });

  it("a malformed line is the DO's invalid_request naming the line", async () => {
    const { upload } = importSetup();
    const res = await upload(`${rollout}\n{oops\n`, "application/jsonl");
    expect(await problemOf(res)).toMatchObject({
      status: 400,
      code: "invalid_request",
      errors: [{ path: "/line/3", message: "not JSON" }],
    });
  });

  it("an existing id is 409 thread_exists; a bad id is 400 before the body is read", async () => {
    const { upload, fake } = importSetup();
    fake.threads.set("A:imp1", thread("imp1"));
    const res = await upload(rollout, "text/plain", "/v1/threads/import?id=imp1");
    expect(await problemOf(res)).toMatchObject({ status: 409, code: "thread_exists" });
    const bad = await upload(rollout, "text/plain", "/v1/threads/import?id=a:b");
    expect(await problemOf(bad)).toMatchObject({
      code: "invalid_request",
      errors: [{ path: "id", message: "thread ids are 1-64 characters of [A-Za-z0-9_-]" }],
    });
  });

  it("an import without a body is 400 naming line 1", async () => {
    const { upload, fake } = importSetup();
    const res = await upload(null, "application/x-ndjson");
    expect(await problemOf(res)).toEqual({
      type: "/problems/invalid_request",
      title: "The request is invalid",
      status: 400,
      detail: "The rollout is empty.",
      code: "invalid_request",
      errors: [{ path: "/line/1", message: "No rollout line" }],
    });
    expect(fake.calls).toEqual([]);
  });
});

describe("GET /v1/threads/{id}/rollout", () => {
  it("streams the DO's JSONL as application/x-ndjson", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await request("/v1/threads/t1/rollout");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/x-ndjson");
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="t1.jsonl"');
    expect(await res.text()).toBe(fake.rolloutText);
    expect(res.headers.get("spindle-missing-lines")).toBeNull();
    expect(fake.calls).toEqual([
      { name: "A:t1", method: "exportRollout", args: [{ allowIncomplete: false }] },
    ]);
  });

  it("passes allow_incomplete on and reports the lines the export lacks in a header", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    fake.missingLines = 7;
    const res = await request("/v1/threads/t1/rollout?allow_incomplete=true");
    expect(res.status).toBe(200);
    expect(res.headers.get("spindle-missing-lines")).toBe("7");
    expect(await res.text()).toBe(fake.rolloutText);
    expect(fake.calls[0]?.args).toEqual([{ allowIncomplete: true }]);
  });

  it("a rollout_incomplete failure is a 409 problem, and a bad allow_incomplete a 400", async () => {
    const { request, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    fake.failures.set("exportRollout", { code: "rollout_incomplete", detail: "2 of 9 lines." });
    expect(await problemOf(await request("/v1/threads/t1/rollout"))).toMatchObject({
      status: 409,
      code: "rollout_incomplete",
      detail: "2 of 9 lines.",
    });
    const bad = await problemOf(await request("/v1/threads/t1/rollout?allow_incomplete=maybe"));
    expect(bad).toMatchObject({
      status: 400,
      code: "invalid_request",
      errors: [expect.objectContaining({ path: "allow_incomplete" })],
    });
  });

  it("a missing thread is a 404 problem", async () => {
    const { request } = setup();
    expect(await problemOf(await request("/v1/threads/t1/rollout"))).toMatchObject({
      status: 404,
      code: "not_found",
    });
  });
});
