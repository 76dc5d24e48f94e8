import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";

describe("worker", () => {
  it("answers the liveness probe", async () => {
    const res = await exports.default.fetch("http://spindle.test/healthz");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, service: "spindle" });
  });
});
