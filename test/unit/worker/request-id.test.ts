import { describe, expect, it, vi } from "vitest";
import { DEV_API_KEY } from "../../../worker/auth.ts";
import { keyA, setup, thread } from "./fake-thread.ts";

const GENERATED_ID = /^req_[0-9a-f]{32}$/;

describe("x-request-id", () => {
  it("every answer carries one: a success, a refusal, an unknown route, a problem", async () => {
    const { request, json, fake } = setup();
    fake.threads.set("A:t1", thread("t1"));
    const answers = [
      await request("/v1/threads/t1"),
      await request("/v1/threads/t1", { key: "" }),
      await request("/nowhere"),
      await request("/healthz"),
      await json("/v1/threads/t1/turns", { nope: 1 }),
    ];
    expect(answers.map((r) => r.status)).toEqual([200, 401, 404, 200, 400]);
    for (const res of answers) expect(res.headers.get("x-request-id")).toMatch(GENERATED_ID);
  });

  it("echoes a valid incoming id, and replaces an invalid one", async () => {
    const { request } = setup();
    const sent = async (id: string) =>
      (await request("/healthz", { headers: { "x-request-id": id } })).headers.get("x-request-id");
    expect(await sent("0f8fad5b-d9cb-469f-a165-70867728950e")).toBe(
      "0f8fad5b-d9cb-469f-a165-70867728950e",
    );
    expect(await sent("trace:1.2_3")).toBe("trace:1.2_3");
    expect(await sent("two words")).toMatch(GENERATED_ID);
    expect(await sent("x".repeat(129))).toMatch(GENERATED_ID);
  });

  it("logs each request once as JSON: its id, route, thread, tenant, status and duration", async () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => {});
    try {
      const { json, fake } = setup();
      fake.threads.set("A:t1", thread("t1"));
      const res = await json(
        "/v1/threads/t1/turns",
        { input: "a prompt that says FROBNICATE" },
        { headers: { "x-request-id": "trace-7", "idempotency-key": "key-secret-9" } },
      );
      expect(res.status).toBe(200);
      expect(log).toHaveBeenCalledOnce();
      const text = String(log.mock.calls[0]?.[0]);
      expect(JSON.parse(text)).toEqual({
        level: "info",
        event: "request",
        request_id: "trace-7",
        route: "startTurn",
        thread: "t1",
        method: "POST",
        tenant: "A",
        http_status: 200,
        duration_ms: expect.any(Number),
        at: expect.any(String),
      });
      for (const secret of ["FROBNICATE", keyA, DEV_API_KEY, "Bearer", "key-secret-9"]) {
        expect(text).not.toContain(secret);
      }
    } finally {
      log.mockRestore();
    }
  });
});
