import { describe, expect, it } from "vitest";
import { jsonBodyMaxBytes, turnBodyMaxBytes } from "../../../shared/api/index.ts";
import { keyA, problemOf, setup, thread } from "./fake-thread.ts";

const chunkBytes = 64 * 1024;

/** `{"input":"xxx…"}` of exactly `totalBytes` bytes. */
function turnBodyOfSize(totalBytes: number): Uint8Array {
  const frame = '{"input":""}';
  return new TextEncoder().encode(`{"input":"${"x".repeat(totalBytes - frame.length)}"}`);
}

/** A chunked body: a stream with no Content-Length, so only counting the bytes can catch it. */
function streamed(path: string, bytes: Uint8Array): Request {
  let offset = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(offset, offset + chunkBytes));
      offset += chunkBytes;
    },
  });
  return new Request(`http://spindle.test${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${keyA}`, "content-type": "application/json" },
    body,
    duplex: "half",
  } as RequestInit);
}

const tooLarge = (maxBytes: number) => ({
  type: "/problems/payload_too_large",
  title: "The request body is too large",
  status: 413,
  detail: `The request body is larger than ${maxBytes} bytes.`,
  code: "payload_too_large",
});

describe("body limits", () => {
  it("a streamed turn body one byte over 8 MiB is 413 and never reaches the DO", async () => {
    const { app, env, fake } = setup();
    const req = streamed("/v1/threads/t1/turns", turnBodyOfSize(turnBodyMaxBytes + 1));
    expect(req.headers.has("content-length")).toBe(false);
    const res = await app.request(req, undefined, env);
    expect(res.status).toBe(413);
    expect(await problemOf(res)).toEqual(tooLarge(turnBodyMaxBytes));
    expect(fake.calls).toEqual([]);
  });

  it("a streamed turn body of exactly 8 MiB is accepted", async () => {
    const { app, env, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await app.request(
      streamed("/v1/threads/t1/turns", turnBodyOfSize(turnBodyMaxBytes)),
      undefined,
      env,
    );
    expect(res.status).toBe(200);
    expect(fake.calls.map((c) => c.method)).toEqual(["startTurn"]);
  });

  it("other JSON bodies stop at 1 MiB, streamed or declared", async () => {
    const { app, env, request, fake } = setup();
    const body = new TextEncoder().encode(
      `{"base_instructions":"${"x".repeat(jsonBodyMaxBytes)}"}`,
    );
    const chunked = await app.request(streamed("/v1/threads", body), undefined, env);
    expect(await problemOf(chunked)).toEqual(tooLarge(jsonBodyMaxBytes));

    const declared = await request("/v1/threads", {
      method: "POST",
      headers: { "content-type": "application/json", "content-length": String(body.length) },
      body,
    });
    expect(await problemOf(declared)).toEqual(tooLarge(jsonBodyMaxBytes));
    expect(fake.calls).toEqual([]);
  });

  it("a 2 MiB turn body is within the turn limit though over the default one", async () => {
    const { app, env, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const res = await app.request(
      streamed("/v1/threads/t1/turns", turnBodyOfSize(2 * jsonBodyMaxBytes)),
      undefined,
      env,
    );
    expect(res.status).toBe(200);
  });

  it("the body is not read before the key is checked", async () => {
    const { app, env } = setup();
    let pulls = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulls++;
        controller.enqueue(new Uint8Array(chunkBytes));
      },
    });
    const req = new Request("http://spindle.test/v1/threads/t1/turns", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
      duplex: "half",
    } as RequestInit);
    const res = await app.request(req, undefined, env);
    expect(res.status).toBe(401);
    // A stream pulls ahead once on its own (highWaterMark 1); nothing more was read.
    expect(pulls).toBeLessThanOrEqual(1);
  });
});
